"""toolbridge for Blender: AI agents drive Blender through the local toolbridge daemon (MCP).

Theory of operation
-------------------
The connection state shows in Blender's status bar and in the 3D Viewport's sidebar (tab
toolbridge). Enabling the add-on starts one :class:`app_client.AppThread`: trio runs in its own thread and
does all the networking (finding the daemon, registering, heartbeats, reconnecting with
backoff after the daemon restarts), so Blender's UI never waits on a socket. ``bpy`` may only be
touched on Blender's main thread, and ``bpy.app.timers`` may only be used there too, so the
App's ``gui_executor`` is a :class:`app_client.GuiCallQueue`: the trio thread queues each call,
and a persistent Blender timer on the main thread runs what is queued (every
:data:`TICK_SECONDS`; it also redraws the sidebar panel when the connection state changed).
A call therefore runs between two of Blender's event-loop iterations, like an operator.

Disabling the add-on, or quitting Blender (which disables add-ons), stops the thread: the app
says ``goodbye`` so the daemon releases its tools at once, and a call that was running is
abandoned.

The code-execution tool (``run_python_UNSAFE``) is off unless the user turns it on in the
add-on's preferences; turning it on or off adds or removes the tool while connected.

``vendor/`` (made by ``toolbridge integrate blender``) holds app_client and its pure-Python and
binary dependencies for Blender's own Python; it is put on ``sys.path`` when the add-on is
enabled, not when this module is imported.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

import bpy

bl_info = {
    "name": "toolbridge",
    "author": "toolbridge",
    "version": (0, 1, 0),
    "blender": (3, 4, 0),
    "location": "3D Viewport > Sidebar > toolbridge",
    "description": "Let AI agents (over MCP) drive Blender through the local toolbridge daemon",
    "category": "System",
}

#: How often the main-thread timer runs queued calls (seconds) while agents are quiet ...
TICK_SECONDS = 0.02
#: ... and for a moment after a call ran, since agents often send the next one right away
#: (a call then waits ~2 ms for the main thread instead of up to a whole idle tick).
BUSY_TICK_SECONDS = 0.002
BUSY_FOR_SECONDS = 0.5
APP_NAME = "Blender"

_VENDOR = os.path.join(os.path.dirname(__file__), "vendor")


class _Runtime:
    """The running app (one per Blender process) and what the panel shows."""

    def __init__(self) -> None:
        self.runner: Any = None
        self.calls: Any = None
        self.state = "stopped"
        self.shown_state = ""
        self.last_call = -1e9  # time.monotonic() when the timer last ran a call
        self.lock = threading.Lock()


_runtime = _Runtime()


def _preferences() -> Any:
    addon = bpy.context.preferences.addons.get(__package__ or __name__)
    return addon.preferences if addon is not None else None


def _on_state(state: Any) -> None:  # called in the trio thread: no bpy here
    _runtime.state = str(getattr(state, "value", state))


def _tick() -> float:
    """The main-thread timer: run queued calls, redraw the panel on a state change; returns
    when to run next."""
    calls = _runtime.calls
    now = time.monotonic()
    if calls is not None and calls.run_pending():
        _runtime.last_call = now
    if _runtime.state != _runtime.shown_state:
        _runtime.shown_state = _runtime.state
        for window in bpy.context.window_manager.windows:
            for area in window.screen.areas:
                if area.type in ("VIEW_3D", "STATUSBAR"):
                    area.tag_redraw()
    return BUSY_TICK_SECONDS if now - _runtime.last_call < BUSY_FOR_SECONDS else TICK_SECONDS


def _code_tool_changed(_self: Any, _context: Any) -> None:
    """Preferences: add or remove the code-execution tool (off the main thread: the daemon's
    confirmation must not hold Blender's UI)."""
    runner = _runtime.runner
    if runner is None:
        return
    from .scene_tools import RUN_PYTHON_OPTIONS, run_python_tool

    enabled = bool(_preferences().allow_code_execution)

    def change() -> None:
        try:
            if enabled:
                runner.add_tool(run_python_tool, **RUN_PYTHON_OPTIONS)
            else:
                runner.remove_tool(RUN_PYTHON_OPTIONS["name"])
        except Exception as exc:  # not running, or the daemon refused: the panel says so
            _runtime.state = f"code tool not changed: {exc}"

    threading.Thread(target=change, name="toolbridge preferences", daemon=True).start()


class ToolbridgePreferences(bpy.types.AddonPreferences):
    bl_idname = __package__ or __name__

    allow_code_execution: bpy.props.BoolProperty(  # type: ignore[valid-type]
        name="Let agents run arbitrary Python (unsafe)",
        description="Offer agents the tool run_python_UNSAFE: any Python inside Blender, with access to "
                    "your files and network. Off by default",
        default=False,
        update=_code_tool_changed,
    )

    def draw(self, context: Any) -> None:
        self.layout.prop(self, "allow_code_execution")


class VIEW3D_PT_toolbridge(bpy.types.Panel):
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "toolbridge"
    bl_label = "toolbridge"

    def draw(self, context: Any) -> None:
        state = _runtime.state
        icon = "CHECKMARK" if state == "connected" else "ERROR" if state == "failed" else "TIME"
        self.layout.label(text=f"Agents: {state}", icon=icon)
        runner = _runtime.runner
        if runner is not None and state == "connected":
            self.layout.label(text=f"{len(runner.app.agent_names)} tools offered as {APP_NAME}__*")
        prefs = _preferences()
        if prefs is not None and prefs.allow_code_execution:
            self.layout.label(text="Code execution is ON", icon="ERROR")


def _draw_status(self: Any, context: Any) -> None:
    """Blender's status bar (always visible): the connection state in a few words."""
    state = _runtime.state
    self.layout.label(text=f"toolbridge: {state}", icon="LINKED" if state == "connected" else "UNLINKED")


def start() -> None:
    """Start the app (idempotent)."""
    with _runtime.lock:
        if _runtime.runner is not None:
            return
        if os.path.isdir(_VENDOR) and _VENDOR not in sys.path:
            sys.path.insert(0, _VENDOR)
        # structlog's module __getattr__ imports importlib.metadata on any unknown name; when
        # Blender quits, addon_utils.disable_all() probes every module in sys.modules for
        # __addon_enabled__ while iterating it, and that import would change the dict under it
        # ("dictionary changed size during iteration", a traceback on quit). Import it now.
        import importlib.metadata  # noqa: F401
        from app_client import App, GuiCallQueue

        from .scene_tools import RUN_PYTHON_OPTIONS, declare, run_python_tool

        calls = GuiCallQueue()
        # A few calls at once: each is still one step at a time on the main thread, but a
        # question asked during a long render is answered between its strips instead of
        # waiting behind it (snapshot.py; changes to the scene refuse while a render runs).
        app = App(APP_NAME, gui_executor=calls.submit, app_version=bpy.app.version_string,
                  on_state_change=_on_state, max_concurrency=4)
        declare(app)
        prefs = _preferences()
        if prefs is not None and prefs.allow_code_execution:
            app.tool(**RUN_PYTHON_OPTIONS)(run_python_tool)
        _runtime.calls = calls
        _runtime.state = "connecting"
        _runtime.runner = app.start_in_thread()


def stop() -> None:
    """Stop the app: goodbye to the daemon, join its thread (idempotent)."""
    with _runtime.lock:
        runner, _runtime.runner = _runtime.runner, None
    if runner is not None:
        runner.stop(timeout=5)
    _runtime.state = "stopped"


def _start_later() -> None:
    start()
    return None


def register() -> None:
    bpy.utils.register_class(ToolbridgePreferences)
    bpy.utils.register_class(VIEW3D_PT_toolbridge)
    bpy.types.STATUSBAR_HT_header.append(_draw_status)
    if not bpy.app.timers.is_registered(_tick):
        bpy.app.timers.register(_tick, first_interval=TICK_SECONDS, persistent=True)
    # Preferences are read once Blender has finished starting (not in register's restricted context).
    bpy.app.timers.register(_start_later, first_interval=0.0)


def unregister() -> None:
    stop()
    if bpy.app.timers.is_registered(_tick):
        bpy.app.timers.unregister(_tick)
    if bpy.app.timers.is_registered(_start_later):
        bpy.app.timers.unregister(_start_later)
    _runtime.calls = None
    bpy.types.STATUSBAR_HT_header.remove(_draw_status)
    bpy.utils.unregister_class(VIEW3D_PT_toolbridge)
    bpy.utils.unregister_class(ToolbridgePreferences)
