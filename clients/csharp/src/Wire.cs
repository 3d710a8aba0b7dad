// The NDJSON wire (protocol.md section 1), sans-IO: bytes in, decoded lines out.
//
// LineFramer splits a byte stream at '\n' and bounds each line: a line longer than the limit
// (bytes before the '\n'; a '\r' before it counts) is discarded as it streams in, never held
// whole, and reported once as TooLong when its '\n' arrives. Decode turns one line into a
// message object or the protocol's error code for it (invalid_utf8, invalid_json,
// not_an_object, invalid_message), so the session answers bad lines without ending.
using System;
using System.Collections.Generic;
using System.IO;
using System.Text;

namespace Toolbridge
{
    public enum FrameKind { Line, TooLong }

    public struct Frame
    {
        public FrameKind Kind;
        public byte[] Bytes; // the line without '\n' (and without a trailing '\r'); null for TooLong
    }

    public sealed class LineFramer
    {
        private readonly MemoryStream _pending = new MemoryStream();
        private bool _discarding;

        public LineFramer(long maxLineBytes) { MaxLineBytes = maxLineBytes; }

        /// <summary>The longest line accepted; the session raises it to registered.maxLineBytes.</summary>
        public long MaxLineBytes { get; set; }

        /// <summary>Feed bytes; returns the complete lines (and discarded over-long lines) in them.</summary>
        public List<Frame> Feed(byte[] data, int offset, int count)
        {
            var frames = new List<Frame>();
            var end = offset + count;
            var start = offset;
            while (start < end)
            {
                var newline = Array.IndexOf(data, (byte)'\n', start, end - start);
                var stop = newline < 0 ? end : newline;
                if (!_discarding)
                {
                    if (_pending.Length + (stop - start) > MaxLineBytes)
                    {
                        _discarding = true;
                        _pending.SetLength(0);
                    }
                    else _pending.Write(data, start, stop - start);
                }
                if (newline < 0) break;
                if (_discarding) frames.Add(new Frame { Kind = FrameKind.TooLong });
                else frames.Add(new Frame { Kind = FrameKind.Line, Bytes = TakeLine() });
                _discarding = false;
                _pending.SetLength(0);
                start = newline + 1;
            }
            return frames;
        }

        private byte[] TakeLine()
        {
            var bytes = _pending.ToArray();
            if (bytes.Length > 0 && bytes[bytes.Length - 1] == (byte)'\r') Array.Resize(ref bytes, bytes.Length - 1);
            return bytes;
        }
    }

    /// <summary>One decoded line: the message, or why it is not one.</summary>
    public sealed class Decoded
    {
        public JsonObject Message;
        public string ErrorCode;    // invalid_utf8, invalid_json, not_an_object, invalid_message
        public string ErrorMessage;
        public bool Empty;
    }

    public static class Wire
    {
        private static readonly UTF8Encoding StrictUtf8 = new UTF8Encoding(false, true);
        private static readonly UTF8Encoding Utf8 = new UTF8Encoding(false, false);

        public static Decoded Decode(byte[] line)
        {
            if (line.Length == 0) return new Decoded { Empty = true };
            string text;
            try { text = StrictUtf8.GetString(line); }
            catch (ArgumentException) { return Bad("invalid_utf8", "the line is not valid UTF-8"); }
            if (text.Trim().Length == 0) return new Decoded { Empty = true };
            object value;
            try { value = Json.Codec.Parse(text); }
            catch (JsonException exc) { return Bad("invalid_json", "the line is not valid JSON (" + exc.Message + ")"); }
            var message = value as JsonObject;
            if (message == null) return Bad("not_an_object", "the line is not a JSON object");
            if (!(message.Get("type") is string)) return Bad("invalid_message", "the message has no string field 'type'");
            return new Decoded { Message = message };
        }

        private static Decoded Bad(string code, string message)
        {
            return new Decoded { ErrorCode = code, ErrorMessage = message };
        }

        /// <summary>The line for a message, '\n' included.</summary>
        public static byte[] Encode(object message)
        {
            return Utf8.GetBytes(Json.Codec.Serialize(message) + "\n");
        }

        public static JsonObject Error(string code, string message, long? correlationId = null)
        {
            var error = new JsonObject().With("type", "error").With("code", code).With("message", message);
            if (correlationId.HasValue) error["correlationId"] = correlationId.Value;
            return error;
        }

        // Typed field access that says which field is wrong (for invalid_message).
        public static long? Long(JsonObject message, string field)
        {
            var value = message.Get(field);
            if (value == null) return null;
            if (value is long) return (long)value;
            if (value is double && (double)value == Math.Floor((double)value) && Math.Abs((double)value) < 9e15) return (long)(double)value;
            throw new ProtocolException("the field '" + field + "' is not an integer");
        }

        public static string String(JsonObject message, string field, bool required)
        {
            var value = message.Get(field);
            if (value == null)
            {
                if (required) throw new ProtocolException("the field '" + field + "' is missing");
                return null;
            }
            var text = value as string;
            if (text == null) throw new ProtocolException("the field '" + field + "' is not a string");
            return text;
        }

        public static JsonObject Object(JsonObject message, string field)
        {
            var value = message.Get(field);
            if (value == null) return new JsonObject();
            var obj = value as JsonObject;
            if (obj == null) throw new ProtocolException("the field '" + field + "' is not an object");
            return obj;
        }
    }

    /// <summary>A message from the daemon with a missing or mistyped field (answered with invalid_message).</summary>
    public sealed class ProtocolException : Exception
    {
        public ProtocolException(string message) : base(message) { }
    }
}
