// Json.cs, tested hard: every conformance vector, malformed input, deep nesting, surrogate
// pairs, numbers at the limits; and the framer's line limits.
using System;
using System.Collections.Generic;
using System.IO;
using System.Text;

namespace Toolbridge.Tests
{
    public static class JsonTests
    {
        private static object Parse(string text) { return Json.Instance.Parse(text); }
        private static string Write(object value) { return Json.Instance.Serialize(value); }

        [Test]
        public static void EveryKitVectorParsesAndRoundTrips()
        {
            var files = Directory.GetFiles(Runner.VectorsDir, "*.json");
            Check.That(files.Length >= 60, "the kit's vectors are found (" + Runner.VectorsDir + ")");
            foreach (var file in files)
            {
                var text = File.ReadAllText(file, Encoding.UTF8);
                var value = Parse(text);
                var vector = value as JsonObject;
                Check.That(vector != null && vector.Get("steps") is List<object>, file + " is a vector");
                var again = Parse(Write(value));
                Check.Equal(Write(value), Write(again), file + " round trip");
                Check.Equal(Path.GetFileNameWithoutExtension(file), vector["name"], "name");
            }
        }

        [Test]
        public static void MalformedInputIsRefused()
        {
            var bad = new[]
            {
                "", " ", "{", "}", "[", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "{'a':1}", "01", "-01", "1.", ".5", "+1", "-",
                "1e", "1e+", "0x10", "NaN", "Infinity", "-Infinity", "1e400", "-1e400", "nul", "tru", "falsey", "[1 2]",
                "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\u12G4\"", "\"a\nb\"", "\"tab\there\"", "// c\n1", "/* c */ 1", "{} {}", "[] x",
                "\"\\", "[\"a\",]", "{\"a\":}", "{,}", "[,1]", "\u00a0 1",
            };
            foreach (var text in bad) Check.Throws<JsonException>(() => Parse(text), "refuses " + text.Replace("\n", "\\n"));
        }

        [Test]
        public static void ValuesMapToTheModel()
        {
            var value = (JsonObject)Parse(" {\"s\":\"x\",\"i\":42,\"f\":1.5,\"t\":true,\"n\":null,\"a\":[1,\"b\"],\"o\":{}} ");
            Check.Equal("x", value["s"]);
            Check.Equal(42L, value["i"]);
            Check.Equal(1.5, value["f"]);
            Check.Equal(true, value["t"]);
            Check.That(value.ContainsKey("n") && value["n"] == null, "null is kept");
            Check.Equal(2, ((List<object>)value["a"]).Count);
            Check.Equal("{\"s\":\"x\",\"i\":42,\"f\":1.5,\"t\":true,\"n\":null,\"a\":[1,\"b\"],\"o\":{}}", Write(value), "key order kept");
        }

        [Test]
        public static void DeepNestingIsBoundedWithoutAStackOverflow()
        {
            var ok = new string('[', Json.MaxDepth) + new string(']', Json.MaxDepth);
            Parse(ok);
            var tooDeep = new string('[', Json.MaxDepth + 1) + new string(']', Json.MaxDepth + 1);
            Check.Throws<JsonException>(() => Parse(tooDeep), "one level too deep");
            var hostile = new StringBuilder();
            for (var i = 0; i < 1000000; i++) hostile.Append("{\"a\":");
            Check.Throws<JsonException>(() => Parse(hostile.ToString()), "a million open objects");
            object nested = 1L;
            for (var i = 0; i < Json.MaxDepth + 10; i++) nested = new List<object> { nested };
            Check.Throws<JsonException>(() => Write(nested), "writing is bounded too");
        }

        [Test]
        public static void SurrogatePairsAndEscapes()
        {
            Check.Equal("\U0001F600", Parse("\"\\ud83d\\ude00\""), "escaped pair");
            Check.Equal("\U0001F600", Parse("\"\U0001F600\""), "raw pair");
            Check.Equal("\"\U0001F600\"", Write("\U0001F600"), "a pair is written as it is");
            Check.Equal("\"\\ud800\"", Write("\ud800"), "a lone high surrogate is escaped (UTF-8 cannot carry it)");
            Check.Equal("\"\\udc00x\"", Write("\udc00x"), "a lone low surrogate is escaped");
            Check.Equal("\ud800", Parse(Write("\ud800")), "and reads back");
            Check.Equal("\"\\u0000\\u001f\\n\\r\\t\\\"\\\\/\\u2028\"", Write("\0\u001f\n\r\t\"\\/\u2028"), "controls escaped");
            Check.Equal("\b\f\n\r\t\"\\/", Parse("\"\\b\\f\\n\\r\\t\\\"\\\\\\/\""), "every escape");
            Check.Equal("\u00e9\u4e2d", Parse("\"\\u00E9\\u4e2d\""), "hex case");
        }

