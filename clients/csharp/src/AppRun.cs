// The connection loop and the app's events (see App.cs).
using System;
using System.Collections.Generic;
using System.IO;
using System.Net.Sockets;
using System.Security.Authentication;
using System.Threading;
using System.Threading.Tasks;

namespace Toolbridge
{
    /// <summary>Exponential backoff with full jitter: a random delay up to 0.1 s, doubling to a cap of 5 s.</summary>
    public sealed class Backoff
    {
        private readonly Func<double> _random;
        private int _attempt;

        public Backoff(double initialMs = 100, double capMs = 5000, Func<double> random = null)
        {
            InitialMs = initialMs;
            CapMs = capMs;
            var source = new Random();
            _random = random ?? (() => { lock (source) { return source.NextDouble(); } });
        }

        public double InitialMs { get; private set; }
        public double CapMs { get; private set; }

        /// <summary>The largest delay the next attempt may draw.</summary>
        public double Ceiling { get { return Math.Min(CapMs, InitialMs * Math.Pow(2, Math.Min(_attempt, 64))); } }

        /// <summary>The delay before the next attempt (ms); counts the attempt.</summary>
        public double NextDelayMs()
        {
            var delay = _random() * Ceiling;
            _attempt++;
            return delay;
        }

        /// <summary>After a registration (never after a refused connection).</summary>
        public void Reset() { _attempt = 0; }
    }

    public sealed partial class App
    {
        private CancellationTokenSource _running;
        private Task _runTask;
        private readonly Queue<string> _pendingUpdates = new Queue<string>();
        private bool _resourcesChanged, _promptsChanged;

        /// <summary>The backoff between attempts (tests shorten it).</summary>
        public Backoff Backoff = new Backoff();

        /// <summary>Stay registered until stop fires (then goodbye, close, return). Throws
        /// RegistrationRejectedException when the broker refuses the registration for good, and
        /// InstanceReplacedException when another process registered the same instanceId.</summary>
        public async Task RunAsync(CancellationToken stop)
        {
            while (!stop.IsCancellationRequested)
            {
                var registered = false;
                try
                {
                    var address = Discovery.FindDaemon(_options.Discovery);
                    var stream = await Transport.ConnectAsync(address, stop).ConfigureAwait(false);
                    var session = new Session(this, stream);
                    var end = await session.RunAsync(address.Token, stop).ConfigureAwait(false);
                    registered = session.Registered;
                    if (registered) RaiseDisconnected();
                    if (session.Rejected != null)
                    {
                        RaiseProtocolError(session.Rejected.Code, "the daemon refused the registration for good: " + session.Rejected.Message);
                        throw session.Rejected;
                    }
                    if (session.Replaced && end != SessionEnd.Stopped)
                        throw new InstanceReplacedException("another process registered the instance '" + InstanceId + "' of " + Name + "; this one stopped");
                    if (end == SessionEnd.Stopped) return;
                }
                catch (OperationCanceledException) when (stop.IsCancellationRequested) { return; }
                catch (DaemonNotFoundException exc) { RaiseProtocolError("daemon_not_found", exc.Message); }
                catch (Exception exc) when (exc is IOException || exc is SocketException || exc is AuthenticationException || exc is ObjectDisposedException)
                {
                    RaiseProtocolError("connect_failed", "cannot connect to the daemon: " + exc.Message, exc);
                }
                finally
                {
                    lock (_lock) { _session = null; _pendingUpdates.Clear(); } // the next register carries the whole set
                }
                if (registered) Backoff.Reset();
                try { await Clock.Shared.Delay((long)Backoff.NextDelayMs(), stop).ConfigureAwait(false); }
                catch (OperationCanceledException) { return; }
            }
        }

        /// <summary>Start RunAsync on a background task (for apps without an async main).</summary>
        public void Start()
        {
            lock (_lock)
            {
                if (_runTask != null) throw new InvalidOperationException("the app is running already");
                _running = new CancellationTokenSource();
                var stop = _running.Token;
                _runTask = Task.Run(async () =>
                {
                    try { await RunAsync(stop).ConfigureAwait(false); }
                    catch (RegistrationRejectedException) { } // reported through ProtocolError
                    catch (InstanceReplacedException) { }     // reported through ProtocolError ("replaced")
                    catch (Exception exc) { RaiseProtocolError("internal_error", "the connection loop failed: " + exc.Message, exc); }
                });
            }
        }

