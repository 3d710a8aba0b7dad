"""Calls in flight: the :class:`Call` record, the correlation map, and a deadline queue.

Theory of operation
-------------------
A call is a small record, not a task. The router (``router``) moves it through its states —
waiting for an admission slot or for its app to reconnect, then sent — by callbacks: the
admission queue hands it a slot, the registry tells it the app is back, the app's link reader
delivers the response, a :class:`DeadlineQueue` expires it, the agent cancels it. Whichever
comes first ends it, exactly once (:attr:`Call.done`); everything after is ignored. A pending
call therefore costs a few hundred bytes, not a parked task with its coroutine frames.

The :class:`CorrelationMap` holds the calls that were sent to an app, by integer correlation
id, from the send until the call ends: a response that arrives after that is "unknown or late"
and is dropped.

A :class:`DeadlineQueue` is a heap of ``(deadline, call)`` served by one task of its owner's
(an MCP session's) nursery: adding an earlier deadline moves the task's wake-up, so there is
no task, scope or timer per call. Ended calls leave the heap lazily, and the heap is compacted
when they outnumber the live ones, so it stays within twice the calls pending.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import attrs
import trio

if TYPE_CHECKING:
    from .admission import Granted
    from .outcome import CallerInfo, CallOutcome
    from .ports import AppPort
    from .registry import RegisteredTool

#: ``(progress, total, message)`` from the app's ``toolProgress``; must not block.
ProgressCallback = Callable[[float, "float | None", "str | None"], None]
#: Told a call's outcome, exactly once; must not block or raise.
DoneCallback = Callable[["CallOutcome"], None]

@attrs.define(eq=False)
class Call:
    """One tool call from the moment it passed validation until its outcome is delivered."""

    name: str
    tool: RegisteredTool
    arguments: dict[str, Any]
    caller: CallerInfo
    #: ``time.perf_counter()`` when the call arrived (for the audit's duration).
    started: float
    timeout: float
    #: trio time: the app is told this deadline ...
    deadline: float
    #: ... and the router gives up a little after it, so the app's own message can win.
    gives_up_at: float
    on_progress: ProgressCallback | None
    on_done: DoneCallback | None
    done: bool = False
    #: The invocation is queued or sent on ``link`` (a cancel or timeout must tell the app).
    sent: bool = False
    #: Its place in the instance's admission queue, while it waits there.
    queued: Granted | None = None
    #: trio time it took one of the instance's admission slots (released when the call ends).
    admitted_at: float | None = None
    link: AppPort | None = None
    correlation_id: int = 0
    last_progress: float | None = None

    @property
    def link_id(self) -> int | None:
        return self.link.id if self.link is not None else None

    def progress(self, progress: float, total: float | None, message: str | None) -> bool:
        """Forward progress if it increases and the call is still open; False if dropped."""
        if self.done or self.on_progress is None:
            return False
        if self.last_progress is not None and progress <= self.last_progress:
            return False
        self.last_progress = progress
        self.on_progress(progress, total, message)
        return True


class CorrelationMap:
    def __init__(self) -> None:
        self._pending: dict[int, Call] = {}
        self._ids = itertools.count(1)

    def __len__(self) -> int:
        return len(self._pending)

    def __iter__(self) -> Iterator[Call]:
        return iter(list(self._pending.values()))

    def get(self, correlation_id: int) -> Call | None:
        return self._pending.get(correlation_id)

    def open(self, call: Call) -> int:
        call.correlation_id = next(self._ids)
        self._pending[call.correlation_id] = call
        return call.correlation_id

    def close(self, call: Call) -> None:
        self._pending.pop(call.correlation_id, None)


_MIN_COMPACT = 64


class DeadlineQueue:
    """Expires calls at their ``gives_up_at``; its owner runs :meth:`run` in a nursery."""

    def __init__(self, expire: Callable[[Call], object]) -> None:
        self._expire = expire
        self._heap: list[tuple[float, int, Call]] = []
        self._order = itertools.count()
        self._wakeup = trio.CancelScope()
        self._compact_at = _MIN_COMPACT

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, call: Call) -> None:
        heap = self._heap
        if len(heap) >= self._compact_at:
            heap[:] = [entry for entry in heap if not entry[2].done]
            heapq.heapify(heap)
            self._compact_at = max(_MIN_COMPACT, 2 * len(heap))  # amortised O(1) per add
        heapq.heappush(heap, (call.gives_up_at, next(self._order), call))
        if call.gives_up_at < self._wakeup.deadline:
            self._wakeup.deadline = call.gives_up_at

    async def run(self) -> None:
        heap = self._heap
        while True:
            now = trio.current_time()
            while heap and heap[0][0] <= now:
                call = heapq.heappop(heap)[2]
                if not call.done:
                    self._expire(call)
            self._wakeup = trio.CancelScope(deadline=heap[0][0] if heap else float("inf"))
            with self._wakeup:
                await trio.sleep_forever()