        [Test]
        public static void NumbersAtTheLimits()
        {
            Check.Equal(long.MaxValue, Parse("9223372036854775807"));
            Check.Equal(long.MinValue, Parse("-9223372036854775808"));
            Check.Equal(9223372036854775808.0, Parse("9223372036854775808"), "past long: a double");
            Check.Equal(double.MaxValue, Parse("1.7976931348623157e308"));
            Check.Equal(double.Epsilon, Parse("5e-324"));
            Check.Equal(0.0, Parse("1e-400"), "underflow is zero");
            Check.Equal(0L, Parse("-0"));
            Check.Equal(-0.0, Parse("-0.0"));
            Check.Equal(100.0, Parse("1E2"));
            Check.Equal("9223372036854775807", Write(long.MaxValue));
            Check.Equal("-9223372036854775808", Write(long.MinValue));
            Check.Equal("18446744073709551615", Write(ulong.MaxValue));
            Check.Equal("0.1", Write(0.1));
            Check.Equal("3", Write(3.0), "an integral double");
            Check.Equal(double.MaxValue, Parse(Write(double.MaxValue)), "max double round trip");
            Check.Equal(1e20, Parse(Write(1e20)), "1e20 round trip");
            Check.Equal(double.Epsilon, Parse(Write(double.Epsilon)), "smallest double round trip");
            Check.Throws<JsonException>(() => Write(double.NaN), "NaN");
            Check.Throws<JsonException>(() => Write(double.PositiveInfinity), "infinity");
        }

        [Test]
        public static void RawJsonIsCheckedWhenMade()
        {
            Check.Equal("{\"a\":[1]}", Write(new JsonObject().With("a", new JsonRaw("[1]"))));
            Check.Throws<JsonException>(() => new JsonRaw("{\"type\":"), "a broken schema string");
        }

        [Test]
        public static void LogDataIsBoundedBeforeItIsSent()
        {
            Check.Equal("small", Session.BoundLogData("small"));
            var cut = (string)Session.BoundLogData(new string('\u0001', 100000)); // escaped: six bytes each
            Check.That(Encoding.UTF8.GetByteCount(Write(cut)) <= Session.MaxLogDataBytes, "fits after escaping");
            Check.That(cut.EndsWith("-byte limit]"), "marked as cut");
            var big = new JsonObject().With("x", new string('y', 70000));
            Check.That(((string)Session.BoundLogData(big)).StartsWith("[log data of 7"), "an object becomes a note");
        }

        // ---- framing ----

        private static byte[] Bytes(string text) { return Encoding.UTF8.GetBytes(text); }

        [Test]
        public static void FramerKeepsTheLimitExactly()
        {
            var framer = new LineFramer(10);
            var frames = framer.Feed(Bytes("0123456789\n01234567890\nab\r\n"), 0, 27);
            Check.Equal(3, frames.Count);
            Check.Equal(FrameKind.Line, frames[0].Kind, "exactly the limit is a line");
            Check.Equal(FrameKind.TooLong, frames[1].Kind, "one byte more is discarded");
            Check.Equal("ab", Encoding.UTF8.GetString(frames[2].Bytes), "CR stripped; the next line is read");
            var crAtLimit = framer.Feed(Bytes("012345678\r\n"), 0, 11);
            Check.Equal(FrameKind.Line, crAtLimit[0].Kind, "a CR counts toward the limit (10 bytes)");
            Check.Equal(FrameKind.TooLong, framer.Feed(Bytes("0123456789\r\n"), 0, 12)[0].Kind, "11 bytes with the CR");
        }

        [Test]
        public static void FramerJoinsChunksAndDiscardsWithoutHoldingTheLine()
        {
            var framer = new LineFramer(16);
            Check.Equal(0, framer.Feed(Bytes("{\"type\":"), 0, 8).Count);
            var frames = framer.Feed(Bytes("\"ping\"}\n"), 0, 8);
            Check.Equal("{\"type\":\"ping\"}", Encoding.UTF8.GetString(frames[0].Bytes));
            for (var i = 0; i < 100; i++) Check.Equal(0, framer.Feed(new byte[1000], 0, 1000).Count);
            frames = framer.Feed(Bytes("x\n{}\n"), 0, 5);
            Check.Equal(2, frames.Count);
            Check.Equal(FrameKind.TooLong, frames[0].Kind);
            Check.Equal("{}", Encoding.UTF8.GetString(frames[1].Bytes));
        }

        [Test]
        public static void DecodeNamesTheProtocolCodes()
        {
            Check.Equal("invalid_utf8", Wire.Decode(new byte[] { 0xff, 0x7b, 0x7d }).ErrorCode);
            Check.Equal("invalid_utf8", Wire.Decode(new byte[] { 0x22, 0xed, 0xa0, 0x80, 0x22 }).ErrorCode, "an encoded surrogate is not UTF-8");
            Check.Equal("invalid_json", Wire.Decode(Bytes("nope")).ErrorCode);
            Check.Equal("not_an_object", Wire.Decode(Bytes("[1]")).ErrorCode);
            Check.Equal("invalid_message", Wire.Decode(Bytes("{\"type\":5}")).ErrorCode);
            Check.That(Wire.Decode(Bytes("  ")).Empty, "blank lines are ignored");
            Check.Equal("ping", Wire.Decode(Bytes("{\"type\":\"ping\"}")).Message["type"]);
        }
    }
}
