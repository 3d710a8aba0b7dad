"""The last 15 minutes of calls, for the status page's charts; and quantiles from histogram buckets.

Theory of operation
-------------------
A :class:`Timeline` keeps one slot per :data:`SLOT_SECONDS` for the last :data:`WINDOW_SECONDS`
(a deque of at most :data:`SLOTS` slots; an old slot falls off the front when a new one is
opened). A slot holds, per app label, the calls that ended in it and a count per latency bucket
(the same :data:`LATENCY_BUCKETS` as ``/metrics``), and the failures by outcome kind. Recording a
call is plain arithmetic on the newest slot (:meth:`Timeline.record`, from the router's observer),
so the cost per call does not grow with the window; reading (:meth:`Timeline.series`, once per
poll of the page) walks at most 90 slots. Memory is bounded: slots × app labels × buckets, and app
labels are those of registered apps (a call of an unknown tool counts under ``""``).

:func:`quantile` estimates a quantile from bucket counts the way Prometheus's
``histogram_quantile`` does (linear inside the bucket it falls in), so the page's p50/p95/p99 and
a Prometheus query over ``/metrics`` agree.
"""

from __future__ import annotations

import bisect
import collections
from collections.abc import Sequence
from typing import Any, Final

__all__ = ["LATENCY_BUCKETS", "SLOT_SECONDS", "SLOTS", "Timeline", "WINDOW_SECONDS", "quantile"]

#: Latency buckets in seconds: local tools answer in milliseconds, exports take minutes.
LATENCY_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                          10.0, 30.0, 60.0, 300.0)
SLOT_SECONDS: Final = 10
WINDOW_SECONDS: Final = 15 * 60
SLOTS: Final = WINDOW_SECONDS // SLOT_SECONDS


def quantile(q: float, counts: Sequence[float]) -> float | None:
    """The ``q`` quantile in seconds of the per-bucket ``counts`` (one per :data:`LATENCY_BUCKETS`
    bound, then the overflow), or None with no observation. Like ``histogram_quantile``: linear
    inside the bucket; in the overflow bucket, the highest finite bound."""
    total = sum(counts)
    if total <= 0:
        return None
    rank = q * total
    seen = 0.0
    for index, count in enumerate(counts):
        if count and seen + count >= rank:
            if index >= len(LATENCY_BUCKETS):
                return LATENCY_BUCKETS[-1]
            lower = LATENCY_BUCKETS[index - 1] if index > 0 else 0.0
            return lower + (LATENCY_BUCKETS[index] - lower) * ((rank - seen) / count)
        seen += count
    return LATENCY_BUCKETS[-1]


class _Slot:
    __slots__ = ("start", "apps", "errors")

    def __init__(self, start: int) -> None:
        self.start = start
        #: app label -> [calls, failures, then a count per latency bucket]
        self.apps: dict[str, list[int]] = {}
        #: outcome kind -> failures
        self.errors: collections.Counter[str] = collections.Counter()


class Timeline:
    """Calls per :data:`SLOT_SECONDS`, latency buckets and failures by kind, per app label."""

    def __init__(self) -> None:
        self._slots: collections.deque[_Slot] = collections.deque(maxlen=SLOTS)

    def record(self, now: float, app: str, seconds: float, failed_kind: str | None) -> None:
        """One call that ended at ``now`` (Unix time) after ``seconds``; ``failed_kind``: its kind if it failed."""
        start = int(now // SLOT_SECONDS) * SLOT_SECONDS
        if not self._slots or self._slots[-1].start < start:
            self._slots.append(_Slot(start))
        slot = self._slots[-1]  # a clock stepping back counts into the newest slot
        counts = slot.apps.get(app)
        if counts is None:
            counts = slot.apps[app] = [0] * (2 + len(LATENCY_BUCKETS) + 1)
        counts[0] += 1
        counts[2 + bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
        if failed_kind is not None:
            counts[1] += 1
            slot.errors[failed_kind] += 1

    def series(self, now: float) -> dict[str, Any]:
        """The window ending at ``now`` as chart columns: slot start times, then per slot the calls
        per second, p50 and p95 in ms (None in a slot without calls), overall and per app, and
        failures per minute by kind. Slots without calls are zeros, so the x axis is even."""
        last = int(now // SLOT_SECONDS) * SLOT_SECONDS
        starts = list(range(last - (SLOTS - 1) * SLOT_SECONDS, last + 1, SLOT_SECONDS))
        window = [slot for slot in self._slots if slot.start >= starts[0]]  # quiet gaps leave old slots
        by_start = {slot.start: slot for slot in window}
        apps = sorted({app for slot in window for app in slot.apps})
        kinds = sorted({kind for slot in window for kind in slot.errors})
        per_minute = 60 / SLOT_SECONDS

        def rates(pick: str | None) -> dict[str, list[float | None]]:
            rate: list[float | None] = []
            p50: list[float | None] = []
            p95: list[float | None] = []
            for start in starts:
                slot = by_start.get(start)
                rows = [] if slot is None else [c for a, c in slot.apps.items() if pick is None or a == pick]
                calls = sum(row[0] for row in rows)
                buckets = [sum(row[2 + i] for row in rows) for i in range(len(LATENCY_BUCKETS) + 1)]
                rate.append(round(calls / SLOT_SECONDS, 3))
                p50.append(_ms(quantile(0.5, buckets)))
                p95.append(_ms(quantile(0.95, buckets)))
            return {"rate": rate, "p50": p50, "p95": p95}

        return {
            "slotSeconds": SLOT_SECONDS, "t": starts,
            "all": rates(None), "apps": {app: rates(app) for app in apps},
            "errors": {kind: [(by_start[s].errors.get(kind, 0) * per_minute if s in by_start else 0) for s in starts]
                       for kind in kinds},
        }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)
