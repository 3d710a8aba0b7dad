"""The loop-stall watchdog: how responsive the daemon's event loop is.

Theory of operation
-------------------
Every tool call, heartbeat and line of every connection is served by one trio event loop, so
anything that blocks it (a catastrophic regex, a schema compiled on the loop, a huge argument
walked in one go) stalls them all. :class:`LoopWatchdog` makes that visible: one task sleeps
for ``interval`` at a time and records how late each wake-up is. Lateness beyond a few
milliseconds is time the loop spent on something that did not yield. The largest lateness
(since start and in the last minute) and the number of stalls over the warning threshold are
in ``toolbridge status``; each stall over the threshold is logged as a warning when it ends,
with its length.

The cost is one timer wake-up per ``interval`` (20 a second by default). The watchdog only
observes: the heartbeat (``links``) protects apps from the daemon's own stalls by itself.
"""

from __future__ import annotations

import collections
from typing import Any, Final

import structlog
import trio

log = structlog.get_logger("toolbridge.watchdog")

#: How often the watchdog wakes (seconds).
INTERVAL: Final = 0.05
#: A wake-up later than this is a stall: logged as a warning and counted.
WARN_AFTER: Final = 0.1
#: The window of ``lastMinuteMaxMs``.
_WINDOW: Final = 60.0


class LoopWatchdog:
    def __init__(self, interval: float = INTERVAL, warn_after: float = WARN_AFTER) -> None:
        self._interval = interval
        self._warn_after = warn_after
        self.max_lateness = 0.0
        self.stalls = 0
        #: ``(trio time, lateness)`` of the stalls in the last minute, oldest first.
        self._recent: collections.deque[tuple[float, float]] = collections.deque()
        self.running = False

    async def run(self) -> None:
        self.running = True
        try:
            while True:
                expected = trio.current_time() + self._interval
                await trio.sleep(self._interval)
                self.record(trio.current_time() - expected)
        finally:
            self.running = False

    def record(self, lateness: float) -> None:
        """One wake-up ``lateness`` seconds late (also for tests that stall the loop on purpose)."""
        if lateness > self.max_lateness:
            self.max_lateness = lateness
        if lateness > self._warn_after:
            self.stalls += 1
            self._recent.append((trio.current_time(), lateness))
            log.warning("event_loop_stalled", stalled_ms=round(lateness * 1000, 1),
                        hint="something blocked the daemon's event loop; every app and agent waited")

    def status(self) -> dict[str, Any]:
        now = trio.current_time()
        while self._recent and self._recent[0][0] < now - _WINDOW:
            self._recent.popleft()
        return {
            "watching": self.running,
            "maxStallMs": round(self.max_lateness * 1000, 1),
            "lastMinuteMaxStallMs": round(max((late for _, late in self._recent), default=0.0) * 1000, 1),
            "stallsOver100Ms": self.stalls,
        }
