"""The per-call object a tool handler receives: ids, deadline, progress and cancellation.

Theory of operation
-------------------
A handler asks for a :class:`ToolContext` by declaring a parameter annotated with it (any
name, any position); the parameter is left out of the tool's input schema. One context is
made per ``toolInvocation``.

Progress goes out through one of two sinks the connection supplies:

* :meth:`ToolContext.report_progress` awaited by an async handler running in trio waits for
  room in the connection's outgoing queue (back-pressure) and never blocks on the socket.
* :meth:`ToolContext.report_progress_threadsafe` is for sync handlers (worker threads or the
  GUI thread); it hands the message to the trio thread and returns at once, never blocking
  the caller. If the outgoing queue is full the update is dropped: progress is advisory.
  A sync handler may call ``ctx.report_progress(...)`` too (without ``await``, which it
  cannot use): called outside trio it sends at once, as ``report_progress_threadsafe`` does,
  and returns an already finished awaitable, so the update is not lost in a coroutine nobody
  awaits.

Both do nothing once the call is finished or cancelled, and neither raises when the
connection has gone away.

Log messages (protocol v2, section 12): :meth:`ToolContext.log` sends one tied to this call, from
any thread, never blocking: only the agent request that made the call receives it (at the level
it asked for), and nothing is sent once the call is over.

Asking the user (protocol.md section 13): ``await ctx.elicit(message, schema)`` sends an
``elicit`` for this call and waits for the agent's user to answer; it returns an
:class:`Elicitation` (``action`` accept / decline / cancel, and ``content``: the form's values)
or raises :class:`~app_client.errors.ElicitationError` when the user cannot be asked (the
agent's client lacks the capability, nobody answered in time, ...). The call's deadline keeps
running meanwhile. Sync handlers (worker threads, the GUI thread) call
``ctx.elicit_sync(message, schema)``, which blocks that thread until the answer comes.

GUI steps: an ``async def`` tool of an app with a ``gui_executor`` runs sync pieces of work on
the GUI thread with ``await ctx.run_on_gui_thread(fn, *args)``, one at a time, so long work in
steps leaves the GUI's loop running between them and stops at a cancel between two steps.

Cancellation: :attr:`ToolContext.cancelled` turns true when the call ends without the
handler's result being used — a ``toolCancel`` from the broker, the call's deadline, the
connection being lost, or the app stopping. Async handlers are cancelled through trio at the
same moment; sync handlers cannot be interrupted, so long-running ones should poll
``ctx.cancelled`` and return early (their result is then discarded).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import trio

from .applog import log_message
from .errors import ElicitationError
from .guicall import GuiExecutor, run_sync_on_gui
from .protocol import LogMessage, ToolProgress

__all__ = ["Elicitation", "ToolContext"]


@dataclass(frozen=True, slots=True)
class Elicitation:
    """The user's answer to :meth:`ToolContext.elicit`.

    ``action``: ``"accept"`` (``content`` holds the form's values by property name; for a URL
    elicitation it is empty: the user agreed to open the page), ``"decline"`` (said no) or
    ``"cancel"`` (dismissed it without choosing).
    """

    action: str
    content: dict[str, Any]

    @property
    def accepted(self) -> bool:
        return self.action == "accept"


#: ``(correlation_id, message, schema, url, key) -> answer``: the session's way to ask (raises
#: ElicitationError).
ElicitSink = Callable[[int, str, "dict[str, Any] | None", "str | None", "str | None"], Awaitable[Elicitation]]


async def _cannot_elicit(correlation_id: int, message: str, schema: dict[str, Any] | None,
                         url: str | None, key: str | None) -> Elicitation:
    raise ElicitationError("elicitation_unsupported", "this context is not connected to a broker")

AsyncProgressSink = Callable[[ToolProgress], Awaitable[None]]
SyncProgressSink = Callable[[ToolProgress], None]


async def _discard_async(_: ToolProgress) -> None:
    return None


def _discard(_: ToolProgress) -> None:
    return None


def _discard_log(_: LogMessage) -> None:
    return None

T = TypeVar("T")


class _Sent:
    """The awaitable :meth:`ToolContext.report_progress` returns once it has sent already."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield  # a generator that finishes at once: awaiting it does not even yield to trio

    def __repr__(self) -> str:
        return "<progress sent>"


_SENT: Awaitable[None] = _Sent()


def _in_trio() -> bool:
    """Whether the caller runs in a trio task (else another thread: a worker or the GUI)."""
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True


