"""app_client.qt_executor against a real Qt event loop (PySide6 from PyPI; app_client itself
imports no Qt): calls submitted from other threads run on the Qt thread, in order; trio
waits for them without blocking; a long call made of GUI-thread steps lets the Qt loop run
(a timer fires) between steps, and a cancel ends it between two steps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
import trio

from PySide6 import QtCore  # the test extra installs PySide6-essentials

from app_client import qt_executor
from app_client.guicall import run_sync_on_gui


@pytest.fixture(scope="module")
def qt_app() -> Iterator[QtCore.QCoreApplication]:
    app = QtCore.QCoreApplication.instance() or QtCore.QCoreApplication([])
    yield app


def run_qt_until(app: QtCore.QCoreApplication, worker: Callable[[], None]) -> None:
    """Run ``worker`` in another thread while the Qt loop runs here; quit when it ends
    (the quit is itself queued onto the Qt thread)."""
    errors: list[BaseException] = []
    executor = qt_executor(QtCore)

    def body() -> None:
        try:
            worker()
        except BaseException as exc:  # noqa: BLE001 - reported on the main thread
            errors.append(exc)
        finally:
            executor(app.quit)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    # A failsafe, not a timing assertion: an executor that never reaches the Qt thread would
    # otherwise hang the run instead of failing it.
    QtCore.QTimer.singleShot(60_000, app.quit)
    app.exec()
    thread.join(5)
    assert not thread.is_alive(), "the worker's calls never ran on the Qt thread"
    if errors:
        raise errors[0]


def test_calls_from_other_threads_run_on_the_qt_thread_in_order(qt_app: QtCore.QCoreApplication) -> None:
    execute = qt_executor(QtCore)
    ran: list[tuple[int, bool]] = []
    qt_thread = threading.current_thread()

    def boom() -> None:
        raise ValueError("a GUI call that raises is logged; the next one runs")

    def submit() -> None:
        for n in range(5):
            execute(lambda n=n: ran.append((n, threading.current_thread() is qt_thread)))
            if n == 2:
                execute(boom)

    run_qt_until(qt_app, submit)
    assert ran == [(n, True) for n in range(5)]


def test_a_long_call_in_gui_steps_lets_the_qt_loop_run_and_stops_at_a_cancel(
        qt_app: QtCore.QCoreApplication) -> None:
    """What ToolContext.run_on_gui_thread does for a long tool: one step at a time on the Qt
    thread. A QTimer on the Qt thread fires between steps (the window would repaint), and
    cancelling the trio task ends the work between two steps."""
    execute = qt_executor(QtCore)
    events: list[str] = []
    timer = QtCore.QTimer()
    timer.setInterval(0)
    timer.timeout.connect(lambda: events.append("tick") if not events or events[-1] != "tick" else None)
    timer.start()
    steps_done: list[int] = []

    def step(index: int) -> None:
        events.append(f"step {index}")
        steps_done.append(index)

    async def long_tool() -> None:
        limiter = trio.CapacityLimiter(1)
        with trio.CancelScope() as scope:
            for index in range(100):
                await run_sync_on_gui(execute, lambda index=index: step(index), limiter)
                if index == 4:
                    scope.cancel()  # as a toolCancel would
        # The result of a step that ran is delivered; after the cancel no step starts.
        assert await run_sync_on_gui(execute, lambda: threading.current_thread().name, limiter) == "MainThread"

    run_qt_until(qt_app, lambda: trio.run(long_tool))
    timer.stop()
    assert steps_done == [0, 1, 2, 3, 4]
    first, last = events.index("step 0"), events.index("step 4")
    assert "tick" in events[first:last], events  # the Qt loop ran while the long call went on


def test_an_executor_whose_relay_is_gone_raises_into_the_caller(qt_app: QtCore.QCoreApplication) -> None:
    owner = QtCore.QObject()
    execute = qt_executor(QtCore, parent=owner)
    import shiboken6

    shiboken6.delete(owner)  # the program quit and deleted its objects

    async def call() -> None:
        with pytest.raises(RuntimeError):
            await run_sync_on_gui(execute, lambda: None, trio.CapacityLimiter(1))

    trio.run(call)
