// One connection to the daemon: register, then read lines and dispatch them until the link
// ends (protocol.md sections 2, 5, 11-13).
//
// Threads: one reader loop reads the socket and answers pings itself (a busy GUI thread never
// delays a pong); one writer loop owns the stream's write side, fed by an outbox queue, so
// handlers on any thread send without blocking and lines never interleave. Every request in
// flight is a CallState in _calls, removed exactly once under _gate: by its answer, by
// toolCancel, at its deadline, or when the link ends. Whatever removes it decides what is sent
// (an answer, a timeout answer, or nothing), so nothing goes out for a call after its cancel.
using System;
using System.Collections.Generic;
using System.IO;
using System.Net.Sockets;
using System.Threading;
using System.Threading.Tasks;

namespace Toolbridge
{
    internal enum SessionEnd { LinkLost, Refused, Stopped }

    internal sealed partial class Session
    {
        public const long DefaultMaxLineBytes = 16L * 1024 * 1024;
        public const int ReadBufferBytes = 64 * 1024;

        private static readonly HashSet<string> FinalCodes = new HashSet<string>
        {
            "invalid_app_name", "invalid_register", "invalid_tool", "duplicate_tool", "too_many_tools",
            "unsupported_version", "invalid_message", "invalid_json", "invalid_utf8", "not_an_object",
            "line_too_long", "not_registered",
        };

        private readonly App _app;
        private readonly Stream _stream;
        private readonly object _gate = new object();
        private readonly Dictionary<long, CallState> _calls = new Dictionary<long, CallState>();
        private readonly Queue<byte[]> _outbox = new Queue<byte[]>();
        private readonly SemaphoreSlim _outboxSignal = new SemaphoreSlim(0);
        private readonly LineFramer _framer = new LineFramer(DefaultMaxLineBytes);
        private bool _closed;
        private bool _outboxClosed;
        private long _maxLineBytes = DefaultMaxLineBytes;
        private int _offeredVersion;
        private long _lastHeardTicks = DateTime.UtcNow.Ticks;
        private long _silenceLimitMs = 20000;
        private long _outboxBytes;

        /// <summary>The most the outbox may hold beyond one line of maxLineBytes: a daemon that stops
        /// reading (it closes such a link after 10 s itself) must not grow the app's memory without bound.</summary>
        internal static long OutboxSlackBytes = 64L * 1024 * 1024;

        public Session(App app, Stream stream)
        {
            _app = app;
            _stream = stream;
        }

        public bool Registered { get; private set; }
        public int Version { get; private set; }
        public RegistrationRejectedException Rejected { get; private set; }
        public bool Replaced { get; private set; }
        public int OfferedVersion { get { return _offeredVersion; } }
        public string AppLabel { get; private set; }

        public async Task<SessionEnd> RunAsync(string token, CancellationToken stop)
        {
            var writer = Task.Run(WriteLoopAsync);
            Version = 1;
            _offeredVersion = _app.SendRegister(token, this);
            var end = SessionEnd.LinkLost;
            using (stop.Register(BeginGoodbye))
            using (Clock.Shared.Every(TimeSpan.FromMilliseconds(100), CheckSilence))
            {
                try { end = await ReadLoopAsync().ConfigureAwait(false); }
                catch (Exception exc) when (exc is IOException || exc is ObjectDisposedException || exc is SocketException)
                {
                    end = SessionEnd.LinkLost;
                }
                catch (Exception exc)
                {
                    // A bug of ours must not take the host app down: report it and reconnect.
                    _app.RaiseProtocolError("internal_error", "the connection's reader failed: " + exc.Message, exc);
                }
            }
            EndCalls();
            CloseOutbox();
            // The writer drains the outbox (goodbye included) and closes the stream; bounded wait.
            if (await Task.WhenAny(writer, Clock.Shared.Delay(2000, CancellationToken.None)).ConfigureAwait(false) != writer) _stream.Dispose();
            _stream.Dispose();
            if (stop.IsCancellationRequested) return SessionEnd.Stopped;
            return end;
        }

        // ---- reading ----

