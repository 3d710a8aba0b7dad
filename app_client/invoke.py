"""Running one tool call: where the handler runs, the deadline, and the result it yields.

Theory of operation
-------------------
:func:`run_tool` takes a validated call and always produces a
:class:`~app_client.protocol.ToolResult` — unless it is cancelled from outside (``toolCancel``,
lost connection, app stopping), in which case it marks the context cancelled and lets
:class:`trio.Cancelled` through.

Where the handler runs:

* ``async def`` handlers run in the trio task of the call.
* sync handlers run in a worker thread (:func:`trio.to_thread.run_sync` with
  ``abandon_on_cancel=True``), or on the app's GUI thread when they are marked
  ``on_gui_thread`` (or left unmarked while the app has a ``gui_executor``). The GUI path
  hands a closure to the executor; the closure runs the handler and posts the outcome back
  with :meth:`trio.lowlevel.TrioToken.run_sync_soon`, so the trio thread is never blocked
  and keeps answering heartbeats while the GUI thread works.

Concurrency: every call takes one token of the app's :class:`trio.CapacityLimiter`
(``max_concurrency`` tokens) before its handler starts. Threads hold their token until they
really finish, even when the call was cancelled and the thread abandoned: trio releases a
``to_thread`` limiter only when the thread ends, and the GUI path releases it from the
posted-back outcome. So the app never runs more handlers at once than it declared.

Deadline: the call's ``timeoutMs`` becomes ``ctx.deadline``; the wait for a token and the
handler both count. At the deadline an async handler is cancelled, a thread is abandoned
(``ctx.cancelled`` becomes true) and the result is ``success=false`` with ``"<tool> timed
out after N s"`` — or, when the handler never got a slot because earlier (perhaps abandoned)
handlers still run, a message saying the app was busy. The broker waits a little longer than ``timeoutMs``, so this message
reaches the agent instead of the broker's generic timeout.

Sync handlers cannot be interrupted: after a cancel or timeout they keep running until they
return (poll ``ctx.cancelled`` to stop early); whatever they return then is discarded. A GUI
call cancelled before the GUI thread got to it is skipped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import trio

from .context import ToolContext
from .errors import ToolError
from .guicall import GuiExecutor, run_sync_on_gui
from .logs import get_logger
from .results import describe_exception, failure, to_tool_result
from .tools import InvalidArguments, ToolDefinition
from .protocol import ToolResult

__all__ = ["GuiExecutor", "run_sync_on_gui", "run_tool"]

_log = get_logger(__name__)


async def _run_on_gui(
    executor: GuiExecutor,
    call: Callable[[], object],
    ctx: ToolContext,
    limiter: trio.CapacityLimiter,
) -> object:
    def unless_cancelled() -> object:
        if ctx.cancelled:
            raise RuntimeError("cancelled before it started")
        return call()

    return await run_sync_on_gui(executor, unless_cancelled, limiter)


async def _execute(
    tool: ToolDefinition,
    args: list[Any],
    kwargs: dict[str, Any],
    ctx: ToolContext,
    limiter: trio.CapacityLimiter,
    gui_executor: GuiExecutor | None,
) -> object:
    ctx._gui_executor = gui_executor  # for ctx.run_on_gui_thread
    if tool.is_async:
        try:
            # A free slot is taken without the scheduler pass ``async with limiter`` makes.
            limiter.acquire_nowait()
        except trio.WouldBlock:
            await limiter.acquire()
        try:
            ctx._started = True
            return await tool.fn(*args, **kwargs)
        finally:
            limiter.release()

    def call() -> object:
        ctx._started = True
        return tool.fn(*args, **kwargs)

    on_gui = tool.on_gui_thread if tool.on_gui_thread is not None else gui_executor is not None
    if on_gui:
        if gui_executor is None:
            raise ToolError(
                f"{tool.name} is marked on_gui_thread but the app has no gui_executor"
            )
        return await _run_on_gui(gui_executor, call, ctx, limiter)
    return await trio.to_thread.run_sync(
        call, abandon_on_cancel=True, limiter=limiter, thread_name=f"toolbridge {tool.name}"
    )


async def run_tool(
    tool: ToolDefinition,
    parameters: Mapping[str, Any],
    ctx: ToolContext,
    *,
    limiter: trio.CapacityLimiter,
    gui_executor: GuiExecutor | None = None,
    log: Any = None,
    scope: trio.CancelScope | None = None,
) -> ToolResult | None:
    """Validate ``parameters``, run ``tool`` until ``ctx.deadline`` and map the outcome.

    See the module docstring for threads, concurrency and deadlines. ``scope`` is the call's
    own cancel scope (one per call: it also carries the deadline): cancelling it after
    ``ctx._mark_cancelled()`` — a ``toolCancel`` — makes this return None (no response).
    Cancellation from further out escapes (as :class:`trio.Cancelled`, after ``ctx.cancelled``
    was set). ``log`` is the structlog logger to report handler errors to.
    """
    # Bound only on the paths that log: binding copies the context, per call.
    base_log = log if log is not None else _log

    def call_log() -> Any:
        return base_log.bind(tool=tool.name, correlation_id=ctx.correlation_id)

    try:
        args, kwargs = tool.bind(parameters, ctx)
    except InvalidArguments as exc:
        return failure(f"invalid arguments for {tool.name}: {exc}")
    finished = False
    cancelled_by_caller = False
    value: object = None
    if scope is None:
        scope = trio.CancelScope()
    if scope.deadline != ctx.deadline:  # a caller's scope usually has it already (cheaper)
        scope.deadline = ctx.deadline
    try:
        with scope:
            try:
                value = await _execute(tool, args, kwargs, ctx, limiter, gui_executor)
            except Exception as exc:
                finished = True
                message = describe_exception(tool.name, exc)
                if isinstance(exc, ToolError):
                    call_log().info("tool reported an error", error=message)
                else:
                    call_log().error("tool handler raised", exc_info=exc)
                return failure(message)
            finished = True
    finally:
        if not finished:
            cancelled_by_caller = ctx.cancelled  # marked by the caller before it cancelled us
            ctx._mark_cancelled()
    if not finished and cancelled_by_caller:
        return None
    if not finished:
        seconds = (ctx.timeout_ms or 0) / 1000
        call_log().warning("tool call timed out", timeout_s=seconds, started=ctx._started)
        if not ctx._started:
            return failure(
                f"{tool.name} timed out after {seconds:g} s without starting: the app was still "
                f"busy with earlier calls (it runs {limiter.total_tokens:g} at a time)",
                "timeout",
            )
        return failure(f"{tool.name} timed out after {seconds:g} s", "timeout")
    try:
        return to_tool_result(value)
    except (TypeError, ValueError) as exc:
        call_log().error("tool returned a value that cannot be sent", exc_info=exc)
        return failure(f"{tool.name} failed: it returned a {type(value).__name__}, which is not JSON")


def deadline_for(timeout_ms: int | None) -> float:
    """The trio time at which a call with ``timeout_ms`` (from now) ends."""
    return math.inf if timeout_ms is None else trio.current_time() + timeout_ms / 1000
