"""The correlation map: every call in flight at an app, by integer correlation id.

Theory of operation
-------------------
The router opens a :class:`PendingCall` before it sends the ``toolInvocation`` and closes it
in a ``finally`` after it stops waiting, so the map never keeps an entry for a call nobody
waits on: a response that arrives after that is "unknown or late" and is dropped. A pending
call ends exactly once — :meth:`PendingCall.resolve` and :meth:`PendingCall.fail` return
False for every attempt after the first — whichever comes first of: the app's response, an
app error, the deadline, the link closing (``fail_all`` at once, no waiting for the deadline),
cancellation by the agent, or daemon shutdown.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import attrs
import trio

from app_client.wire import ToolResult

if TYPE_CHECKING:
    from .registry import RegisteredTool

#: ``(progress, total, message)`` from the app's ``toolProgress``; must not block.
ProgressCallback = Callable[[float, "float | None", "str | None"], None]


@attrs.define(eq=False)
class PendingCall:
    correlation_id: int
    link_id: int
    tool: RegisteredTool
    on_progress: ProgressCallback | None = None
    done: trio.Event = attrs.Factory(trio.Event)
    result: ToolResult | None = None
    #: ``(kind, safe message)`` when the call failed before a response arrived.
    failure: tuple[str, str] | None = None
    last_progress: float | None = None

    def resolve(self, result: ToolResult) -> bool:
        if self.done.is_set():
            return False
        self.result = result
        self.done.set()
        return True

    def fail(self, kind: str, message: str) -> bool:
        if self.done.is_set():
            return False
        self.failure = (kind, message)
        self.done.set()
        return True

    def progress(self, progress: float, total: float | None, message: str | None) -> bool:
        """Forward progress if it increases and the call is still open; False if dropped."""
        if self.done.is_set() or self.on_progress is None:
            return False
        if self.last_progress is not None and progress <= self.last_progress:
            return False
        self.last_progress = progress
        self.on_progress(progress, total, message)
        return True


class CorrelationMap:
    def __init__(self) -> None:
        self._pending: dict[int, PendingCall] = {}
        self._ids = itertools.count(1)

    def __len__(self) -> int:
        return len(self._pending)

    def __iter__(self) -> Iterator[PendingCall]:
        return iter(list(self._pending.values()))

    def get(self, correlation_id: int) -> PendingCall | None:
        return self._pending.get(correlation_id)

    def open(
        self, link_id: int, tool: RegisteredTool, on_progress: ProgressCallback | None
    ) -> PendingCall:
        call = PendingCall(next(self._ids), link_id, tool, on_progress)
        self._pending[call.correlation_id] = call
        return call

    def close(self, call: PendingCall) -> None:
        self._pending.pop(call.correlation_id, None)

    def fail_link(self, link_id: int, kind: str, message: str) -> int:
        """Fail every call sent over one link; return how many were still open."""
        return sum(
            call.fail(kind, message) for call in list(self._pending.values()) if call.link_id == link_id
        )

    def fail_all(self, kind: str, message: str) -> int:
        return sum(call.fail(kind, message) for call in list(self._pending.values()))