        private async Task<SessionEnd> ReadLoopAsync()
        {
            var buffer = new byte[ReadBufferBytes];
            while (true)
            {
                var count = await _stream.ReadAsync(buffer, 0, buffer.Length).ConfigureAwait(false);
                if (count == 0) return SessionEnd.LinkLost;
                Interlocked.Exchange(ref _lastHeardTicks, DateTime.UtcNow.Ticks);
                foreach (var frame in _framer.Feed(buffer, 0, count))
                {
                    SessionEnd? end;
                    if (frame.Kind == FrameKind.TooLong)
                    {
                        _app.RaiseProtocolError("line_too_long", "the daemon sent a line over " + _framer.MaxLineBytes + " bytes; it was discarded");
                        Send(Wire.Error("line_too_long", "a line over " + _framer.MaxLineBytes + " bytes was discarded"));
                        continue;
                    }
                    var decoded = Wire.Decode(frame.Bytes);
                    if (decoded.Empty) continue;
                    if (decoded.Message == null)
                    {
                        _app.RaiseProtocolError(decoded.ErrorCode, decoded.ErrorMessage);
                        if (Registered) Send(Wire.Error(decoded.ErrorCode, decoded.ErrorMessage));
                        continue;
                    }
                    end = Registered ? Dispatch(decoded.Message) : BeforeRegistered(decoded.Message);
                    if (end.HasValue) return end.Value;
                }
            }
        }

        private SessionEnd? BeforeRegistered(JsonObject message)
        {
            var type = (string)message["type"];
            if (type == "ping")
            {
                Pong(message);
                return null;
            }
            if (type == "error")
            {
                var code = message.Get("code") as string ?? "unknown";
                var text = message.Get("message") as string ?? "";
                if (!true.Equals(message.Get("fatal"))) return null;
                if (FinalCodes.Contains(code))
                {
                    Rejected = new RegistrationRejectedException(code, text);
                    return SessionEnd.Refused;
                }
                _app.RaiseProtocolError(code, "the daemon refused the registration (retrying with backoff): " + text);
                return SessionEnd.Refused;
            }
            if (type != "registered") return null; // nothing else is meant for an app not yet registered
            long? version;
            try
            {
                version = Wire.Long(message, "protocolVersion");
                var limit = Wire.Long(message, "maxLineBytes");
                if (limit.HasValue && limit.Value > 0) _maxLineBytes = limit.Value;
                var heartbeat = Wire.Long(message, "heartbeatIntervalMs");
                // Four missed heartbeats (the daemon's own 20 s at its default 5 s): the link is dead, reconnect.
                if (heartbeat.HasValue && heartbeat.Value > 0) _silenceLimitMs = Math.Max(400, 4 * heartbeat.Value);
            }
            catch (ProtocolException exc)
            {
                Send(Wire.Error("invalid_message", exc.Message));
                return null;
            }
            var negotiated = (int)(version ?? 1);
            if (negotiated > _offeredVersion || negotiated < 1)
            {
                // A broker never answers above the app's version; only a broken one does. Close, do not retry.
                Rejected = new RegistrationRejectedException("unsupported_version",
                    "the daemon answered protocol version " + negotiated + ", this app speaks up to " + _offeredVersion);
                return SessionEnd.Refused;
            }
            _framer.MaxLineBytes = Math.Max(_maxLineBytes, DefaultMaxLineBytes);
            Version = negotiated;
            AppLabel = message.Get("appLabel") as string;
            Registered = true;
            _app.OnRegistered(this, message);
            return null;
        }

        private SessionEnd? Dispatch(JsonObject message)
        {
            var type = (string)message["type"];
            try
            {
                switch (type)
                {
                    case "ping": Pong(message); break;
                    case "pong": case "registered": break;
                    case "toolInvocation": OnInvocation(message); break;
                    case "toolCancel": OnCancel(message); break;
                    case "toolsUpdated": _app.OnToolsUpdated(message); break;
                    case "error": return OnError(message);
                    case "resourceRead":
                    case "promptGet":
                    case "complete":
                    case "elicitResult":
                        if (Version < 2)
                        {
                            Send(Wire.Error("unexpected_message", "'" + type + "' is a protocol version 2 message; this connection speaks version 1", CorrelationIdOf(message)));
                            break;
                        }
                        if (type == "resourceRead") OnResourceRead(message);
                        else if (type == "promptGet") OnPromptGet(message);
                        else if (type == "complete") OnComplete(message);
                        else OnElicitResult(message);
                        break;
                    default:
                        Send(Wire.Error("unknown_type", "unknown message type '" + type + "'"));
                        break;
                }
            }
            catch (ProtocolException exc)
            {
                _app.RaiseProtocolError("invalid_message", "'" + type + "': " + exc.Message);
                Send(Wire.Error("invalid_message", "'" + type + "': " + exc.Message, CorrelationIdOf(message)));
            }
            return null;
        }

        private static long? CorrelationIdOf(JsonObject message)
        {
            var id = message.Get("correlationId");
            return id is long ? (long?)(long)id : null;
        }

