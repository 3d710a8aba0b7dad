"""A ``gui_executor`` for Qt programs (PySide2/6, PyQt5/6), without importing any Qt binding.

Theory of operation
-------------------
Qt widgets may only be touched on the thread that runs the Qt event loop (the GUI thread).
:func:`qt_executor` is called once on that thread with the program's own ``QtCore`` module
(FreeCAD's ``PySide2.QtCore``, a PyQt program's ``PyQt5.QtCore``, ...). It makes one small
QObject there with a signal that carries a Python callable; the executor emits that signal
from any thread, and a *queued* connection to the object's own slot makes Qt post an event to
the GUI thread's loop, which then runs the callable between two of its events, like a click.
``QTimer.singleShot(0, fn)`` would not do: from a thread without a Qt event loop its timer never
fires. app_client therefore needs no Qt dependency: the binding comes from the program.

When the object is gone (the program is quitting and deleted it), emitting raises
RuntimeError; :func:`app_client.guicall.run_sync_on_gui` turns that into the call's error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .guicall import GuiExecutor
from .logs import get_logger

__all__ = ["qt_executor"]

_log = get_logger(__name__)


def qt_executor(qtcore: Any, parent: Any = None) -> GuiExecutor:
    """A ``gui_executor`` for a Qt program: call it on the GUI thread with the program's
    ``QtCore`` module (PySide2, PySide6, PyQt5 or PyQt6).

    ``parent`` (a QObject, optional) owns the relay object, so that it is deleted with it; the
    returned function keeps the relay alive otherwise. Calls run in the order submitted; one
    that raises is logged and the next one runs.
    """
    signal_type = getattr(qtcore, "Signal", None) or qtcore.pyqtSignal
    slot_type = getattr(qtcore, "Slot", None) or qtcore.pyqtSlot
    queued = getattr(qtcore.Qt, "ConnectionType", qtcore.Qt).QueuedConnection

    class _GuiRelay(qtcore.QObject):  # type: ignore[misc]  # the program's QObject
        call = signal_type(object)

        @slot_type(object)  # type: ignore[untyped-decorator]  # the program's Slot
        def run(self, fn: Callable[[], None]) -> None:
            try:
                fn()
            except Exception:
                _log.exception("GUI call raised")

    relay = _GuiRelay(parent)
    relay.call.connect(relay.run, queued)

    def submit(fn: Callable[[], None]) -> None:
        relay.call.emit(fn)

    return submit
