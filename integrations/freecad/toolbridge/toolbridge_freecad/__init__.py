"""toolbridge for FreeCAD: AI agents drive FreeCAD through the local toolbridge daemon (MCP).

Theory of operation
-------------------
FreeCAD runs ``InitGui.py`` of every folder in its ``Mod`` directory when its GUI starts;
ours calls :func:`start_when_ready`, which waits (a zero-delay ``QTimer`` on the GUI thread)
until the main window is up and the Qt event loop runs, then starts one
:class:`app_client.AppThread`: trio runs in its own thread and does all the networking
(finding the daemon, registering, heartbeats, reconnecting with backoff after the daemon
restarts), so FreeCAD's window never waits on a socket.

FreeCAD's documents and Qt's widgets may only be touched on the GUI thread. The App's
``gui_executor`` is :func:`app_client.qt_executor` built with FreeCAD's own ``QtCore``
(PySide2): the trio thread emits a queued signal and the call runs on the GUI thread between
two of Qt's events, like a click. Long tools (``make_grid``) are ``async`` and do their work in
GUI-thread steps (``ctx.run_on_gui_thread``), so the window repaints and other calls are
answered between steps, and a cancel stops the work between two steps.

A dock on the right of the main window shows the connection state. When FreeCAD quits
(``QApplication.aboutToQuit``) the app says ``goodbye`` so the daemon releases its tools at
once; a call that was running is abandoned.

``vendor/`` beside this package (made by ``toolbridge integrate freecad``) holds app_client and
its dependencies for FreeCAD's Python; it goes on ``sys.path`` when the app starts, not when
this module is imported.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import FreeCAD
import FreeCADGui
from PySide2 import QtCore, QtWidgets

APP_NAME = "FreeCAD"
_VENDOR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "vendor")


class _Runtime:
    """The running app (one per FreeCAD process) and its dock."""

    def __init__(self) -> None:
        self.runner: Any = None
        self.executor: Any = None
        self.dock: Any = None
        self.state = "stopped"
        self.lock = threading.Lock()


_runtime = _Runtime()


class StatusDock(QtWidgets.QDockWidget):  # type: ignore[misc]
    """The connection state, in a dock on the right of FreeCAD's main window."""

    def __init__(self, parent: Any) -> None:
        super().__init__("toolbridge", parent)
        self.setObjectName("toolbridge")
        self.label = QtWidgets.QLabel()
        self.label.setWordWrap(True)
        self.label.setMargin(8)
        self.label.setAlignment(QtCore.Qt.AlignTop | QtCore.Qt.AlignLeft)
        self.setWidget(self.label)
        self.show_state("starting")

    def show_state(self, state: str) -> None:
        text = f"<b>Agents: {state}</b>"
        runner = _runtime.runner
        if runner is not None and state == "connected":
            text += f"<br>{len(runner.app.agent_names)} tools offered as {APP_NAME}__*"
        elif state in ("connecting", "reconnecting"):
            text += "<br>waiting for the toolbridge daemon (<tt>toolbridge serve</tt>)"
        self.label.setText(text)


def _on_state(state: Any) -> None:
    """Called in the trio thread: the dock is updated on the GUI thread."""
    _runtime.state = str(getattr(state, "value", state))
    executor, dock = _runtime.executor, _runtime.dock
    if executor is None or dock is None:
        return
    try:
        executor(lambda: dock.show_state(_runtime.state))
    except RuntimeError:
        pass  # FreeCAD is quitting: its widgets are gone


def start() -> None:
    """Start the app on the GUI thread (idempotent)."""
    with _runtime.lock:
        if _runtime.runner is not None:
            return
        if os.path.isdir(_VENDOR) and _VENDOR not in sys.path:
            sys.path.insert(0, _VENDOR)
        from app_client import App, qt_executor

        from .doc_tools import declare

        window = FreeCADGui.getMainWindow()
        _runtime.executor = qt_executor(QtCore, parent=window)
        _runtime.dock = StatusDock(window)
        window.addDockWidget(QtCore.Qt.RightDockWidgetArea, _runtime.dock)
        # Handlers run one at a time on the GUI thread whatever this says; more than one call at
        # once lets a long async tool (make_grid, in GUI-thread steps) leave room for others.
        app = App(APP_NAME, gui_executor=_runtime.executor, app_version=".".join(FreeCAD.Version()[:3]),
                  on_state_change=_on_state, max_concurrency=4)
        declare(app)
        _runtime.state = "connecting"
        _runtime.runner = app.start_in_thread()
        QtWidgets.QApplication.instance().aboutToQuit.connect(stop)
    _runtime.dock.show_state(_runtime.state)


def stop() -> None:
    """Stop the app: goodbye to the daemon, join its thread (idempotent)."""
    with _runtime.lock:
        runner, _runtime.runner = _runtime.runner, None
    if runner is not None:
        runner.stop(timeout=5)
    _runtime.state = "stopped"


def start_when_ready() -> None:
    """From InitGui.py: start once FreeCAD's main window is up and its event loop runs."""
    def attempt() -> None:
        try:
            start()
        except Exception as exc:  # never a broken FreeCAD: say it in the report view
            FreeCAD.Console.PrintError(f"toolbridge did not start: {exc}\n")

    QtCore.QTimer.singleShot(0, attempt)
