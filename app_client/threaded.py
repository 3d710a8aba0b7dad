"""Running an :class:`~app_client.App` from a program whose main loop is not trio (Tk, Qt, ...).

Theory of operation
-------------------
:class:`AppThread` runs ``trio.run(app.run)`` in one daemon thread. Everything network-side
— reading, heartbeats, the writer, the backoff loop — lives in that thread, so a GUI thread
that is busy (or blocked in a long handler) never delays a ``pong``.

Handlers run where :mod:`app_client.invoke` puts them: async ones in the trio thread, sync
ones in trio worker threads, or on the GUI thread through the app's ``gui_executor``: a
function, callable from any thread, that schedules a zero-argument callable to run soon on
the GUI thread. :func:`tk_executor` builds one for Tk; for Qt, emit a queued signal
connected to a slot that calls the function, or use
``QMetaObject.invokeMethod(obj, fn, Qt.QueuedConnection)``. Loops that offer a periodic
callback but no thread-safe way to schedule one (Blender's ``bpy.app.timers``, whose API must
only be used on the main thread; a game loop's tick) use a :class:`GuiCallQueue`: its
``submit`` is the executor, and the loop's callback calls ``run_pending()``.

Control from other threads is blocking and thread-safe: :meth:`AppThread.stop` cancels the
trio run and joins the thread (idempotent; from inside the trio thread it only cancels);
:meth:`AppThread.wait_connected` blocks until the app is registered; :meth:`add_tool` and
:meth:`remove_tool` call into the trio thread with :func:`trio.from_thread.run`. Do not call
the blocking ones from the GUI thread while a GUI handler is waiting on it — ``stop`` is
safe there because cancelled GUI calls are abandoned.

This module does not import :mod:`app_client.app` (which imports it for
:meth:`App.start_in_thread`): :class:`AppThread` only needs the few members of an app named
by :class:`_AppLike`, and :class:`~app_client.state.ConnectionState` lives in a leaf module.
"""

from __future__ import annotations

import atexit
import functools
import queue
import threading
from collections.abc import Callable
from typing import Any, Final, Protocol

import trio

from .invoke import GuiExecutor
from .logs import get_logger
from .state import ConnectionState
from .tools import ToolDefinition

__all__ = ["AppThread", "GuiCallQueue", "tk_executor"]

_log = get_logger(__name__)

#: At the program's exit, how long to wait for a running app to say goodbye and stop.
STOP_AT_EXIT: Final = 2.0


class _AppLike(Protocol):
    """What :class:`AppThread` uses of an :class:`~app_client.App` (typed structurally so
    that this module need not import ``app``, which imports it)."""

    @property
    def name(self) -> str: ...

    async def run(self) -> None: ...

    async def add_tool(self, fn: Callable[..., Any], **options: Any) -> ToolDefinition: ...

    async def remove_tool(self, name: str) -> None: ...

    def _add_listener(self, callback: Callable[[ConnectionState], object]) -> None: ...

    def _remove_listener(self, callback: Callable[[ConnectionState], object]) -> None: ...


