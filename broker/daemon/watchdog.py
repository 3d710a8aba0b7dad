"""The loop-stall watchdog: how responsive the daemon's event loop is, and what blocked it.

Theory of operation
-------------------
Every tool call, heartbeat and line of every connection is served by one trio event loop, so
anything that blocks it (a catastrophic regex, a schema compiled on the loop, a huge argument
walked in one go) stalls them all. :class:`LoopWatchdog` makes that visible: one task sleeps
for ``interval`` at a time and records how late each wake-up is.

A late wake-up has two possible causes, and only one is the daemon's fault: its own code did
not yield (the loop thread was busy), or the operating system did not run the process (a
loaded machine). The watchdog tells them apart by the CPU time the loop's thread used while it
waited (``time.thread_time``): a wake-up's *blocked* time is its lateness, but no more than
that CPU time. ``toolbridge status`` shows both, the largest since start and in the last
minute; a blocked time over ``warn_after`` counts as a stall and is logged as a warning
(``event_loop_stalled``), and so is lateness over ``warn_after`` with the loop idle
(``event_loop_late``: the machine was too busy to run the daemon).

The cost is one timer wake-up per ``interval`` (20 a second by default). Each wake-up's blocked
time also goes into a histogram, ``toolbridge_event_loop_stall_seconds`` on ``/metrics`` (the
watchdog is a ``prometheus_client`` collector the composition root registers).
"""

from __future__ import annotations

import bisect
import collections
import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any, Final

import structlog
import trio
from prometheus_client.core import HistogramMetricFamily, Metric

log = structlog.get_logger("toolbridge.watchdog")

#: How often the watchdog wakes (seconds).
INTERVAL: Final = 0.05
#: A wake-up blocked (or late) longer than this is logged as a warning.
WARN_AFTER: Final = 0.1
#: Buckets (seconds) of the stall histogram: most wake-ups are blocked well under a millisecond.
STALL_BUCKETS: Final = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: The window of the ``lastMinute...`` figures, in whole seconds.
_WINDOW: Final = 60


def _thread_clock() -> Callable[[], float]:
    """CPU time of the calling thread where the platform has it, else of the process."""
    try:
        time.thread_time()
    except (AttributeError, OSError):  # pragma: no cover - platforms without a thread clock
        return time.process_time
    return time.thread_time


class _WindowMax:
    """The largest value seen in the last ``_WINDOW`` seconds: one maximum per second."""

    def __init__(self) -> None:
        self._seconds: collections.deque[tuple[int, float]] = collections.deque()
        self.ever = 0.0

    def add(self, now: float, value: float) -> None:
        self.ever = max(self.ever, value)
        second = int(now)
        if self._seconds and self._seconds[-1][0] == second:
            if value > self._seconds[-1][1]:
                self._seconds[-1] = (second, value)
        else:
            self._seconds.append((second, value))
            if len(self._seconds) > _WINDOW + 1:
                self._seconds.popleft()

    def recent(self, now: float) -> float:
        oldest = int(now) - _WINDOW
        return max((value for second, value in self._seconds if second > oldest), default=0.0)


class LoopWatchdog:
    def __init__(self, interval: float = INTERVAL, warn_after: float = WARN_AFTER,
                 cpu_clock: Callable[[], float] | None = None) -> None:
        self._interval = interval
        self._warn_after = warn_after
        self._cpu_clock = cpu_clock or _thread_clock()
        self._late = _WindowMax()
        self._blocked = _WindowMax()
        self.stalls = 0
        self.running = False
        #: The histogram of blocked times: a count per bucket (the last: over the largest), and the sum.
        self._stall_counts = [0] * (len(STALL_BUCKETS) + 1)
        self._stall_sum = 0.0

    async def run(self) -> None:
        self.running = True
        try:
            while True:
                expected = trio.current_time() + self._interval
                cpu_before = self._cpu_clock()
                await trio.sleep(self._interval)
                late = max(0.0, trio.current_time() - expected)
                self.record(late, busy=self._cpu_clock() - cpu_before)
        finally:
            self.running = False

    def record(self, late: float, busy: float) -> None:
        """One wake-up ``late`` seconds late, the loop's thread having used ``busy`` s of CPU."""
        now = trio.current_time()
        blocked = min(late, busy)
        self._stall_counts[bisect.bisect_left(STALL_BUCKETS, blocked)] += 1
        self._stall_sum += blocked
        self._late.add(now, late)
        self._blocked.add(now, blocked)
        if blocked > self._warn_after:
            self.stalls += 1
            log.warning("event_loop_stalled", stalled_ms=round(blocked * 1000, 1),
                        hint="something in the daemon blocked its event loop; every app and agent waited")
        elif late > self._warn_after:
            log.warning("event_loop_late", late_ms=round(late * 1000, 1),
                        hint="the machine was too busy to run the daemon on time")

    def status(self) -> dict[str, Any]:
        now = trio.current_time()
        return {
            "watching": self.running,
            "maxStallMs": _ms(self._blocked.ever),
            "lastMinuteMaxStallMs": _ms(self._blocked.recent(now)),
            "maxLateMs": _ms(self._late.ever),
            "lastMinuteMaxLateMs": _ms(self._late.recent(now)),
            "stallsOver100Ms": self.stalls,
        }


    def describe(self) -> Iterator[Metric]:
        return iter(())  # unchecked, like the daemon's other collectors

    def collect(self) -> Iterator[Metric]:
        """The stall histogram, for ``/metrics``."""
        histogram = HistogramMetricFamily(
            "toolbridge_event_loop_stall_seconds",
            "Per watchdog wake-up: how long the event loop was blocked by the daemon's own work")
        bounds = [*(str(b) for b in STALL_BUCKETS), "+Inf"]
        histogram.add_metric([], list(zip(bounds, itertools.accumulate(self._stall_counts))), self._stall_sum)
        yield histogram


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)
