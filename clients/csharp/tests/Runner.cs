// A minimal test runner: every public static method marked [Test] in this assembly runs; the
// exit status is the number of failures. (NUnit 2.6 is in Debian, but the tests need nothing
// from it, and a runner of 80 lines keeps the build one mcs call with no package.)
//
//     mono clients/csharp/bin/Toolbridge.Tests.exe [VECTORS_DIR] [--only NAME]
using System;
using System.Collections.Generic;
using System.Reflection;
using System.Threading.Tasks;

namespace Toolbridge.Tests
{
    [AttributeUsage(AttributeTargets.Method)]
    public sealed class TestAttribute : Attribute { }

    public sealed class AssertionFailed : Exception
    {
        public AssertionFailed(string message) : base(message) { }
    }

    public static class Check
    {
        public static void That(bool condition, string what)
        {
            if (!condition) throw new AssertionFailed(what);
        }

        public static void Equal(object expected, object actual, string what = "")
        {
            if (!Equals(expected, actual)) throw new AssertionFailed(what + ": expected <" + expected + ">, got <" + actual + ">");
        }

        public static T Throws<T>(Action action, string what) where T : Exception
        {
            try { action(); }
            catch (T exc) { return exc; }
            catch (Exception exc) { throw new AssertionFailed(what + ": expected " + typeof(T).Name + ", got " + exc.GetType().Name + ": " + exc.Message); }
            throw new AssertionFailed(what + ": expected " + typeof(T).Name + ", nothing was thrown");
        }
    }

    public static class Runner
    {
        public static string VectorsDir = "";

        public static int Main(string[] args)
        {
            string only = null;
            for (var i = 0; i < args.Length; i++)
            {
                if (args[i] == "--only" && i + 1 < args.Length) only = args[++i];
                else VectorsDir = args[i];
            }
            var failures = 0;
            var ran = 0;
            foreach (var type in typeof(Runner).Assembly.GetTypes())
            {
                foreach (var method in type.GetMethods(BindingFlags.Public | BindingFlags.Static))
                {
                    if (method.GetCustomAttribute<TestAttribute>() == null) continue;
                    var name = type.Name + "." + method.Name;
                    if (only != null && !name.Contains(only)) continue;
                    ran++;
                    try
                    {
                        var result = method.Invoke(null, null) as Task;
                        if (result != null && !result.Wait(TimeSpan.FromSeconds(30))) throw new AssertionFailed("did not finish within 30 s");
                        Console.WriteLine("pass: " + name);
                    }
                    catch (Exception exc)
                    {
                        failures++;
                        var inner = exc;
                        while ((inner is TargetInvocationException || inner is AggregateException) && inner.InnerException != null) inner = inner.InnerException;
                        Console.WriteLine("FAIL: " + name + ": " + inner.GetType().Name + ": " + inner.Message);
                        Console.WriteLine(inner.StackTrace);
                    }
                }
            }
            Console.WriteLine((ran - failures) + " of " + ran + " tests passed");
            return ran == 0 ? 1 : failures;
        }
    }
}
