// The client's own clock: one background thread that runs every timeout the client needs (the
// session's silence check, call deadlines, the reconnect backoff, the bounded wait for the
// writer), instead of System.Threading.Timer and Task.Delay.
//
// Why not Timer: Mono's timer scheduler thread re-sorts its timers with a comparer whenever one
// is added, changed or disposed. When the runtime aborts that thread at exit while it sorts, the
// abort surfaces as an unhandled InvalidOperationException and the process exits with code 1
// (mono/mono#15418; the fix, mono/mono#15454, is not in Debian's Mono 6.8). The client disposed
// its timers just before its host's exit, which is when that happens: the conformance kit's
// goodbye scenario saw exit code 1 once in ~150 runs on a loaded machine. This thread sorts
// nothing: it scans its few entries for the next one due.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;

namespace Toolbridge
{
    internal sealed class Clock
    {
        /// <summary>The clock every session of the process shares (its thread starts on first use).</summary>
        public static readonly Clock Shared = new Clock();

        private readonly object _gate = new object();
        private readonly List<Entry> _entries = new List<Entry>();
        private Thread _thread;

        private sealed class Entry : IDisposable
        {
            public long Due;          // Stopwatch ticks
            public long Period;       // Stopwatch ticks; 0: once
            public Action Callback;
            public volatile bool Cancelled;

            public void Dispose() { Cancelled = true; }
        }

        private static long Ticks(TimeSpan span)
        {
            return (long)(Math.Max(0.0, span.TotalSeconds) * Stopwatch.Frequency);
        }

        /// <summary>Run <paramref name="callback"/> on the thread pool once, after <paramref name="due"/>;
        /// disposing the result before then means it never runs.</summary>
        public IDisposable Schedule(TimeSpan due, Action callback)
        {
            return Add(Ticks(due), 0, callback);
        }

        /// <summary>Run <paramref name="callback"/> on the thread pool every <paramref name="period"/> until
        /// the result is disposed (periods missed while the machine was busy are not made up).</summary>
        public IDisposable Every(TimeSpan period, Action callback)
        {
            var ticks = Math.Max(1, Ticks(period));
            return Add(ticks, ticks, callback);
        }

        /// <summary>Like Task.Delay: completes after <paramref name="milliseconds"/>, or is cancelled with
        /// <paramref name="cancel"/>.</summary>
        public Task Delay(long milliseconds, CancellationToken cancel)
        {
            var done = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
            if (cancel.IsCancellationRequested)
            {
                done.TrySetCanceled(cancel);
                return done.Task;
            }
            var entry = Schedule(TimeSpan.FromMilliseconds(milliseconds), () => done.TrySetResult(true));
            var registration = cancel.Register(() =>
            {
                entry.Dispose();
                done.TrySetCanceled(cancel);
            });
            done.Task.ContinueWith(_ => registration.Dispose(), TaskContinuationOptions.ExecuteSynchronously);
            return done.Task;
        }

        private Entry Add(long dueIn, long period, Action callback)
        {
            if (callback == null) throw new ArgumentNullException("callback");
            var entry = new Entry { Due = Stopwatch.GetTimestamp() + dueIn, Period = period, Callback = callback };
            lock (_gate)
            {
                _entries.Add(entry);
                if (_thread == null)
                {
                    _thread = new Thread(Run) { IsBackground = true, Name = "toolbridge-clock" };
                    _thread.Start();
                }
                Monitor.Pulse(_gate); // it may be due before whatever the thread waits for
            }
            return entry;
        }

        private void Run()
        {
            var due = new List<Action>();
            while (true)
            {
                lock (_gate)
                {
                    var now = Stopwatch.GetTimestamp();
                    var next = long.MaxValue;
                    for (var i = _entries.Count - 1; i >= 0; i--)
                    {
                        var entry = _entries[i];
                        if (entry.Cancelled)
                        {
                            _entries.RemoveAt(i);
                            continue;
                        }
                        if (entry.Due <= now)
                        {
                            due.Add(entry.Callback);
                            if (entry.Period > 0) entry.Due = now + entry.Period;
                            else _entries.RemoveAt(i);
                        }
                        if (entry.Period > 0 || entry.Due > now) next = Math.Min(next, entry.Due);
                    }
                    if (due.Count == 0)
                    {
                        var waitMs = next == long.MaxValue
                            ? Timeout.Infinite
                            : (int)Math.Min(int.MaxValue, Math.Max(1, (next - now) * 1000 / Stopwatch.Frequency + 1));
                        Monitor.Wait(_gate, waitMs);
                        continue;
                    }
                }
                foreach (var callback in due) ThreadPool.QueueUserWorkItem(RunCallback, callback);
                due.Clear();
            }
        }

        private static void RunCallback(object state)
        {
            // The callbacks are the client's own and guard themselves; should one still throw, it
            // must not end the host program (an exception on a pool thread would).
            try { ((Action)state)(); }
            catch (Exception) { }
        }
    }
}