class AppThread:
    """A background thread running one :class:`App` (see the module docstring).

    Usable as a context manager: ``with app.start_in_thread() as runner: ...`` stops it on
    exit. ``error`` holds the exception that ended :meth:`App.run`, if any.
    """

    def __init__(self, app: _AppLike) -> None:
        self.app = app
        self._thread = threading.Thread(
            target=self._main, name=f"toolbridge {app.name}", daemon=True
        )
        self._lock = threading.Lock()
        self._condition = threading.Condition(self._lock)
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self._stop_requested = False
        self._connected = False
        self._finished = False
        self.error: BaseException | None = None
        app._add_listener(self._on_state)

    def __enter__(self) -> AppThread:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        """True from :meth:`start` until the trio run has ended."""
        return self._thread.is_alive()

    def start(self) -> None:
        """Start the thread (once).

        If the program exits with the app still running (the host's main thread ended, or a
        Ctrl-C ended it), the app is stopped at exit, so it says goodbye (the daemon releases its
        names at once instead of holding them through the grace period); the wait for that is
        at most :data:`STOP_AT_EXIT` seconds."""
        self._thread.start()
        atexit.register(self._stop_at_exit)

    def _stop_at_exit(self) -> None:
        self.stop(timeout=STOP_AT_EXIT)

    def _on_state(self, state: ConnectionState) -> None:
        with self._condition:
            self._connected = state is ConnectionState.CONNECTED
            self._condition.notify_all()

    def _main(self) -> None:
        try:
            trio.run(self._run)
        except BaseException as exc:  # noqa: BLE001 - stored for the controlling thread
            self.error = exc
            _log.error("toolbridge app thread ended with an error", app=self.app.name, exc_info=exc)
        finally:
            atexit.unregister(self._stop_at_exit)
            self.app._remove_listener(self._on_state)
            with self._condition:
                self._finished = True
                self._connected = False
                self._condition.notify_all()

    async def _run(self) -> None:
        with trio.CancelScope() as scope:
            with self._lock:
                self._token = trio.lowlevel.current_trio_token()
                self._scope = scope
                if self._stop_requested:
                    scope.cancel()
            await self.app.run()

    def wait_connected(self, timeout: float | None = None) -> bool:
        """Block until the app is registered; ``False`` on timeout or if it stopped.

        Re-raises the error that ended the app's run, if that is why it stopped.
        """
        with self._condition:
            self._condition.wait_for(lambda: self._connected or self._finished, timeout)
            if self._connected:
                return True
        if self.error is not None:
            raise self.error
        return False

    def stop(self, timeout: float | None = None) -> None:
        """Stop the app and join the thread (idempotent; safe before or after it ended)."""
        with self._lock:
            self._stop_requested = True
            token, scope = self._token, self._scope
        if token is not None and scope is not None:
            try:
                token.run_sync_soon(scope.cancel)
            except trio.RunFinishedError:
                pass
        if threading.current_thread() is self._thread or not self._thread.is_alive():
            return
        self._thread.join(timeout)

    def _call(self, fn: Callable[[], Any]) -> Any:
        with self._lock:
            token = self._token
        if token is None or self._finished:
            raise RuntimeError(f"{self.app.name} is not running")
        return trio.from_thread.run(fn, trio_token=token)

    def add_tool(self, fn: Callable[..., Any], **options: Any) -> ToolDefinition:
        """:meth:`App.add_tool` from another thread (blocks until the broker confirmed)."""
        return self._call(functools.partial(self.app.add_tool, fn, **options))  # type: ignore[no-any-return]

    def remove_tool(self, name: str) -> None:
        """:meth:`App.remove_tool` from another thread (blocks until the broker confirmed)."""
        self._call(functools.partial(self.app.remove_tool, name))


class GuiCallQueue:
    """Calls for a GUI thread: queued from any thread, run when the GUI thread asks.

    Pass :meth:`submit` as the App's ``gui_executor`` and call :meth:`run_pending` from the
    GUI loop's own periodic callback (Blender: a function registered with
    ``bpy.app.timers.register`` that returns its next interval). Nothing here knows the GUI
    toolkit, so the same queue serves any loop that can poll.
    """

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()

    def submit(self, call: Callable[[], None]) -> None:
        """Queue ``call`` (thread-safe, never blocks)."""
        self._calls.put(call)

    def pending(self) -> int:
        """How many calls wait (a snapshot: other threads may add more at any moment)."""
        return self._calls.qsize()

    def run_pending(self, max_calls: int | None = None) -> int:
        """Run queued calls in order, at most ``max_calls`` (all that wait if None), on the
        calling thread; a call that raises is logged and the next one runs. Returns how many ran."""
        ran = 0
        while max_calls is None or ran < max_calls:
            try:
                call = self._calls.get_nowait()
            except queue.Empty:
                break
            ran += 1
            try:
                call()
            except Exception:
                _log.exception("GUI call raised")
        return ran


class _TkRoot(Protocol):
    def after(self, ms: int, func: Callable[[], object], /) -> object: ...


def tk_executor(root: _TkRoot, *, poll_interval_ms: int = 10) -> GuiExecutor:
    """A ``gui_executor`` for Tk: call it on the Tk thread, with the root window.

    Calls are queued (thread-safe, without relying on a thread-enabled Tcl) and run by a
    poll scheduled with ``root.after`` every ``poll_interval_ms``; polling stops when the
    window is destroyed. tkinter itself is never imported here.
    """
    calls = GuiCallQueue()

    def drain() -> None:
        calls.run_pending()
        try:
            root.after(poll_interval_ms, drain)
        except Exception:  # the window is gone (tkinter.TclError)
            _log.debug("Tk root gone; GUI executor stopped")

    root.after(poll_interval_ms, drain)
    return calls.submit