        /// <summary>Stop: goodbye, close, and wait (at most timeout) for the loop to end. Never blocks on a UI thread's own work:
        /// call StopAsync from a UI thread.</summary>
        public Task StopAsync()
        {
            Task running;
            lock (_lock)
            {
                if (_runTask == null) return Task.FromResult(0);
                _running.Cancel();
                running = _runTask;
                _runTask = null;
            }
            return running;
        }

        // ---- from the session ----

        internal void OnRegistered(Session session, JsonObject message)
        {
            bool resources, prompts;
            lock (_lock)
            {
                resources = _resourcesChanged;
                prompts = _promptsChanged;
                _resourcesChanged = _promptsChanged = false;
            }
            if (resources) SendResources(); // changed between the register and its answer
            if (prompts) SendPrompts();
            var args = new RegisteredEventArgs { AppLabel = message.Get("appLabel") as string, ProtocolVersion = session.Version };
            var names = message.Get("toolNames") as JsonObject;
            if (names != null) foreach (var pair in names) if (pair.Value is string) args.ToolNames[pair.Key] = (string)pair.Value;
            Raise(() => { var handler = Registered; if (handler != null) handler(this, args); });
        }

        internal void OnToolsUpdated(JsonObject message)
        {
            lock (_lock) { if (_pendingUpdates.Count > 0) _pendingUpdates.Dequeue(); }
        }

        /// <summary>An error without correlationId: the answer to the oldest update, when one is pending.</summary>
        internal bool OnUpdateRefused(string code, string text)
        {
            string update = null;
            lock (_lock) { if (_pendingUpdates.Count > 0) update = _pendingUpdates.Dequeue(); }
            if (update == null) return false;
            RaiseProtocolError(code, "the daemon refused '" + update + "': " + text);
            return true;
        }

        private void SendToolUpdate(JsonObject update)
        {
            Session session;
            lock (_lock)
            {
                session = _session;
                if (session == null) return; // the next register carries the whole set
                _pendingUpdates.Enqueue((string)update["type"]); // answers come first in, first out (protocol.md section 2)
                session.Send(update);
            }
        }

        private void SendResources()
        {
            lock (_lock)
            {
                var session = _session;
                if (session == null) return; // the next register carries the whole set
                if (!session.Registered) { _resourcesChanged = true; return; } // sent once registered (version 2)
                if (session.Version < 2) return; // a version-1 link cannot carry them
                var message = new JsonObject().With("type", "setResources");
                var resources = new List<object>();
                foreach (var resource in _resources) resources.Add(resource.ToJson());
                var templates = new List<object>();
                foreach (var template in _templates) templates.Add(template.ToJson());
                session.Send(message.With("resources", resources).With("resourceTemplates", templates));
            }
        }

        private void SendPrompts()
        {
            lock (_lock)
            {
                var session = _session;
                if (session == null) return;
                if (!session.Registered) { _promptsChanged = true; return; }
                if (session.Version < 2) return;
                var prompts = new List<object>();
                foreach (var prompt in _prompts) prompts.Add(prompt.ToJson());
                session.Send(new JsonObject().With("type", "setPrompts").With("prompts", prompts));
            }
        }

        internal void RaiseProtocolError(string code, string message, Exception exception = null)
        {
            var args = new ProtocolErrorEventArgs(code, message, exception);
            Raise(() => { var handler = ProtocolError; if (handler != null) handler(this, args); });
        }

        internal void RaiseHandlerFailed(string what, Exception exception)
        {
            var args = new HandlerFailedEventArgs { What = what, Exception = exception };
            Raise(() => { var handler = HandlerFailed; if (handler != null) handler(this, args); });
        }

        private void RaiseDisconnected()
        {
            Raise(() => { var handler = Disconnected; if (handler != null) handler(this, EventArgs.Empty); });
        }

        /// <summary>Events run on the app's SynchronizationContext when it has one; a throwing subscriber is contained.</summary>
        private void Raise(Action raise)
        {
            SendOrPostCallback safe = _ =>
            {
                try { raise(); }
                catch (Exception) { } // a subscriber's bug must not end the connection (or the app)
            };
            var context = _options.SynchronizationContext;
            if (context != null) context.Post(safe, null);
            else safe(null);
        }
    }
}
