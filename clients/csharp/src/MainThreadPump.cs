// A SynchronizationContext for a thread that runs a frame loop instead of a message loop (a
// game's main thread, a Unity MonoBehaviour that prefers its own pump to Unity's context, a test):
// Post queues the work; the owner calls RunPending() once per frame, on its thread, and the
// queued handlers (and their continuations) run there. Nothing ever blocks the frame loop.
using System;
using System.Collections.Generic;
using System.Threading;

namespace Toolbridge
{
    public sealed class MainThreadPump : SynchronizationContext
    {
        private readonly object _lock = new object();
        private Queue<KeyValuePair<SendOrPostCallback, object>> _queue = new Queue<KeyValuePair<SendOrPostCallback, object>>();

        public override void Post(SendOrPostCallback callback, object state)
        {
            lock (_lock) { _queue.Enqueue(new KeyValuePair<SendOrPostCallback, object>(callback, state)); }
        }

        /// <summary>Send from another thread would wait for the next frame; the library never calls it.</summary>
        public override void Send(SendOrPostCallback callback, object state)
        {
            throw new NotSupportedException("MainThreadPump runs posted work only (call RunPending from the main thread)");
        }

        public override SynchronizationContext CreateCopy() { return this; }

        /// <summary>Run the work queued so far (work it queues runs on the next call). Returns how many ran.
        /// An exception of one callback is passed to onError (default: rethrown after the rest ran).</summary>
        public int RunPending(Action<Exception> onError = null)
        {
            Queue<KeyValuePair<SendOrPostCallback, object>> batch;
            lock (_lock)
            {
                if (_queue.Count == 0) return 0;
                batch = _queue;
                _queue = new Queue<KeyValuePair<SendOrPostCallback, object>>();
            }
            var previous = Current;
            SetSynchronizationContext(this); // awaits inside handlers come back here
            Exception first = null;
            var ran = 0;
            try
            {
                foreach (var work in batch)
                {
                    ran++;
                    try { work.Key(work.Value); }
                    catch (Exception exc)
                    {
                        if (onError != null) onError(exc);
                        else if (first == null) first = exc;
                    }
                }
            }
            finally
            {
                SetSynchronizationContext(previous);
            }
            if (first != null) System.Runtime.ExceptionServices.ExceptionDispatchInfo.Capture(first).Throw();
            return ran;
        }
    }
}
