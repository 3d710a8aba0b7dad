"""Calls in flight: the :class:`Call` record, the correlation map, and a deadline queue.

Theory of operation
-------------------
A call is a small record, not a task, and the one record of it: it owns the caller's request
id (an MCP request's), the correlation id the app knows it by, its deadline, and its
:class:`CallOrigin` — who asked and is told the end. The tables that find it hold references
to it, never copies of its fields. The router (``router``) moves it through its states —
waiting for an admission slot or for its app to reconnect, then sent — by callbacks: the
admission queue hands it a slot, the registry tells it the app is back, the app's link reader
delivers the response, a :class:`DeadlineQueue` expires it, the agent cancels it. Whichever
comes first ends it, exactly once (:attr:`Call.done`); everything after is ignored. A pending
call therefore costs a few hundred bytes, not a parked task with its coroutine frames.

The :class:`CorrelationMap` holds every live call (admitted and not ended: queued, being
checked, waiting for its app to reconnect, or sent), by integer correlation id, assigned at
admission: it is what shutdown ends and the limit on calls in flight counts. The app learns a
call's id when the call is sent over its link (:meth:`CorrelationMap.bind`); only such calls
are found by :meth:`CorrelationMap.get`, so a response for a call that ended (or was never
sent) is "unknown or late" and is dropped.

A :class:`DeadlineQueue` is a heap of calls ordered by ``gives_up_at``, served by one task of
its owner's (an MCP session's) nursery: adding an earlier deadline moves the task's wake-up,
so there is no task, scope or timer per call. Ended calls leave the heap lazily, and the heap
is compacted when they outnumber the live ones, so it stays within twice the calls pending.

An MCP session finds its calls by request id in its own table of requests in flight, which
holds the same :class:`Call` (the session's per-request details are the call's ``origin``).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio

if TYPE_CHECKING:
    from .admission import Granted
    from .outcome import CallerInfo, CallOutcome
    from .ports import AppPort
    from .registry import RegisteredTool

#: ``(progress, total, message)`` from the app's ``toolProgress``; must not block.
ProgressCallback = Callable[[float, "float | None", "str | None"], None]


class CallOrigin(Protocol):
    """Who asked for a call (an MCP request, ``Router.call_tool``'s waiter): told its progress
    and, exactly once, its outcome. Neither may block or raise."""

    def call_progress(self, call: Call, progress: float, total: float | None, message: str | None) -> None:
        """An increasing progress report, while the call is open (only if it asked for them)."""

    def call_done(self, call: Call, outcome: CallOutcome) -> None:
        """The call ended with ``outcome``."""


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
    #: Who asked, and hears the end (None once told).
    origin: CallOrigin | None
    #: The caller's id of its request (an MCP request id), if it has one.
    request_id: str | int | None = None
    #: The origin wants progress reports (the app is told so in the invocation).
    wants_progress: bool = False
    done: bool = False
    #: The invocation is queued or sent on ``link`` (a cancel or timeout must tell the app).
    sent: bool = False
    #: Its place in the instance's admission queue, while it waits there.
    queued: Granted | None = None
    #: trio time it took one of the instance's admission slots (released when the call ends).
    admitted_at: float | None = None
    #: The link the call was given to (``CorrelationMap.bind``); None until then.
    link: AppPort | None = None
    #: Assigned when the call is admitted (``CorrelationMap.add``); 0 before.
    correlation_id: int = 0
    last_progress: float | None = None
    #: The last progress report's total and message (the status page shows "4/12 step 4").
    last_total: float | None = None
    last_message: str | None = None
    #: The app's ``elicit`` waiting for the user's answer: an ``elicitation.PendingElicitation``
    #: (typed loosely: that module imports this one), at most one.
    elicitation: Any = None

    @property
    def link_id(self) -> int | None:
        return self.link.id if self.link is not None else None

    @property
    def wire_id(self) -> int | None:
        """The correlation id the app knows the call by: None until it was given to a link."""
        return self.correlation_id if self.link is not None else None

    def __lt__(self, other: Call) -> bool:  # the deadline heap's order
        return self.gives_up_at < other.gives_up_at

    def progress(self, progress: float, total: float | None, message: str | None) -> bool:
        """Forward progress if it increases and the call is still open; False if dropped."""
        if self.done or not self.wants_progress or self.origin is None:
            return False
        if self.last_progress is not None and progress <= self.last_progress:
            return False
        self.last_progress = progress
        self.last_total, self.last_message = total, message
        self.origin.call_progress(self, progress, total, message)
        return True


class CorrelationMap:
    """Every live call by correlation id (see the module docstring)."""

    def __init__(self) -> None:
        self._calls: dict[int, Call] = {}
        self._ids = itertools.count(1)
        self._sent = 0

    def __len__(self) -> int:
        """Live calls: admitted and not ended."""
        return len(self._calls)

    def __iter__(self) -> Iterator[Call]:
        return iter(list(self._calls.values()))

    @property
    def sent(self) -> int:
        """Live calls given to an app's link (``status``'s calls in flight)."""
        return self._sent

    def get(self, correlation_id: int) -> Call | None:
        """The live call an app may answer by ``correlation_id`` (one given to a link), or None."""
        call = self._calls.get(correlation_id)
        return call if call is not None and call.link is not None else None

    def add(self, call: Call) -> None:
        """``call`` was admitted: give it its correlation id (once) and keep it until it ends."""
        if not call.correlation_id:
            call.correlation_id = next(self._ids)
            self._calls[call.correlation_id] = call

    def new_id(self) -> int:
        """A correlation id for a request that is not a tool call (a ``resourceRead``): from
        the same sequence, so an app never sees two requests in flight with one id."""
        return next(self._ids)

    def bind(self, call: Call, link: AppPort) -> None:
        """``call`` is being sent over ``link``: from now on the app may answer it."""
        call.link = link
        self._sent += 1

    def close(self, call: Call) -> None:
        """``call`` ended: forget it (a late answer is dropped)."""
        if self._calls.pop(call.correlation_id, None) is not None and call.link is not None:
            self._sent -= 1


_MIN_COMPACT = 64


class DeadlineQueue:
    """Expires calls at their ``gives_up_at``; its owner runs :meth:`run` in a nursery."""

    def __init__(self, expire: Callable[[Call], object]) -> None:
        self._expire = expire
        #: The calls themselves, ordered by ``gives_up_at`` (``Call.__lt__``): no copies.
        self._heap: list[Call] = []
        self._wakeup = trio.CancelScope()
        self._compact_at = _MIN_COMPACT

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, call: Call) -> None:
        heap = self._heap
        if len(heap) >= self._compact_at:
            heap[:] = [entry for entry in heap if not entry.done]
            heapq.heapify(heap)
            self._compact_at = max(_MIN_COMPACT, 2 * len(heap))  # amortised O(1) per add
        heapq.heappush(heap, call)
        if call.gives_up_at < self._wakeup.deadline:
            self._wakeup.deadline = call.gives_up_at

    async def run(self) -> None:
        heap = self._heap
        while True:
            now = trio.current_time()
            while heap and heap[0].gives_up_at <= now:
                call = heapq.heappop(heap)
                if not call.done:
                    self._expire(call)
            self._wakeup = trio.CancelScope(deadline=heap[0].gives_up_at if heap else float("inf"))
            with self._wakeup:
                await trio.sleep_forever()
