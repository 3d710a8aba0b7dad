// A small, strict JSON reader and writer (RFC 8259) for the toolbridge client.
//
// Why it exists: the library must build against the .NET Standard 2.0 surface with no package
// (Unity projects avoid dependencies, and no NuGet feed is reachable where it is tested), and
// System.Text.Json is not part of .NET Standard 2.0. Everything else in the library talks to
// JSON through IJsonCodec, so a .NET 8 build can plug System.Text.Json in instead.
//
// The value model is plain objects:
//   JSON object -> JsonObject (a Dictionary<string, object> that keeps insertion order on output)
//   JSON array  -> List<object>
//   string      -> string
//   number      -> long when it is an integer that fits, else double
//   true/false  -> bool
//   null        -> null
// The reader refuses (JsonException) what is not JSON: trailing commas, comments, single quotes,
// leading zeros, lone surrogate escapes are accepted as JSON allows (they decode to a lone UTF-16
// unit), control characters in strings are refused, nesting deeper than MaxDepth is refused
// (no stack overflow on hostile input), numbers outside double's range are refused.
using System;
using System.Collections;
using System.Collections.Generic;
using System.Globalization;
using System.Text;

namespace Toolbridge
{
    /// <summary>What the library needs from a JSON implementation.</summary>
    public interface IJsonCodec
    {
        /// <summary>Parse one JSON text into the value model above; JsonException when it is not JSON.</summary>
        object Parse(string text);

        /// <summary>Write a value of the model (plus arrays, IDictionary, IEnumerable, numbers of any CLR type).</summary>
        string Serialize(object value);
    }

    public sealed class JsonException : Exception
    {
        public JsonException(string message) : base(message) { }
    }

    /// <summary>A JSON object: string keys, insertion order kept.</summary>
    public sealed class JsonObject : IDictionary<string, object>
    {
        private readonly Dictionary<string, object> _map = new Dictionary<string, object>();
        private readonly List<string> _order = new List<string>();

        public object this[string key]
        {
            get { return _map[key]; }
            set
            {
                if (!_map.ContainsKey(key)) _order.Add(key);
                _map[key] = value;
            }
        }

        public ICollection<string> Keys { get { return _order.AsReadOnly(); } }
        public ICollection<object> Values
        {
            get
            {
                var values = new List<object>(_order.Count);
                foreach (var key in _order) values.Add(_map[key]);
                return values;
            }
        }
        public int Count { get { return _order.Count; } }
        public bool IsReadOnly { get { return false; } }

        public void Add(string key, object value)
        {
            _map.Add(key, value);
            _order.Add(key);
        }

        public void Add(KeyValuePair<string, object> item) { Add(item.Key, item.Value); }
        public void Clear() { _map.Clear(); _order.Clear(); }
        public bool Contains(KeyValuePair<string, object> item) { return _map.ContainsKey(item.Key) && Equals(_map[item.Key], item.Value); }
        public bool ContainsKey(string key) { return _map.ContainsKey(key); }

        public void CopyTo(KeyValuePair<string, object>[] array, int arrayIndex)
        {
            foreach (var pair in this) array[arrayIndex++] = pair;
        }

        public IEnumerator<KeyValuePair<string, object>> GetEnumerator()
        {
            foreach (var key in _order) yield return new KeyValuePair<string, object>(key, _map[key]);
        }

        public bool Remove(string key)
        {
            if (!_map.Remove(key)) return false;
            _order.Remove(key);
            return true;
        }

        public bool Remove(KeyValuePair<string, object> item) { return Contains(item) && Remove(item.Key); }
        public bool TryGetValue(string key, out object value) { return _map.TryGetValue(key, out value); }
        IEnumerator IEnumerable.GetEnumerator() { return GetEnumerator(); }

        /// <summary>The value at key, or null when absent.</summary>
        public object Get(string key)
        {
            object value;
            return _map.TryGetValue(key, out value) ? value : null;
        }

        /// <summary>Fluent add, for building messages.</summary>
        public JsonObject With(string key, object value)
        {
            this[key] = value;
            return this;
        }
    }