class ToolContext:
    """Information about the current call and a way to talk back to the broker about it.

    Attributes:
        correlation_id: the broker's id of this call.
        tool: the tool name as the app registered it.
        timeout_ms: the time the broker gave the call (``None``: no deadline).
        deadline: the same as a :func:`trio.current_time` value (``math.inf`` if none);
            only meaningful in the trio thread.
        progress_requested: the agent asked for progress updates (they are welcome anyway).

    Handlers normally get a context from the library; apps' own unit tests can build one
    directly with ``ToolContext(correlation_id=1, tool="Demo")`` (progress is discarded).
    """

    def __init__(
        self,
        *,
        correlation_id: int,
        tool: str,
        timeout_ms: int | None = None,
        deadline: float = math.inf,
        progress_requested: bool = False,
        send_progress: AsyncProgressSink = _discard_async,
        send_progress_threadsafe: SyncProgressSink = _discard,
        send_log: Callable[[LogMessage], None] = _discard_log,
        elicit: ElicitSink = _cannot_elicit,
        trio_token: trio.lowlevel.TrioToken | None = None,
    ) -> None:
        self.correlation_id = correlation_id
        self.tool = tool
        self.timeout_ms = timeout_ms
        self.deadline = deadline
        self.progress_requested = progress_requested
        self._send_progress = send_progress
        self._send_progress_threadsafe = send_progress_threadsafe
        self._send_log = send_log
        self._elicit = elicit
        self._trio_token = trio_token
        self._cancelled = False
        self._finished = False
        #: Set (in whichever thread) when the handler begins to run.
        self._started = False
        #: The app's way onto its GUI thread (set by the library before the handler runs).
        self._gui_executor: GuiExecutor | None = None
        #: One step of this call on the GUI thread at a time (the call already holds its
        #: slot of the app's limiter, so its steps do not take another).
        self._gui_steps: trio.CapacityLimiter | None = None

    def __repr__(self) -> str:
        return (
            f"ToolContext(correlation_id={self.correlation_id}, tool={self.tool!r}, "
            f"cancelled={self._cancelled})"
        )

    async def run_on_gui_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """From an ``async def`` tool: run ``fn(*args)`` on the app's GUI thread and return
        what it returned (raises what it raised).

        For long work done in steps (Blender renders a strip at a time): between two steps
        the GUI's own loop runs, so its window stays responsive, and a cancel or the deadline
        ends the call between steps (a step the GUI thread has not started is skipped).
        RuntimeError if the app has no ``gui_executor``.
        """
        if self._gui_executor is None:
            raise RuntimeError(f"{self.tool}: the app has no gui_executor to run this on")
        if self._gui_steps is None:
            self._gui_steps = trio.CapacityLimiter(1)
        outcome = await run_sync_on_gui(self._gui_executor, functools.partial(fn, *args), self._gui_steps)
        return cast(T, outcome)

    @property
    def cancelled(self) -> bool:
        """True once the call was cancelled, timed out or lost; safe to read from any thread."""
        return self._cancelled

    @property
    def active(self) -> bool:
        """True while the result of this call is still wanted."""
        return not (self._cancelled or self._finished)

    def _progress(self, progress: float, total: float | None, message: str | None) -> ToolProgress:
        return ToolProgress(
            correlation_id=self.correlation_id,
            progress=float(progress),
            total=None if total is None else float(total),
            message=message,
        )

    def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> Awaitable[None]:
        """Send a ``toolProgress`` for this call: ``await`` it in async handlers.

        ``progress`` must grow from update to update (the broker drops updates that do
        not); ``total`` is its end value if known.

        In a sync handler (a worker thread or the GUI thread) just call it: it sends at once
        (as :meth:`report_progress_threadsafe`, never blocking) and what it returns need not
        be awaited.
        """
        if not _in_trio():
            self.report_progress_threadsafe(progress, total, message)
            return _SENT
        return self._report_progress(progress, total, message)

    async def _report_progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self.active:
            await self._send_progress(self._progress(progress, total, message))

    def report_progress_threadsafe(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Like :meth:`report_progress`, callable from any thread; never blocks.

        For sync handlers running in a worker thread or on the GUI thread.
        """
        if self.active:
            self._send_progress_threadsafe(self._progress(progress, total, message))

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send a log message about this call to the agent that made it (if it asked for ``level``).

        As :meth:`App.log <app_client.App.log>` (same levels, bounds and rate; ValueError for an
        unknown level), but only the requesting agent hears it: in the 2026-07-28 protocol an
        agent receives log messages only this way. Callable from any thread; never blocks; does
        nothing once the call is finished or cancelled.
        """
        message = log_message(level, data, logger, self.correlation_id)
        if self.active:
            self._send_log(message)
    async def elicit(self, message: str, schema: dict[str, Any] | None = None, *,
                     url: str | None = None, key: str | None = None) -> Elicitation:
        """Ask the agent's user, inside this call, and wait for the answer (section 13).

        ``schema`` is the form: ``{"type": "object", "properties": {...}, "required": [...]}``
        with flat primitive properties only (string, number, integer, boolean, enums; MCP's
        restricted subset). Or give ``url`` (and no schema) to send the user to a page
        (MCP's URL mode, for anything sensitive: never ask for passwords or keys in a form).

        ``key`` (optional, 1-64 of ``A-Z a-z 0-9 _ - .``) names the question for MCP
        2026-07-28 clients: the key of its ``inputRequests`` entry, under which a client may
        also answer it up front in the ``tools/call`` (the broker names it otherwise).

        Raises ElicitationError when the user cannot be asked (see its ``code``); the call
        goes on either way. Cancelling the call (or its deadline) interrupts the wait.
        """
        if url is None and schema is None:
            raise ValueError("elicit needs a schema (a form) or a url")
        return await self._elicit(self.correlation_id, message, schema, url, key)

    def elicit_sync(self, message: str, schema: dict[str, Any] | None = None, *,
                    url: str | None = None, key: str | None = None) -> Elicitation:
        """:meth:`elicit` for sync handlers (a worker thread or the GUI thread): blocks this
        thread until the user answers. Not from the trio thread (``await ctx.elicit`` there)."""
        if _in_trio():
            raise RuntimeError("elicit_sync blocks its thread: in an async handler use `await ctx.elicit(...)`")
        token = self._trio_token
        if token is None:
            raise ElicitationError("elicitation_unsupported", "this context is not connected to a broker")
        try:
            return trio.from_thread.run(functools.partial(self.elicit, message, schema, url=url, key=key),
                                        trio_token=token)
        except trio.RunFinishedError:
            raise ElicitationError("call_not_running", "the app stopped before the user answered") from None

    def time_remaining(self) -> float:
        """Seconds until the deadline (``math.inf`` if none); call from the trio thread only."""
        return self.deadline - trio.current_time()

    # --- for the library ----------------------------------------------------------------

    def _mark_cancelled(self) -> None:
        self._cancelled = True

    def _mark_finished(self) -> None:
        self._finished = True
