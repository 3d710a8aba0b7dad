"""Running one sync function on an app's GUI thread from trio, without blocking trio.

Theory of operation
-------------------
A :data:`GuiExecutor` is the app's way onto its GUI thread: a function, callable from any
thread, that schedules a zero-argument callable to run soon there (``tk_executor``, a Qt queued
signal, :class:`app_client.GuiCallQueue` for loops that can only poll, such as Blender's).
:func:`run_sync_on_gui` hands it a closure that runs the function and posts the outcome back
to the trio thread with :meth:`trio.lowlevel.TrioToken.run_sync_soon`; the trio task waits on
an event, so heartbeats and other calls go on meanwhile. Sync tools, resource reads, prompts,
completions and :meth:`ToolContext.run_on_gui_thread` all take this road.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

__all__ = ["GuiExecutor", "run_sync_on_gui"]

#: Schedules a zero-argument callable to run soon on the GUI thread; callable from any thread.
GuiExecutor = Callable[[Callable[[], None]], object]


class _Outcome:
    """A handler's result or exception, carried from the GUI thread to trio."""

    __slots__ = ("error", "value")

    def __init__(self, value: object = None, error: BaseException | None = None) -> None:
        self.value = value
        self.error = error

    def unwrap(self) -> object:
        if self.error is not None:
            raise self.error
        return self.value


async def run_sync_on_gui(
    executor: GuiExecutor, fn: Callable[[], object], limiter: trio.CapacityLimiter
) -> object:
    """Run ``fn`` on the GUI thread through ``executor`` and wait for it without blocking trio.

    One token of ``limiter`` is held until ``fn`` has really returned (released from the
    posted-back outcome, so an abandoned GUI call still counts). Raises what ``fn`` raised.
    When the waiting task is cancelled before the GUI thread got to the call, the call is
    skipped; once started it runs to its end and its outcome is dropped.
    """
    token = trio.lowlevel.current_trio_token()
    borrower = object()
    await limiter.acquire_on_behalf_of(borrower)
    done = trio.Event()
    box: list[_Outcome] = []
    abandoned = False

    def deliver(outcome: _Outcome) -> None:  # runs in the trio thread
        limiter.release_on_behalf_of(borrower)
        box.append(outcome)
        done.set()

    def on_gui_thread() -> None:
        outcome = _Outcome(error=RuntimeError("the GUI thread did not finish the call"))
        try:
            if abandoned:
                outcome = _Outcome(error=RuntimeError("cancelled before it started"))
            else:
                outcome = _Outcome(value=fn())
        except Exception as exc:
            outcome = _Outcome(error=exc)
        finally:
            try:
                token.run_sync_soon(deliver, outcome)
            except trio.RunFinishedError:
                pass  # the app stopped meanwhile; nobody waits for this outcome

    try:
        executor(on_gui_thread)
    except BaseException:
        limiter.release_on_behalf_of(borrower)
        raise
    try:
        await done.wait()
    finally:
        if not done.is_set():
            abandoned = True
    return box[0].unwrap()