    /// <summary>The built-in codec (see the file's header).</summary>
    public sealed class Json : IJsonCodec
    {
        /// <summary>Deepest nesting of arrays and objects the reader accepts.</summary>
        public const int MaxDepth = 512;

        public static readonly Json Instance = new Json();

        /// <summary>The codec the library uses; a .NET 8 app may swap in one over System.Text.Json.</summary>
        public static IJsonCodec Codec = Instance;

        public object Parse(string text)
        {
            if (text == null) throw new ArgumentNullException("text");
            var reader = new Reader(text);
            reader.SkipSpace();
            var value = reader.ReadValue(0);
            reader.SkipSpace();
            if (!reader.AtEnd) throw reader.Fail("unexpected text after the value");
            return value;
        }

        public string Serialize(object value)
        {
            var builder = new StringBuilder();
            Write(builder, value, 0);
            return builder.ToString();
        }

        // ---- reader ----

        private sealed class Reader
        {
            private readonly string _text;
            private int _pos;

            public Reader(string text) { _text = text; }

            public bool AtEnd { get { return _pos >= _text.Length; } }

            public JsonException Fail(string what)
            {
                return new JsonException(what + " at offset " + _pos.ToString(CultureInfo.InvariantCulture));
            }

            public void SkipSpace()
            {
                while (_pos < _text.Length)
                {
                    var c = _text[_pos];
                    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') _pos++;
                    else break;
                }
            }

            public object ReadValue(int depth)
            {
                if (AtEnd) throw Fail("unexpected end of input");
                var c = _text[_pos];
                switch (c)
                {
                    case '{': return ReadObject(depth + 1);
                    case '[': return ReadArray(depth + 1);
                    case '"': return ReadString();
                    case 't': Expect("true"); return true;
                    case 'f': Expect("false"); return false;
                    case 'n': Expect("null"); return null;
                    default:
                        if (c == '-' || (c >= '0' && c <= '9')) return ReadNumber();
                        throw Fail("unexpected character '" + c + "'");
                }
            }

            private void Expect(string word)
            {
                if (string.CompareOrdinal(_text, _pos, word, 0, word.Length) != 0) throw Fail("invalid literal");
                _pos += word.Length;
            }

            private JsonObject ReadObject(int depth)
            {
                if (depth > MaxDepth) throw Fail("nesting deeper than " + MaxDepth);
                _pos++; // {
                var result = new JsonObject();
                SkipSpace();
                if (!AtEnd && _text[_pos] == '}') { _pos++; return result; }
                while (true)
                {
                    SkipSpace();
                    if (AtEnd || _text[_pos] != '"') throw Fail("expected a string key");
                    var key = ReadString();
                    SkipSpace();
                    if (AtEnd || _text[_pos] != ':') throw Fail("expected ':'");
                    _pos++;
                    SkipSpace();
                    result[key] = ReadValue(depth); // a repeated key: the last one wins, as in most parsers
                    SkipSpace();
                    if (AtEnd) throw Fail("unterminated object");
                    var c = _text[_pos++];
                    if (c == '}') return result;
                    if (c != ',') throw Fail("expected ',' or '}'");
                }
            }

            private List<object> ReadArray(int depth)
            {
                if (depth > MaxDepth) throw Fail("nesting deeper than " + MaxDepth);
                _pos++; // [
                var result = new List<object>();
                SkipSpace();
                if (!AtEnd && _text[_pos] == ']') { _pos++; return result; }
                while (true)
                {
                    SkipSpace();
                    result.Add(ReadValue(depth));
                    SkipSpace();
                    if (AtEnd) throw Fail("unterminated array");
                    var c = _text[_pos++];
                    if (c == ']') return result;
                    if (c != ',') throw Fail("expected ',' or ']'");
                }
            }