        private void Pong(JsonObject ping)
        {
            var pong = new JsonObject().With("type", "pong");
            if (ping.ContainsKey("id")) pong["id"] = ping["id"];
            Send(pong);
        }

        private SessionEnd? OnError(JsonObject message)
        {
            var code = message.Get("code") as string ?? "unknown";
            var text = message.Get("message") as string ?? "";
            // Without a correlationId it may answer the oldest addTools/removeTools (protocol.md section 2).
            if (CorrelationIdOf(message) != null || !_app.OnUpdateRefused(code, text))
                _app.RaiseProtocolError(code, "the daemon reported: " + text);
            if (code == "replaced")
            {
                Replaced = true;
                return SessionEnd.LinkLost;
            }
            return true.Equals(message.Get("fatal")) ? SessionEnd.LinkLost : (SessionEnd?)null;
        }

        private void CheckSilence()
        {
            var silentMs = (DateTime.UtcNow.Ticks - Interlocked.Read(ref _lastHeardTicks)) / TimeSpan.TicksPerMillisecond;
            if (Registered && silentMs > Interlocked.Read(ref _silenceLimitMs))
            {
                _app.RaiseProtocolError("daemon_silent", "nothing from the daemon for " + silentMs + " ms; reconnecting");
                _stream.Dispose(); // the reader ends; the app reconnects
            }
        }

        // ---- writing ----

        /// <summary>Queue a line (dropped once the link has ended).</summary>
        public void Send(JsonObject message)
        {
            var bytes = Wire.Encode(message);
            lock (_gate) { Enqueue(bytes); }
        }

        private void Enqueue(byte[] bytes)
        {
            if (_outboxClosed) return;
            if (_outboxBytes + bytes.Length > _maxLineBytes + OutboxSlackBytes)
            {
                // The daemon is not reading: give up on this link (the app reconnects) rather than queue more.
                _outboxClosed = true;
                _closed = true;
                _outbox.Clear();
                _outboxSignal.Release();
                var waiting = _outboxBytes;
                Task.Run(() => _app.RaiseProtocolError("daemon_not_reading", "the daemon stopped reading; " + waiting + " bytes were waiting to be sent; reconnecting")); // not under _gate
                _stream.Dispose();
                return;
            }
            _outboxBytes += bytes.Length;
            _outbox.Enqueue(bytes);
            _outboxSignal.Release();
        }

        private void BeginGoodbye()
        {
            lock (_gate)
            {
                if (_outboxClosed) return;
                if (Registered) Enqueue(Wire.Encode(new JsonObject().With("type", "goodbye")));
                _closed = true;
                _outboxClosed = true;
                _outboxSignal.Release(); // the writer sees the closed, drained outbox and closes the stream
            }
        }

        private void CloseOutbox()
        {
            lock (_gate)
            {
                _closed = true;
                if (_outboxClosed) return;
                _outboxClosed = true;
                _outboxSignal.Release();
            }
        }

        private async Task WriteLoopAsync()
        {
            try
            {
                while (true)
                {
                    await _outboxSignal.WaitAsync().ConfigureAwait(false);
                    byte[] line = null;
                    bool done;
                    lock (_gate)
                    {
                        if (_outbox.Count > 0)
                        {
                            line = _outbox.Dequeue();
                            _outboxBytes -= line.Length;
                        }
                        done = line == null && _outboxClosed;
                    }
                    if (done) break;
                    if (line == null) continue;
                    await _stream.WriteAsync(line, 0, line.Length).ConfigureAwait(false);
                    await _stream.FlushAsync().ConfigureAwait(false);
                }
            }
            catch (Exception exc) when (exc is IOException || exc is ObjectDisposedException || exc is SocketException || exc is NotSupportedException)
            {
                // the link is gone; the reader notices too
            }
            finally
            {
                _stream.Dispose();
            }
        }

        // ---- calls ----

        private CallState StartCall(long id, string kind, string what, long? timeoutMs)
        {
            var call = new CallState { Id = id, Kind = kind, What = what };
            lock (_gate)
            {
                if (_closed) return null;
                if (_calls.ContainsKey(id)) throw new ProtocolException("the correlationId " + id + " is already in flight");
                _calls[id] = call;
            }
            if (timeoutMs.HasValue && timeoutMs.Value > 0)
                call.Deadline = Clock.Shared.Schedule(TimeSpan.FromMilliseconds(Math.Min(timeoutMs.Value, int.MaxValue)), () => OnDeadline(call));
            return call;
        }

