// Schema generation and argument binding, backoff, discovery, template matching; and the
// client against a scripted daemon on a real loopback socket (reconnect with the same
// instanceId, cancel, deadlines, the GUI-thread option, events instead of exceptions).
using System;
using System.Collections.Generic;
using System.ComponentModel;
using System.IO;
using System.Net;
using System.Net.Sockets;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Toolbridge.Tests
{
    public enum Color { Red, Green }

    public sealed class Point
    {
        public int X;
        public int Y;
        [Description("a label")] public string Label { get; set; }
    }

    public sealed class SampleTools
    {
        [Tool("Echo the text")]
        public string Echo([Description("the text")] string text) { return text; }

        [Tool("Every kind of parameter", Name = "kinds", PathGuard = false)]
        public JsonObject Kinds(string s, int i, double d, bool b, Color color, int[] numbers, List<string> words, Point point,
                                CancellationToken cancel, ToolContext context, int? maybe = null, string greeting = "hi")
        {
            return new JsonObject().With("s", s).With("i", i).With("d", d).With("b", b).With("color", color.ToString())
                .With("sum", numbers[0] + numbers[1]).With("words", words.Count).With("x", point.X).With("label", point.Label)
                .With("maybe", maybe).With("greeting", greeting).With("tool", context.ToolName);
        }

        [Tool("Async", ExampleRequests = new[] { "my pallet came in, log it", "we just unloaded the truck" })]
        public async Task<Point> Later(int x)
        {
            await Task.Yield();
            return new Point { X = x, Y = 2, Label = "p" };
        }

        public string NotATool() { return ""; }

        [Prompt("Review a file")]
        public string review([Description("the file")] string path, string focus = "bugs") { return "Review " + path + " for " + focus + "."; }

        [Resource("notes://today", MimeType = "text/markdown")]
        public string today() { return "# Today"; }

        [Resource("notes://pages/{name}")]
        public async Task<string> page(string name, RequestContext context) { await Task.Yield(); return "# " + name + " " + context.Uri; }
    }

    public static class AppTests
    {
        private static readonly Json J = Json.Instance;

        [Test]
        public static void SchemaIsDerivedFromParameterTypes()
        {
            var tools = Reflection.ToolsOf(typeof(SampleTools), new SampleTools());
            Check.Equal(3, tools.Count, "only [Tool] methods");
            var echo = tools.Find(t => t.Name == "Echo");
            Check.Equal("{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\",\"description\":\"the text\"}},\"required\":[\"text\"],\"additionalProperties\":false}",
                J.Serialize(echo.InputSchema));
            Check.Equal("Echo the text", echo.Description);
            var kinds = tools.Find(t => t.Name == "kinds");
            Check.Equal(false, kinds.PathGuard, "pathGuard opt-out");
            Check.Equal(
                "{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\"},\"i\":{\"type\":\"integer\"},\"d\":{\"type\":\"number\"},"
                + "\"b\":{\"type\":\"boolean\"},\"color\":{\"type\":\"string\",\"enum\":[\"Red\",\"Green\"]},"
                + "\"numbers\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"}},\"words\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
                + "\"point\":{\"type\":\"object\",\"properties\":{\"X\":{\"type\":\"integer\"},\"Y\":{\"type\":\"integer\"},\"Label\":{\"type\":\"string\",\"description\":\"a label\"}},\"required\":[\"X\",\"Y\"]},"
                + "\"maybe\":{\"type\":\"integer\"},\"greeting\":{\"type\":\"string\",\"default\":\"hi\"}},"
                + "\"required\":[\"s\",\"i\",\"d\",\"b\",\"color\",\"numbers\",\"words\",\"point\"],\"additionalProperties\":false}",
                J.Serialize(kinds.InputSchema));
        }

        [Test]
        public static void ExampleRequestsAreCheckedAndSentOnlyWhenGiven()
        {
            var tools = Reflection.ToolsOf(typeof(SampleTools), new SampleTools());
            var later = tools.Find(t => t.Name == "Later");
            Check.Equal("[\"my pallet came in, log it\",\"we just unloaded the truck\"]", J.Serialize(later.ToJson()["exampleRequests"]), "from the attribute");
            Check.That(!tools.Find(t => t.Name == "Echo").ToJson().ContainsKey("exampleRequests"), "left out when not set");
            ToolHandler handler = (arguments, context) => Task.FromResult<object>("ok");
            var app = new App("Examples");
            var given = new[] { " padded ", new string('x', 200), string.Concat(System.Linq.Enumerable.Repeat("\U0001F69A", 200)) };
            var tool = app.AddTool(new ToolDefinition { Name = "given", ExampleRequests = given, Handler = handler });
            given[0] = "";
            Check.Equal(" padded ", tool.ExampleRequests[0], "a copy, not trimmed; 200 code points pass though 400 UTF-16 units");
            Check.That(!app.AddTool(new ToolDefinition { Name = "empty", ExampleRequests = new string[0], Handler = handler }).ToJson().ContainsKey("exampleRequests"),
                "an empty list is left out");
            var sixteen = new string[16];
            for (var i = 0; i < 16; i++) sixteen[i] = "request " + i;
            app.AddTool(new ToolDefinition { Name = "sixteen", ExampleRequests = sixteen, Handler = handler });
            var bad = new[]
            {
                new[] { "fine", "" }, new[] { " \t\n" }, new string[] { null }, new[] { new string('x', 201) },
                System.Linq.Enumerable.ToArray(System.Linq.Enumerable.Concat(sixteen, new[] { "one more" })),
            };
            var messages = new List<string>();
            foreach (var examples in bad)
                messages.Add(Check.Throws<ArgumentException>(() => app.AddTool(new ToolDefinition { Name = "bad", ExampleRequests = examples, Handler = handler }),
                    "refused: " + string.Join("|", examples)).Message);
            Check.Equal("the tool 'bad': ExampleRequests[1] is empty or only whitespace; give at most 16 strings of 1-200 characters, not only whitespace", messages[0]);
            Check.That(messages[1].Contains("only whitespace") && messages[2].Contains("[0] is null"), messages[1] + " / " + messages[2]);
            Check.That(messages[3].Contains("is 201 characters"), messages[3]);
            Check.Equal("the tool 'bad': ExampleRequests has 17 entries, over the limit of 16; keep the most typical ones", messages[4]);
            Check.That(!app.RemoveTool("bad"), "a refused tool is not added");
        }

        [Test]
        public static async Task PromptsAndResourcesFromAttributes()
        {
            var target = new SampleTools();
            var prompts = Reflection.PromptsOf(typeof(SampleTools), target);
            Check.Equal(1, prompts.Count);
            Check.Equal("{\"name\":\"review\",\"description\":\"Review a file\",\"arguments\":[{\"name\":\"path\",\"description\":\"the file\",\"required\":true},{\"name\":\"focus\"}]}",
                J.Serialize(prompts[0].ToJson()));
            var context = new RequestContext(null, new CallState { Id = 1 }) { Uri = "notes://pages/plan" };
            Check.Equal("Review a.py for bugs.", await prompts[0].Render(new Dictionary<string, string> { { "path", "a.py" } }, context));
            var resources = new List<ResourceDefinition>();
            var templates = new List<TemplateDefinition>();
            Reflection.ResourcesOf(typeof(SampleTools), target, resources, templates);
            Check.Equal("{\"uri\":\"notes://today\",\"name\":\"today\",\"mimeType\":\"text/markdown\"}", J.Serialize(resources[0].ToJson()));
            Check.Equal("# Today", await resources[0].Read(context));
            Check.Equal("notes://pages/{name}", templates[0].UriTemplate);
            Check.Equal("# plan notes://pages/plan", await templates[0].Read(new Dictionary<string, string> { { "name", "plan" } }, context));
        }

        private static ToolContext NoContext(string tool)
        {
            return new ToolContext(null, new CallState { Id = 1 }, false) { ToolName = tool };
        }

        [Test]
        public static async Task ArgumentsAreBoundToTheParameterTypes()
        {
            var tools = Reflection.ToolsOf(typeof(SampleTools), new SampleTools());
            var kinds = tools.Find(t => t.Name == "kinds");
            var arguments = (JsonObject)J.Parse("{\"s\":\"a\",\"i\":3,\"d\":2,\"b\":true,\"color\":\"Green\",\"numbers\":[1,2],\"words\":[\"x\"],\"point\":{\"X\":7,\"Label\":\"L\"}}");
            var result = (JsonObject)await kinds.Handler(arguments, NoContext("kinds"));
            Check.Equal("{\"s\":\"a\",\"i\":3,\"d\":2,\"b\":true,\"color\":\"Green\",\"sum\":3,\"words\":1,\"x\":7,\"label\":\"L\",\"maybe\":null,\"greeting\":\"hi\",\"tool\":\"kinds\"}",
                J.Serialize(result));
            var later = tools.Find(t => t.Name == "Later");
            var point = await later.Handler((JsonObject)J.Parse("{\"x\":5}"), NoContext("Later"));
            Check.Equal("{\"X\":5,\"Y\":2,\"Label\":\"p\"}", J.Serialize(Reflection.ToJsonValue(point)), "a Task<T>'s value, as its members");
            arguments["i"] = "three";
            try
            {
                await kinds.Handler(arguments, NoContext("kinds"));
                throw new AssertionFailed("a string for an int must be refused");
            }
            catch (ToolError error)
            {
                Check.Equal("invalid_arguments", error.ErrorKind);
                Check.That(error.Message.Contains("'i'"), "names the argument: " + error.Message);
            }
        }

        [Test]
        public static void BackoffDoublesToItsCapAndResets()
        {
            var backoff = new Backoff(100, 5000, () => 1.0);
            var delays = new List<double>();
            for (var i = 0; i < 8; i++) delays.Add(backoff.NextDelayMs());
            Check.Equal("100,200,400,800,1600,3200,5000,5000", string.Join(",", delays));
            backoff.Reset();
            Check.Equal(100.0, backoff.NextDelayMs());
            Check.Equal(0.0, new Backoff(100, 5000, () => 0.0).NextDelayMs(), "full jitter");
        }

        [Test]
        public static void TemplatesMatchAndPercentDecode()
        {
            var variables = App.MatchTemplate("notes://pages/{name}", "notes://pages/plan%20b");
            Check.Equal("plan b", variables["name"]);
            Check.That(App.MatchTemplate("notes://pages/{name}", "notes://pages/a/b") == null, "a variable does not span '/'");
            Check.That(App.MatchTemplate("notes://pages/{name}", "notes://other/x") == null, "literal text must match");
            Check.Equal("7", App.MatchTemplate("a://{x}/b/{y}", "a://3/b/7")["y"]);
        }

        private static string TempHome()
        {
            var home = Path.Combine(Path.GetTempPath(), "tb-cs-" + Guid.NewGuid().ToString("N"));
            Directory.CreateDirectory(home);
            return home;
        }

        [Test]
        public static void DiscoveryFollowsEnvironmentThenHome()
        {
            var home = TempHome();
            var env = new Dictionary<string, string>();
            var options = new DiscoveryOptions { Home = home, Environment = name => env.ContainsKey(name) ? env[name] : null };
            Check.Throws<DaemonNotFoundException>(() => Discovery.FindDaemon(options), "no runtime.json: not found, never a default port");
            File.WriteAllText(Path.Combine(home, "runtime.json"), "{\"pid\":1,\"host\":\"127.0.0.1\",\"port\":4321,\"socket\":\"/tmp/x.sock\"}");
            File.WriteAllText(Path.Combine(home, "token"), "secret\n");
            var address = Discovery.FindDaemon(options);
            Check.Equal(4321, address.Port);
            Check.Equal("secret", address.Token);
            Check.Equal("/tmp/x.sock", address.Socket, "the socket when the address came from runtime.json");
            Check.That(!address.ToString().Contains("secret"), "the token is not in ToString");
            env["TOOLBRIDGE_PORT"] = "0";
            Check.Equal(4321, Discovery.FindDaemon(options).Port, "port 0 counts as unset");
            env["TOOLBRIDGE_PORT"] = "5555";
            env["TOOLBRIDGE_TOKEN"] = "other";
            env["TOOLBRIDGE_HOST"] = "localhost";
            address = Discovery.FindDaemon(options);
            Check.Equal(5555, address.Port);
            Check.Equal("other", address.Token);
            Check.Equal(null, address.Socket, "a chosen host: no socket");
            env["TOOLBRIDGE_PORT"] = "99999";
            Check.Throws<DaemonNotFoundException>(() => Discovery.FindDaemon(options), "a bad port");
            env["TOOLBRIDGE_PORT"] = "";
            File.WriteAllText(Path.Combine(home, "runtime.json"), "{\"pid\":1,\"host\":\"127.0.0.1\",\"port\":4321,\"tls\":true,\"tlsCert\":\"/c.pem\"}");
            address = Discovery.FindDaemon(options);
            Check.That(address.Tls && address.TlsPin == "/c.pem", "runtime.json's TLS pins the daemon's certificate");
            Directory.Delete(home, true);
        }

        // ---- against a scripted daemon ----

        /// <summary>One end of the app's connection, read line by line.</summary>
        private sealed class Peer : IDisposable
        {
            private readonly TcpClient _client;
            private readonly StreamReader _reader;
            private readonly Stream _stream;

            public Peer(TcpClient client)
            {
                _client = client;
                _stream = client.GetStream();
                _reader = new StreamReader(_stream, new UTF8Encoding(false));
            }

            public async Task<JsonObject> ReadAsync(int withinMs = 5000)
            {
                var line = _reader.ReadLineAsync();
                if (await Task.WhenAny(line, Task.Delay(withinMs)) != line) throw new AssertionFailed("no line from the app within " + withinMs + " ms");
                if (line.Result == null) throw new AssertionFailed("the app closed the connection");
                return (JsonObject)Json.Instance.Parse(line.Result);
            }

            public void Send(string line)
            {
                var bytes = Encoding.UTF8.GetBytes(line + "\n");
                _stream.Write(bytes, 0, bytes.Length);
            }

            public void Dispose() { _client.Dispose(); }
        }

        private static async Task<Peer> AcceptAsync(TcpListener listener, int withinMs = 5000)
        {
            var accept = listener.AcceptTcpClientAsync();
            if (await Task.WhenAny(accept, Task.Delay(withinMs)) != accept) throw new AssertionFailed("the app did not connect");
            return new Peer(accept.Result);
        }

        private static App NewApp(TcpListener listener, AppOptions options = null)
        {
            options = options ?? new AppOptions();
            var port = ((IPEndPoint)listener.LocalEndpoint).Port;
            options.Discovery = new DiscoveryOptions { Port = port, Token = "t0k", Host = "127.0.0.1", Home = "/nonexistent", Environment = name => null };
            var app = new App("Scripted", options);
            app.Backoff = new Backoff(10, 50);
            return app;
        }

        private const string Registered = "{\"type\":\"registered\",\"appId\":\"app-1\",\"instanceId\":\"i\",\"appLabel\":\"Scripted\",\"toolNames\":{},\"heartbeatIntervalMs\":5000,\"protocolVersion\":1}";

        [Test]
        public static async Task ReconnectsWithTheSameInstanceIdAndSaysGoodbye()
        {
            var listener = new TcpListener(IPAddress.Loopback, 0);
            listener.Start();
            var app = NewApp(listener);
            app.AddTools(new SampleTools());
            var errors = new List<string>();
            app.ProtocolError += (s, e) => { lock (errors) errors.Add(e.Code); };
            var stop = new CancellationTokenSource();
            var running = app.RunAsync(stop.Token);
            string first;
            using (var peer = await AcceptAsync(listener))
            {
                var register = await peer.ReadAsync();
                Check.Equal("register", register["type"]);
                Check.Equal("t0k", register["token"]);
                first = (string)register["instanceId"];
                Check.That(Guid.Parse(first) != Guid.Empty, "a UUID instanceId");
                peer.Send(Registered);
                peer.Send("{\"type\":\"toolInvocation\",\"correlationId\":1,\"tool\":\"Echo\",\"parameters\":{\"text\":\"hi\"}}");
                var response = await peer.ReadAsync();
                Check.Equal("{\"type\":\"toolResponse\",\"correlationId\":1,\"result\":{\"success\":true,\"data\":\"hi\"}}", Json.Instance.Serialize(response));
            } // the daemon drops the link
            using (var peer = await AcceptAsync(listener))
            {
                var register = await peer.ReadAsync();
                Check.Equal(first, register["instanceId"], "the same instanceId after a reconnect");
                peer.Send(Registered);
                peer.Send("{\"type\":\"ping\",\"id\":7}");
                Check.Equal(7L, (await peer.ReadAsync())["id"]);
                stop.Cancel();
                Check.Equal("goodbye", (await peer.ReadAsync())["type"], "goodbye on stop");
            }
            await running;
            listener.Stop();
        }

        [Test]
        public static async Task CancelAndDeadlineFireTheTokenAndOnlyTheDeadlineAnswers()
        {
            var listener = new TcpListener(IPAddress.Loopback, 0);
            listener.Start();
            var app = NewApp(listener, new AppOptions { MaxConcurrency = 2 });
            var cancelled = new TaskCompletionSource<bool>();
            app.AddTool("wait", "", "{\"type\":\"object\"}", async (arguments, context) =>
            {
                try { await Task.Delay(-1, context.CancellationToken); }
                catch (OperationCanceledException) { cancelled.TrySetResult(true); throw; }
                return null;
            });
            app.AddTool("crash", "", null, (arguments, context) => { throw new InvalidOperationException("secret path /home/me"); });
            var failures = new List<Exception>();
            app.HandlerFailed += (s, e) => { lock (failures) failures.Add(e.Exception); };
            var stop = new CancellationTokenSource();
            var running = app.RunAsync(stop.Token);
            using (var peer = await AcceptAsync(listener))
            {
                await peer.ReadAsync();
                peer.Send(Registered);
                peer.Send("{\"type\":\"toolInvocation\",\"correlationId\":1,\"tool\":\"wait\",\"parameters\":{}}");
                peer.Send("{\"type\":\"toolCancel\",\"correlationId\":1,\"reason\":\"cancelled\"}");
                Check.That(await Task.WhenAny(cancelled.Task, Task.Delay(5000)) == cancelled.Task, "the token fired on toolCancel");
                peer.Send("{\"type\":\"toolInvocation\",\"correlationId\":2,\"tool\":\"wait\",\"parameters\":{},\"timeoutMs\":50}");
                var timeout = await peer.ReadAsync();
                Check.Equal(2L, timeout["correlationId"], "nothing was sent for call 1; call 2 answered at its deadline");
                Check.Equal("timeout", ((JsonObject)timeout["result"])["errorKind"]);
                peer.Send("{\"type\":\"toolInvocation\",\"correlationId\":3,\"tool\":\"crash\",\"parameters\":{}}");
                var crash = (JsonObject)(await peer.ReadAsync())["result"];
                Check.Equal(false, crash["success"]);
                Check.That(!((string)crash["error"]).Contains("/home/me"), "the exception's text is masked: " + crash["error"]);
                Check.Equal(1, failures.Count, "HandlerFailed has the exception");
                stop.Cancel();
            }
            await running;
            listener.Stop();
        }

        [Test]
        public static async Task ADaemonThatStopsReadingIsLeftAndTheAppReconnects()
        {
            var listener = new TcpListener(IPAddress.Loopback, 0);
            listener.Start();
            var app = NewApp(listener, new AppOptions { MaxConcurrency = 64 });
            var big = new string('x', 512 * 1024);
            app.AddTool("big", "", null, (arguments, context) => Task.FromResult<object>(big));
            var errors = new List<string>();
            app.ProtocolError += (s, e) => { lock (errors) errors.Add(e.Code); };
            var saved = Session.OutboxSlackBytes;
            Session.OutboxSlackBytes = 1024 * 1024;
            var stop = new CancellationTokenSource();
            var running = app.RunAsync(stop.Token);
            try
            {
                using (var peer = await AcceptAsync(listener))
                {
                    await peer.ReadAsync();
                    peer.Send(Registered);
                    // The daemon asks for 64 large answers and never reads them: more than the socket's
                    // buffers plus the outbox's bound.
                    for (var i = 1; i <= 64; i++) peer.Send("{\"type\":\"toolInvocation\",\"correlationId\":" + i + ",\"tool\":\"big\",\"parameters\":{}}");
                    using (var again = await AcceptAsync(listener, 10000))
                    {
                        Check.Equal("register", (await again.ReadAsync())["type"], "a new link after the stalled one");
                        lock (errors) Check.That(errors.Contains("daemon_not_reading"), "reported: " + string.Join(",", errors));
                        stop.Cancel();
                    }
                }
                await running;
            }
            finally
            {
                Session.OutboxSlackBytes = saved;
                listener.Stop();
            }
        }

        /// <summary>A UI thread: one thread pumping posted callbacks, as WinForms' or a Unity main-thread pump.</summary>
        private sealed class PumpContext : SynchronizationContext, IDisposable
        {
            private readonly System.Collections.Concurrent.BlockingCollection<Action> _queue = new System.Collections.Concurrent.BlockingCollection<Action>();
            public readonly Thread Thread;

            public PumpContext()
            {
                Thread = new Thread(() =>
                {
                    SetSynchronizationContext(this);
                    foreach (var work in _queue.GetConsumingEnumerable()) work();
                });
                Thread.IsBackground = true;
                Thread.Start();
            }

            public override void Post(SendOrPostCallback d, object state) { _queue.Add(() => d(state)); }
            public void Dispose() { _queue.CompleteAdding(); }
        }

        [Test]
        public static async Task HandlersRunOnTheUiThreadAndPingsAreAnsweredWhileItIsBusy()
        {
            var listener = new TcpListener(IPAddress.Loopback, 0);
            listener.Start();
            using (var ui = new PumpContext())
            {
                var app = NewApp(listener, new AppOptions { SynchronizationContext = ui });
                var release = new ManualResetEventSlim();
                Thread ranOn = null, resumedOn = null;
                app.AddTool("busy", "", null, async (arguments, context) =>
                {
                    ranOn = Thread.CurrentThread;
                    release.Wait(5000); // the UI thread is busy
                    await Task.Delay(10);
                    resumedOn = Thread.CurrentThread; // awaits come back to the UI thread
                    return "done";
                });
                var stop = new CancellationTokenSource();
                var running = app.RunAsync(stop.Token);
                using (var peer = await AcceptAsync(listener))
                {
                    await peer.ReadAsync();
                    peer.Send(Registered);
                    peer.Send("{\"type\":\"toolInvocation\",\"correlationId\":1,\"tool\":\"busy\",\"parameters\":{}}");
                    peer.Send("{\"type\":\"ping\",\"id\":1}");
                    Check.Equal("pong", (await peer.ReadAsync())["type"], "a pong while the UI thread is busy");
                    release.Set();
                    var response = await peer.ReadAsync();
                    Check.Equal("done", ((JsonObject)response["result"])["data"]);
                    Check.That(ranOn == ui.Thread && resumedOn == ui.Thread, "the handler ran on the UI thread");
                    stop.Cancel();
                }
                await running;
            }
            listener.Stop();
        }

        [Test]
        public static async Task ToolUpdatesAreSentAndTheirAnswersPairedFirstInFirstOut()
        {
            var listener = new TcpListener(IPAddress.Loopback, 0);
            listener.Start();
            var app = NewApp(listener);
            app.AddTool("first", "", null, (a, c) => Task.FromResult<object>(null));
            var refused = new TaskCompletionSource<string>();
            app.ProtocolError += (s, e) => { if (e.Code == "duplicate_tool") refused.TrySetResult(e.Message); };
            var stop = new CancellationTokenSource();
            var running = app.RunAsync(stop.Token);
            using (var peer = await AcceptAsync(listener))
            {
                var register = await peer.ReadAsync();
                Check.Equal(1, ((List<object>)register["tools"]).Count);
                peer.Send(Registered);
                peer.Send("{\"type\":\"ping\",\"id\":1}");
                await peer.ReadAsync(); // registered by now
                app.AddTool("second", "", null, (a, c) => Task.FromResult<object>(null));
                app.RemoveTool("first");
                var add = await peer.ReadAsync();
                Check.Equal("addTools", add["type"]);
                Check.Equal("second", ((JsonObject)((List<object>)add["tools"])[0])["name"]);
                Check.Equal("{\"type\":\"removeTools\",\"names\":[\"first\"]}", Json.Instance.Serialize(await peer.ReadAsync()));
                peer.Send("{\"type\":\"error\",\"code\":\"duplicate_tool\",\"message\":\"no\"}"); // answers the oldest: addTools
                Check.That(await Task.WhenAny(refused.Task, Task.Delay(5000)) == refused.Task, "the refusal is reported");
                Check.That(refused.Task.Result.Contains("'addTools'"), refused.Task.Result);
                stop.Cancel();
            }
            await running;
            listener.Stop();
        }

        [Test]
        public static async Task ReplacedByAnotherProcessEndsRunAsync()
        {
            var listener = new TcpListener(IPAddress.Loopback, 0);
            listener.Start();
            var app = NewApp(listener);
            var running = app.RunAsync(CancellationToken.None);
            using (var peer = await AcceptAsync(listener))
            {
                await peer.ReadAsync();
                peer.Send(Registered);
                peer.Send("{\"type\":\"error\",\"code\":\"replaced\",\"message\":\"another connection registered this instance\",\"fatal\":true}");
                try
                {
                    await running;
                    throw new AssertionFailed("RunAsync should end with InstanceReplacedException");
                }
                catch (InstanceReplacedException) { }
            }
            listener.Stop();
        }

        [Test]
        public static async Task AMainThreadPumpRunsHandlersOnlyWhenPumped()
        {
            var listener = new TcpListener(IPAddress.Loopback, 0);
            listener.Start();
            var pump = new MainThreadPump();
            var app = NewApp(listener, new AppOptions { SynchronizationContext = pump });
            Thread ranOn = null, resumedOn = null;
            app.AddTool("frame", "", null, async (arguments, context) =>
            {
                ranOn = Thread.CurrentThread;
                await Task.Yield(); // continues on the next RunPending
                resumedOn = Thread.CurrentThread;
                return "framed";
            });
            var stop = new CancellationTokenSource();
            var running = app.RunAsync(stop.Token);
            var frames = 0;
            var mainThread = new Thread(() =>
            {
                while (!stop.IsCancellationRequested) { pump.RunPending(); frames++; Thread.Sleep(5); } // a frame loop
            });
            using (var peer = await AcceptAsync(listener))
            {
                await peer.ReadAsync();
                peer.Send(Registered);
                peer.Send("{\"type\":\"toolInvocation\",\"correlationId\":1,\"tool\":\"frame\",\"parameters\":{}}");
                peer.Send("{\"type\":\"ping\",\"id\":1}");
                Check.Equal("pong", (await peer.ReadAsync())["type"], "the pong needs no frame");
                Check.That(ranOn == null, "nothing ran before the first frame");
                mainThread.Start();
                var response = await peer.ReadAsync();
                Check.Equal("framed", ((JsonObject)response["result"])["data"]);
                Check.That(ranOn == mainThread && resumedOn == mainThread, "the handler ran, and resumed, in the frame loop");
                stop.Cancel();
            }
            await running;
            mainThread.Join();
            listener.Stop();
        }

        [Test]
        public static async Task AFinalRefusalEndsRunAsyncAndAnythingElseIsRetried()
        {
            var listener = new TcpListener(IPAddress.Loopback, 0);
            listener.Start();
            var app = NewApp(listener);
            var stop = new CancellationTokenSource();
            var running = app.RunAsync(stop.Token);
            using (var peer = await AcceptAsync(listener))
            {
                await peer.ReadAsync();
                peer.Send("{\"type\":\"error\",\"code\":\"unauthorized\",\"message\":\"no\",\"fatal\":true}");
            }
            using (var peer = await AcceptAsync(listener))
            {
                await peer.ReadAsync();
                peer.Send("{\"type\":\"error\",\"code\":\"invalid_app_name\",\"message\":\"bad name\",\"fatal\":true}");
                try
                {
                    await running;
                    throw new AssertionFailed("RunAsync should end with RegistrationRejectedException");
                }
                catch (RegistrationRejectedException exc)
                {
                    Check.Equal("invalid_app_name", exc.Code);
                }
            }
            listener.Stop();
        }
    }
}
