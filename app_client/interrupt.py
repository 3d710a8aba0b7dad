"""Ctrl-C for programs whose main task is an App: ``trio.run(app.run)`` stops cleanly.

By default trio raises ``KeyboardInterrupt`` inside the running task on Ctrl-C: the app still
says goodbye (its connection's ``finally``), but the program ends with a traceback of nested
exception groups, which reads like a crash. :func:`owns_ctrl_c` tells whether the app owns the
program: it is the run's main task, in the main thread, and nobody installed a SIGINT handler
of their own. Then :func:`cancel_on_ctrl_c` turns the first Ctrl-C into a cancellation of the
app (goodbye, then ``run`` returns); a second Ctrl-C, while goodbye is on its way, interrupts
as usual. An app embedded in a bigger trio program (``async with app.connected()``, a task of
someone else's nursery) or run in a thread (``start_in_thread``) leaves Ctrl-C to its host.
"""

from __future__ import annotations

import signal
import threading

import trio

__all__ = ["cancel_on_ctrl_c", "owns_ctrl_c"]


def owns_ctrl_c() -> bool:
    """Whether the calling task is the main task of its run, in the main thread, with Python's
    (or trio's) SIGINT handler in place: a host that set its own keeps it."""
    if threading.current_thread() is not threading.main_thread():
        return False
    handler = signal.getsignal(signal.SIGINT)
    # trio replaces Python's handler with its own (which raises KeyboardInterrupt in a task) only
    # where Python's was in place: either means nobody else asked for Ctrl-C.
    if handler is not signal.default_int_handler and getattr(handler, "__module__", None) != "trio._core._ki":
        return False
    task = trio.lowlevel.current_task()
    return task.parent_nursery is not None and task.parent_nursery.parent_task is trio.lowlevel.current_root_task()


async def cancel_on_ctrl_c(scope: trio.CancelScope) -> None:
    """Cancel ``scope`` on the first Ctrl-C, then give SIGINT back to Python's handler."""
    with trio.open_signal_receiver(signal.SIGINT) as interrupts:
        async for _ in interrupts:
            scope.cancel()
            return