        private bool Remove(CallState call)
        {
            CallState current;
            if (!_calls.TryGetValue(call.Id, out current) || !ReferenceEquals(current, call)) return false;
            _calls.Remove(call.Id);
            if (call.Deadline != null) call.Deadline.Dispose();
            return true;
        }

        /// <summary>Send a call's answer, unless the call already ended (then nothing is sent).</summary>
        internal void Finish(CallState call, JsonObject answer)
        {
            var bytes = Wire.Encode(answer);
            if (bytes.Length - 1 > _maxLineBytes)
            {
                _app.RaiseProtocolError("line_too_long", "the answer to '" + call.What + "' is " + (bytes.Length - 1) + " bytes, over the daemon's limit of " + _maxLineBytes);
                bytes = Wire.Encode(ErrorAnswer(call, "the answer is " + (bytes.Length - 1) + " bytes, over the daemon's line limit of " + _maxLineBytes + " bytes: ask for less", null));
            }
            lock (_gate)
            {
                if (_closed || !Remove(call)) return;
                Enqueue(bytes);
            }
            EndElicits(call);
        }

        /// <summary>Send a line that belongs to a running call (progress, log, elicit); false when it is not running.</summary>
        internal bool SendForCall(CallState call, JsonObject message)
        {
            var bytes = Wire.Encode(message);
            lock (_gate)
            {
                CallState current;
                if (_closed || !_calls.TryGetValue(call.Id, out current) || !ReferenceEquals(current, call)) return false;
                Enqueue(bytes);
                return true;
            }
        }

        private void OnDeadline(object state)
        {
            var call = (CallState)state;
            var answer = Wire.Encode(ErrorAnswer(call, "'" + call.What + "' ran past its deadline and was stopped", "timeout"));
            lock (_gate)
            {
                if (_closed || !Remove(call)) return;
                Enqueue(answer);
            }
            StopCall(call);
        }

        private void OnCancel(JsonObject message)
        {
            var id = Wire.Long(message, "correlationId");
            if (!id.HasValue) throw new ProtocolException("the field 'correlationId' is missing");
            CallState call;
            lock (_gate)
            {
                if (!_calls.TryGetValue(id.Value, out call) || !Remove(call)) return; // already answered: ignored
            }
            StopCall(call);
        }

        private static void StopCall(CallState call)
        {
            EndElicits(call);
            try { call.Cancel.Cancel(); }
            catch (ObjectDisposedException) { }
            catch (AggregateException) { } // a handler's cancel callback threw: the call is over anyway
        }

        private static void EndElicits(CallState call)
        {
            List<TaskCompletionSource<ElicitResult>> waiting;
            lock (call.Elicits)
            {
                waiting = new List<TaskCompletionSource<ElicitResult>>(call.Elicits.Values);
                call.Elicits.Clear();
            }
            foreach (var pending in waiting) pending.TrySetException(new CallNotRunningException());
        }

        private void EndCalls()
        {
            List<CallState> calls;
            lock (_gate)
            {
                _closed = true;
                calls = new List<CallState>(_calls.Values);
                foreach (var call in calls) Remove(call);
            }
            foreach (var call in calls) StopCall(call);
        }

        /// <summary>The failure answer of a call of any kind.</summary>
        internal static JsonObject ErrorAnswer(CallState call, string error, string errorKind)
        {
            var answer = new JsonObject().With("type", call.Kind).With("correlationId", call.Id);
            if (call.Kind == "toolResponse")
            {
                var result = new JsonObject().With("success", false).With("error", error);
                if (errorKind != null) result["errorKind"] = errorKind;
                answer["result"] = result;
            }
            else answer["error"] = error;
            return answer;
        }

        /// <summary>Run a handler (on the app's SynchronizationContext when it has one) and answer its call.</summary>
        private void Run(CallState call, Func<Task<JsonObject>> work)
        {
            Task<JsonObject> running;
            try { running = _app.Dispatch(work); }
            catch (Exception exc) { running = Task.FromException<JsonObject>(exc); }
            running.ContinueWith(done =>
            {
                if (done.IsCanceled) return; // cancelled: the cancel or the deadline already decided
                if (done.IsFaulted)
                {
                    var error = done.Exception.InnerException ?? done.Exception;
                    if (error is OperationCanceledException && call.Cancel.IsCancellationRequested) return;
                    Finish(call, FailureOf(call, error));
                    return;
                }
                Finish(call, done.Result);
            }, TaskScheduler.Default);
        }

        private JsonObject FailureOf(CallState call, Exception error)
        {
            var toolError = error as ToolError;
            if (toolError != null) return ErrorAnswer(call, toolError.Message, toolError.ErrorKind);
            // Masked: the exception's text may hold the user's data or paths; the app's event gets it whole.
            _app.RaiseHandlerFailed(call.What, error);
            return ErrorAnswer(call, "'" + call.What + "' failed with an internal error (" + error.GetType().Name + "); the app's log has the details", null);
        }

