"""toolbridge's app client: let AI agents call the tools of a running desktop app.

Theory of operation
-------------------
An app makes one :class:`App`, declares tools with ``@app.tool`` (plain or async functions;
the input schema comes from type hints, the description from the docstring), and runs it:
``await app.run()`` inside trio, ``async with app.connected():`` for a background task, or
``app.start_in_thread()`` for programs whose main loop is not trio. The app finds the local
daemon (:func:`find_daemon`), registers over the NDJSON wire protocol (:mod:`app_client.protocol`: sans-IO messages and
the rules of both sides; :mod:`app_client.wire` re-exports its messages),
answers heartbeats, runs calls and reconnects with backoff when the daemon goes away.

Handlers return plain JSON-able values, content built with :func:`text` / :func:`image` /
:class:`Content`, or a :class:`ToolResult`; raise :class:`ToolError` to fail with a message
for the agent. A parameter annotated :class:`ToolContext` receives the call's context
(progress, deadline, cancellation, ``ctx.log``). Apps may also offer resources, prompts and
argument completions, and send log messages to agents (``app.log``, :class:`AgentLogHandler`).

Example::

    app = App("WatchTower")

    @app.tool
    async def click_element(x: int, y: int, ctx: ToolContext) -> dict:
        \"\"\"Click at window coordinates.\"\"\"
        ...
        return {"clicked": True}

    trio.run(app.run)

This package never imports the daemon (``broker``) and never configures logging: it logs
through structlog (:mod:`app_client.logs`: to stderr until the host configures structlog, never
to stdout, which may be a stdio protocol or a host program's console). Importing it has no side
effects. The daemon imports only its protocol
(:mod:`app_client.protocol`, which imports no trio), :mod:`app_client.channel`, and the
home-file helpers (``discovery``, ``transport``, ``tls``).
"""

from __future__ import annotations

from .app import App, ConnectionState, Connector, connect_tcp
from .applog import AgentLogHandler
from .backoff import Backoff
from .context import Elicitation, ToolContext
from .discovery import DaemonAddress, RuntimeInfo, default_home, find_daemon
from .errors import (
    ConnectionClosed,
    ElicitationError,
    DaemonNotFound,
    InstanceReplaced,
    LocalProtocolError,
    ProtocolError,
    RegistrationRejected,
    RemoteProtocolError,
    ToolbridgeError,
    ToolDefinitionError,
    ToolError,
    ToolUpdateRejected,
)
from .invoke import GuiExecutor
from .results import Content, ContentBlock, image, text
from .qtcall import qt_executor
from .threaded import AppThread, GuiCallQueue, tk_executor
from .tls import client_context
from .tools import RemoteHandler, ToolDefinition, define_remote_tool, define_tool, derive_input_schema
from .transport import connect_daemon
from .protocol import ToolResult

__all__ = [
    "AgentLogHandler",
    "App",
    "AppThread",
    "Backoff",
    "ConnectionClosed",
    "ConnectionState",
    "Connector",
    "Content",
    "ContentBlock",
    "DaemonAddress",
    "DaemonNotFound",
    "Elicitation",
    "ElicitationError",
    "GuiCallQueue",
    "GuiExecutor",
    "InstanceReplaced",
    "LocalProtocolError",
    "ProtocolError",
    "RegistrationRejected",
    "RemoteHandler",
    "RemoteProtocolError",
    "RuntimeInfo",
    "ToolContext",
    "ToolDefinition",
    "ToolDefinitionError",
    "ToolError",
    "ToolResult",
    "ToolUpdateRejected",
    "ToolbridgeError",
    "client_context",
    "connect_daemon",
    "connect_tcp",
    "default_home",
    "define_remote_tool",
    "define_tool",
    "derive_input_schema",
    "find_daemon",
    "image",
    "text",
    "qt_executor",
    "tk_executor",
]
