// The client's own clock (src/Clock.cs), which replaces System.Threading.Timer and Task.Delay
// so that Mono's timer thread is idle when a host program exits (mono/mono#15418).
using System;
using System.Threading;
using System.Threading.Tasks;

namespace Toolbridge.Tests
{
    public static class ClockTests
    {
        [Test]
        public static void ScheduledCallbacksRunAndDisposedOnesNever()
        {
            var clock = new Clock();
            var early = new ManualResetEventSlim();
            var late = new ManualResetEventSlim();
            var never = 0;
            var cancelled = clock.Schedule(TimeSpan.FromMilliseconds(10), () => Interlocked.Increment(ref never));
            clock.Schedule(TimeSpan.FromMilliseconds(80), late.Set);
            clock.Schedule(TimeSpan.FromMilliseconds(20), early.Set);
            cancelled.Dispose();
            Check.That(late.Wait(10000) && early.Wait(10000), "both callbacks ran");
            Check.Equal(0, Interlocked.CompareExchange(ref never, 0, 0), "the disposed callback never ran");
        }

        [Test]
        public static void EveryRepeatsUntilDisposed()
        {
            var clock = new Clock();
            var count = 0;
            var thrice = new ManualResetEventSlim();
            var every = clock.Every(TimeSpan.FromMilliseconds(10), () =>
            {
                if (Interlocked.Increment(ref count) == 3) thrice.Set();
            });
            Check.That(thrice.Wait(10000), "it ran three times");
            every.Dispose();
            var after = Interlocked.CompareExchange(ref count, 0, 0);
            var later = new ManualResetEventSlim();
            clock.Schedule(TimeSpan.FromMilliseconds(100), later.Set); // ten periods on
            Check.That(later.Wait(10000), "the later callback ran");
            Check.That(Interlocked.CompareExchange(ref count, 0, 0) <= after + 1, "at most one run already queued came after Dispose");
        }

        [Test]
        public static void DelayCompletesOrIsCancelled()
        {
            var clock = new Clock();
            Check.That(clock.Delay(20, CancellationToken.None).Wait(10000), "a delay completes");
            var stop = new CancellationTokenSource();
            var long_ = clock.Delay(60000, stop.Token);
            stop.Cancel();
            Check.Throws<AggregateException>(() => long_.Wait(10000), "a cancelled delay ends at once, cancelled");
            Check.That(long_.IsCanceled, "the task is cancelled");
            Check.That(clock.Delay(20, stop.Token).IsCanceled, "a delay with a cancelled token is cancelled from the start");
        }
    }
}