        public const int MaxLogDataBytes = 64 * 1024;
        public const int LogBurst = 100;
        public const double LogRatePerSecond = 20;
        private static readonly HashSet<string> LogLevels = new HashSet<string> { "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency" };
        private double _logTokens = LogBurst;
        private readonly System.Diagnostics.Stopwatch _logClock = System.Diagnostics.Stopwatch.StartNew();
        private double _logStamp;

        /// <summary>A log message (protocol.md section 12), or null when it may not go: a version-1 link, or
        /// over the broker's flood bound (100 at once, then 20 per second), which would drop it anyway.</summary>
        internal JsonObject LogMessage(string level, object data, string logger)
        {
            if (!LogLevels.Contains(level ?? "")) throw new ArgumentException("'" + level + "' is not a log level: use one of debug, info, notice, warning, error, critical, alert, emergency");
            if (Version < 2) return null;
            lock (_logClock)
            {
                var now = _logClock.Elapsed.TotalSeconds;
                _logTokens = Math.Min(LogBurst, _logTokens + (now - _logStamp) * LogRatePerSecond);
                _logStamp = now;
                if (_logTokens < 1) return null;
                _logTokens -= 1;
            }
            var message = new JsonObject().With("type", "log").With("level", level).With("data", BoundLogData(Reflection.ToJsonValue(data)));
            if (!string.IsNullOrEmpty(logger)) message["logger"] = logger.Length > 128 ? logger.Substring(0, 128) : logger;
            return message;
        }

        /// <summary>Data within the broker's 64 KiB: a string cut (and marked), anything else replaced by a note.</summary>
        internal static object BoundLogData(object data)
        {
            var size = System.Text.Encoding.UTF8.GetByteCount(Json.Codec.Serialize(data));
            if (size <= MaxLogDataBytes) return data;
            var note = " [... cut: the log data was " + size + " bytes, over the " + MaxLogDataBytes + "-byte limit]";
            var text = data as string;
            if (text == null) return "[log data of " + size + " bytes omitted: over the " + MaxLogDataBytes + "-byte limit]";
            var keep = Math.Min(text.Length, MaxLogDataBytes / 2);
            while (true) // escapes can make the JSON up to six times the characters: shrink until it fits
            {
                if (keep > 0 && char.IsHighSurrogate(text[keep - 1])) keep--;
                var cut = text.Substring(0, keep) + note;
                if (System.Text.Encoding.UTF8.GetByteCount(Json.Codec.Serialize(cut)) <= MaxLogDataBytes) return cut;
                keep /= 2;
            }
        }

        internal Task<ElicitResult> ElicitAsync(CallState call, JsonObject line)
        {
            if (Version < 2)
                return Task.FromResult(new ElicitResult { Action = "cancel", ErrorCode = "elicitation_unsupported", Error = "the daemon speaks protocol version 1 (no elicitation)" });
            var pending = new TaskCompletionSource<ElicitResult>(TaskCreationOptions.RunContinuationsAsynchronously);
            long elicitId;
            lock (call.Elicits)
            {
                elicitId = ++call.NextElicitId;
                call.Elicits[elicitId] = pending;
            }
            line["elicitId"] = elicitId;
            if (!SendForCall(call, line))
            {
                lock (call.Elicits) { call.Elicits.Remove(elicitId); }
                throw new CallNotRunningException();
            }
            return pending.Task;
        }

        private void OnElicitResult(JsonObject message)
        {
            var id = Wire.Long(message, "correlationId");
            var elicitId = Wire.Long(message, "elicitId");
            if (!id.HasValue || !elicitId.HasValue) throw new ProtocolException("the fields 'correlationId' and 'elicitId' are required");
            CallState call;
            lock (_gate)
            {
                if (!_calls.TryGetValue(id.Value, out call)) return; // a stray answer: dropped
            }
            TaskCompletionSource<ElicitResult> pending;
            lock (call.Elicits)
            {
                if (!call.Elicits.TryGetValue(elicitId.Value, out pending)) return;
                call.Elicits.Remove(elicitId.Value);
            }
            var action = message.Get("action") as string ?? "cancel";
            pending.TrySetResult(new ElicitResult
            {
                Action = action,
                Content = message.Get("content") as JsonObject,
                ErrorCode = message.Get("errorCode") as string,
                Error = message.Get("error") as string,
            });
        }
    }
}