            private string ReadString()
            {
                _pos++; // opening quote
                StringBuilder builder = null;
                var start = _pos;
                while (true)
                {
                    if (AtEnd) throw Fail("unterminated string");
                    var c = _text[_pos];
                    if (c == '"')
                    {
                        string result;
                        if (builder == null) result = _text.Substring(start, _pos - start);
                        else result = builder.Append(_text, start, _pos - start).ToString();
                        _pos++;
                        return result;
                    }
                    if (c < 0x20) throw Fail("control character in a string");
                    if (c != '\\') { _pos++; continue; }
                    if (builder == null) builder = new StringBuilder();
                    builder.Append(_text, start, _pos - start);
                    _pos++;
                    if (AtEnd) throw Fail("unterminated escape");
                    var e = _text[_pos++];
                    switch (e)
                    {
                        case '"': builder.Append('"'); break;
                        case '\\': builder.Append('\\'); break;
                        case '/': builder.Append('/'); break;
                        case 'b': builder.Append('\b'); break;
                        case 'f': builder.Append('\f'); break;
                        case 'n': builder.Append('\n'); break;
                        case 'r': builder.Append('\r'); break;
                        case 't': builder.Append('\t'); break;
                        case 'u': builder.Append(ReadHex4()); break;
                        default: throw Fail("invalid escape '\\" + e + "'");
                    }
                    start = _pos;
                }
            }

            private char ReadHex4()
            {
                if (_pos + 4 > _text.Length) throw Fail("truncated \\u escape");
                var code = 0;
                for (var i = 0; i < 4; i++)
                {
                    var h = _text[_pos++];
                    int digit;
                    if (h >= '0' && h <= '9') digit = h - '0';
                    else if (h >= 'a' && h <= 'f') digit = h - 'a' + 10;
                    else if (h >= 'A' && h <= 'F') digit = h - 'A' + 10;
                    else throw Fail("invalid \\u escape");
                    code = code * 16 + digit;
                }
                return (char)code;
            }

            private object ReadNumber()
            {
                var start = _pos;
                if (_text[_pos] == '-') _pos++;
                if (AtEnd) throw Fail("truncated number");
                if (_text[_pos] == '0')
                {
                    _pos++;
                    if (!AtEnd && _text[_pos] >= '0' && _text[_pos] <= '9') throw Fail("leading zero in a number");
                }
                else if (_text[_pos] >= '1' && _text[_pos] <= '9') SkipDigits();
                else throw Fail("invalid number");
                var integral = true;
                if (!AtEnd && _text[_pos] == '.')
                {
                    integral = false;
                    _pos++;
                    if (AtEnd || _text[_pos] < '0' || _text[_pos] > '9') throw Fail("digit expected after '.'");
                    SkipDigits();
                }
                if (!AtEnd && (_text[_pos] == 'e' || _text[_pos] == 'E'))
                {
                    integral = false;
                    _pos++;
                    if (!AtEnd && (_text[_pos] == '+' || _text[_pos] == '-')) _pos++;
                    if (AtEnd || _text[_pos] < '0' || _text[_pos] > '9') throw Fail("digit expected in exponent");
                    SkipDigits();
                }
                var token = _text.Substring(start, _pos - start);
                long whole;
                if (integral && long.TryParse(token, NumberStyles.AllowLeadingSign, CultureInfo.InvariantCulture, out whole))
                    return whole;
                double real;
                if (!double.TryParse(token, NumberStyles.Float, CultureInfo.InvariantCulture, out real)
                    || double.IsInfinity(real) || double.IsNaN(real))
                    throw Fail("number out of range");
                return real;
            }

            private void SkipDigits()
            {
                while (!AtEnd && _text[_pos] >= '0' && _text[_pos] <= '9') _pos++;
            }
        }

        // ---- writer ----

