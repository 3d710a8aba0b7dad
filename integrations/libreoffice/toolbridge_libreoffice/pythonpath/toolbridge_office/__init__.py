"""toolbridge inside LibreOffice: AI agents drive Calc and Writer through the local daemon (MCP).

Theory of operation
-------------------
The extension's job (``toolbridge_component.py``, run on the office's OnStartApp event) calls
:func:`start`: one :class:`app_client.AppThread` runs trio in its own thread and does all the
networking (finding the daemon, registering, heartbeats, reconnecting after a restart), so
the office's UI never waits on a socket.

Where UNO may be called (measured in LibreOffice 7.4, see the README): every UNO
implementation in the office takes the *SolarMutex* (the office's one big lock) itself, so a
call from any thread is *allowed*, and is serialised with the main thread; but the main (VCL)
thread holds that lock whenever it is busy (a worker thread's ``setValue`` waited the full 2 s
that a main-thread callback slept), and opening or drawing windows from other threads is
toolkit- and platform-dependent. So every tool runs on the office's main thread, between two
event-loop iterations, like a menu command: the App's ``gui_executor`` is an
:class:`OfficeMainThread`, which queues calls in an :class:`app_client.GuiCallQueue` and asks
the office to run what is queued with ``com.sun.star.awt.AsyncCallback`` (VCL's
PostUserEvent). Even that request is made by a small *poster* thread, never by trio's: trio's
thread then never enters UNO at all (OpenOffice.org and early LibreOffice took the SolarMutex in
``addCallback``; newer ones do not, but nothing in its contract says so), so a busy office
delays tools, never a heartbeat.

Quitting the office stops the app (a terminate listener): goodbye to the daemon, so its tools
go at once. The menu entry Tools > Add-Ons > "toolbridge: connection state" shows the state.

``vendor/`` (made by ``toolbridge integrate libreoffice``) holds app_client and its
dependencies for the office's Python; it is put on ``sys.path`` by :func:`start`, not on import.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any, Callable

import unohelper
from com.sun.star.awt import XCallback
from com.sun.star.frame import XTerminateListener

APP_NAME = "LibreOffice"
_VENDOR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "vendor")


class _Callback(unohelper.Base, XCallback):
    def __init__(self, run: Callable[[], None]) -> None:
        self._run = run

    def notify(self, data: Any) -> None:  # on the office's main thread
        self._run()


class OfficeMainThread:
    """A ``gui_executor`` for the office: calls run on its main thread (see the module docstring)."""

    def __init__(self, ctx: Any) -> None:
        from app_client import GuiCallQueue

        self.calls = GuiCallQueue()
        self._async = ctx.ServiceManager.createInstanceWithContext("com.sun.star.awt.AsyncCallback", ctx)
        self._wake = threading.Event()
        self._stopped = False
        self._callback = _Callback(self._drain)
        self._poster = threading.Thread(target=self._post, name="toolbridge office poster", daemon=True)
        self._poster.start()

    def submit(self, call: Callable[[], None]) -> None:
        """The executor: queue ``call`` and wake the poster (any thread; never blocks)."""
        self.calls.submit(call)
        self._wake.set()

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()

    def _post(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stopped:
                return
            try:
                self._async.addCallback(self._callback, None)  # waits for the SolarMutex
            except Exception:  # the office is shutting down
                return

    def _drain(self) -> None:
        self.calls.run_pending()


class _Runtime:
    def __init__(self) -> None:
        self.runner: Any = None
        self.main_thread: OfficeMainThread | None = None
        self.state = "stopped"
        self.lock = threading.Lock()
        self.listener: Any = None


_runtime = _Runtime()


class _OnQuit(unohelper.Base, XTerminateListener):
    def queryTermination(self, event: Any) -> None:
        pass

    def notifyTermination(self, event: Any) -> None:
        stop()

    def disposing(self, event: Any) -> None:
        pass


def _on_state(state: Any) -> None:  # in the trio thread: no UNO here
    _runtime.state = str(getattr(state, "value", state))


def state() -> str:
    return _runtime.state


def start(ctx: Any) -> None:
    """Start the app (idempotent); called on the office's main thread. A failure (a broken
    install) is shown by the menu entry and printed once to stderr; the office goes on."""
    try:
        _start(ctx)
    except Exception as exc:  # never break the office's start
        _runtime.state = f"failed: {type(exc).__name__}: {exc}"
        print(f"toolbridge: could not start: {type(exc).__name__}: {exc}", file=sys.stderr)


def _start(ctx: Any) -> None:
    with _runtime.lock:
        if _runtime.runner is not None:
            return
        if os.path.isdir(_VENDOR) and _VENDOR not in sys.path:
            sys.path.insert(0, _VENDOR)
        import importlib.metadata  # noqa: F401 - structlog imports it lazily; not while the office quits

        from app_client import App

        from .office_tools import Office, declare
        from .writer_tools import declare_writer

        main_thread = OfficeMainThread(ctx)
        app = App(APP_NAME, gui_executor=main_thread.submit, app_version=_office_version(ctx),
                  on_state_change=_on_state)
        office = Office(ctx)
        declare(app, office)
        declare_writer(app, office)
        desktop = ctx.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", ctx)
        _runtime.listener = _OnQuit()
        desktop.addTerminateListener(_runtime.listener)
        _runtime.main_thread = main_thread
        _runtime.state = "connecting"
        _runtime.runner = app.start_in_thread()


def stop() -> None:
    """Goodbye to the daemon, join the app's thread (idempotent)."""
    with _runtime.lock:
        runner, _runtime.runner = _runtime.runner, None
        main_thread, _runtime.main_thread = _runtime.main_thread, None
    if runner is not None:
        runner.stop(timeout=5)
    if main_thread is not None:
        main_thread.stop()
    _runtime.state = "stopped"


def _office_version(ctx: Any) -> str:
    try:
        from com.sun.star.beans import PropertyValue

        provider = ctx.ServiceManager.createInstanceWithContext("com.sun.star.configuration.ConfigurationProvider", ctx)
        node = PropertyValue()
        node.Name, node.Value = "nodepath", "/org.openoffice.Setup/Product"
        access = provider.createInstanceWithArguments("com.sun.star.configuration.ConfigurationAccess", (node,))
        return f"{access.ooName} {access.ooSetupVersionAboutBox}"
    except Exception:
        return "unknown"


def show_status(ctx: Any) -> None:
    """The menu entry: a message box with the connection state and the tools offered."""
    from com.sun.star.awt.MessageBoxType import INFOBOX

    runner = _runtime.runner
    lines = [f"Agents: {_runtime.state}"]
    if runner is not None and _runtime.state == "connected":
        lines.append(f"{len(runner.app.agent_names)} tools offered as {APP_NAME}__*")
    toolkit = ctx.ServiceManager.createInstanceWithContext("com.sun.star.awt.Toolkit", ctx)
    desktop = ctx.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", ctx)
    frame = desktop.getCurrentFrame()
    parent = frame.getContainerWindow() if frame is not None else None
    box = toolkit.createMessageBox(parent, INFOBOX, 1, "toolbridge", "\n".join(lines))
    box.execute()