        private static void Write(StringBuilder builder, object value, int depth)
        {
            if (depth > MaxDepth) throw new JsonException("nesting deeper than " + MaxDepth);
            if (value == null) { builder.Append("null"); return; }
            var text = value as string;
            if (text != null) { WriteString(builder, text); return; }
            if (value is bool) { builder.Append((bool)value ? "true" : "false"); return; }
            if (value is double || value is float)
            {
                var real = Convert.ToDouble(value, CultureInfo.InvariantCulture);
                if (double.IsNaN(real) || double.IsInfinity(real)) throw new JsonException("NaN and infinities are not JSON");
                if (real == Math.Floor(real) && Math.Abs(real) < 1e15) builder.Append(((long)real).ToString(CultureInfo.InvariantCulture));
                else builder.Append(real.ToString("R", CultureInfo.InvariantCulture));
                return;
            }
            if (value is decimal) { builder.Append(((decimal)value).ToString(CultureInfo.InvariantCulture)); return; }
            if (value is int || value is long || value is short || value is sbyte || value is byte
                || value is uint || value is ulong || value is ushort)
            {
                builder.Append(Convert.ToString(value, CultureInfo.InvariantCulture));
                return;
            }
            if (value is Enum) { WriteString(builder, value.ToString()); return; }
            if (value is char) { WriteString(builder, value.ToString()); return; }
            var bytes = value as byte[];
            if (bytes != null) { WriteString(builder, Convert.ToBase64String(bytes)); return; }
            var raw = value as JsonRaw;
            if (raw != null) { builder.Append(raw.Text); return; }
            var dictionary = value as IDictionary;
            if (dictionary != null)
            {
                builder.Append('{');
                var first = true;
                foreach (DictionaryEntry entry in dictionary) WriteMember(builder, Convert.ToString(entry.Key, CultureInfo.InvariantCulture), entry.Value, depth, ref first);
                builder.Append('}');
                return;
            }
            var pairs = value as IEnumerable<KeyValuePair<string, object>>;
            if (pairs != null)
            {
                builder.Append('{');
                var first = true;
                foreach (var pair in pairs) WriteMember(builder, pair.Key, pair.Value, depth, ref first);
                builder.Append('}');
                return;
            }
            var sequence = value as IEnumerable;
            if (sequence != null)
            {
                builder.Append('[');
                var first = true;
                foreach (var item in sequence)
                {
                    if (!first) builder.Append(',');
                    first = false;
                    Write(builder, item, depth + 1);
                }
                builder.Append(']');
                return;
            }
            throw new JsonException("cannot write a " + value.GetType().Name + " as JSON (use JsonObject, lists, strings, numbers, booleans)");
        }

        private static void WriteMember(StringBuilder builder, string key, object value, int depth, ref bool first)
        {
            if (!first) builder.Append(',');
            first = false;
            WriteString(builder, key);
            builder.Append(':');
            Write(builder, value, depth + 1);
        }

        private static void WriteString(StringBuilder builder, string text)
        {
            builder.Append('"');
            var start = 0;
            for (var i = 0; i < text.Length; i++)
            {
                var c = text[i];
                string escape = null;
                switch (c)
                {
                    case '"': escape = "\\\""; break;
                    case '\\': escape = "\\\\"; break;
                    case '\n': escape = "\\n"; break;
                    case '\r': escape = "\\r"; break;
                    case '\t': escape = "\\t"; break;
                    case '\b': escape = "\\b"; break;
                    case '\f': escape = "\\f"; break;
                    default:
                        // Control characters, and lone surrogates (which UTF-8 cannot carry), as \u escapes;
                        // U+2028/2029 too, so the line is also valid JavaScript.
                        if (c < 0x20 || c == '\u2028' || c == '\u2029') escape = Hex(c);
                        else if (char.IsHighSurrogate(c))
                        {
                            if (i + 1 < text.Length && char.IsLowSurrogate(text[i + 1])) { i++; continue; }
                            escape = Hex(c);
                        }
                        else if (char.IsLowSurrogate(c)) escape = Hex(c);
                        break;
                }
                if (escape == null) continue;
                builder.Append(text, start, i - start).Append(escape);
                start = i + 1;
            }
            builder.Append(text, start, text.Length - start).Append('"');
        }

        private static string Hex(char c)
        {
            return "\\u" + ((int)c).ToString("x4", CultureInfo.InvariantCulture);
        }
    }

    /// <summary>Already-encoded JSON, written as it is (for a schema given as a string, checked when made).</summary>
    public sealed class JsonRaw
    {
        public readonly string Text;

        public JsonRaw(string text)
        {
            Json.Codec.Parse(text); // refuse what is not JSON now, not on the wire
            Text = text;
        }
    }
}
