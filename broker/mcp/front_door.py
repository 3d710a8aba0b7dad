"""The MCP front door: wires the MCP sessions into the daemon (stdio relay links and HTTP).

Theory of operation
-------------------
:func:`install` is called once by ``run_daemon`` (``broker.daemon.run``, which imports this
module; this module never imports it back: the port helpers ``http`` needs are in
``broker.config.net``). It builds the :class:`McpServer` every session shares and returns two
things, patching nothing: the agent handler, which ``run_daemon`` gives the core
(``BrokerCore.attach``) so that ``agentConnect`` connections (from the ``toolbridge stdio``
relay, a client program in ``broker.cli.stdio_relay``) go to :func:`serve_agent`, and the
Streamable HTTP server function for the daemon to start with
``nursery.start(http_server, core, host, port)``.

An agent link carries raw MCP JSON-RPC, one message per line, both ways, for one agent
(in discovery mode when its ``agentConnect`` says ``discovery: true``): its session lives
exactly as long as the connection, and when the connection ends every request
still in flight is cancelled (the apps are told). Lines go through the connection's single
writer; a line that is not valid JSON-RPC gets the JSON-RPC error it deserves and nothing
else changes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog
import trio

from app_client.errors import RemoteProtocolError
from app_client.wire import AgentConnect, AgentConnected

from ..daemon.connection import Connection, PeerClosed
from ..daemon.broker_core import AgentHandler, BrokerCore
from . import jsonrpc
from .http import serve_http
from .session import McpServer, open_session

log = structlog.get_logger("toolbridge.mcp")

__all__ = ["install", "serve_agent", "ConnectionOutbox"]


class ConnectionOutbox:
    """Messages for a stdio-relay agent: NDJSON lines through the connection's writer."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    async def send(self, data: bytes, *, final: bool = False) -> None:
        try:
            await self._conn.send_bytes(data + b"\n")
        except PeerClosed:
            pass

    def send_nowait(self, data: bytes) -> bool:
        return self._conn.send_bytes_nowait(data + b"\n")

    def send_final_nowait(self, data: bytes) -> bool:
        # Held beside a full queue rather than waited for: the number is bounded by the calls
        # in flight. False only past that bound; the session then waits for room.
        return self._conn.send_bytes_reliable_nowait(data + b"\n") or self._conn.closed_reason is not None

    def close(self) -> None:
        pass


async def serve_agent(server: McpServer, conn: Connection, hello: AgentConnect) -> None:
    """Serve one ``toolbridge stdio`` relay connection until it closes."""
    await conn.send(AgentConnected())
    outbox = ConnectionOutbox(conn)
    label = server.next_label("stdio")
    log.info("agent_connected", conn_id=conn.id, session=label, discovery=hello.discovery, code=hello.code)
    async with open_session(
        server, transport="stdio", label=label, notify=outbox, reinitialize=True, discovery=hello.discovery,
        code=hello.code,
    ) as session:
        while True:
            try:
                line = await conn.receive_line()
            except PeerClosed:
                break
            except RemoteProtocolError as exc:  # a line over the size limit (already discarded)
                error = jsonrpc.RpcError(jsonrpc.INVALID_REQUEST, f"Invalid Request: {exc.message}")
                await outbox.send(error.encode())
                continue
            try:
                message = jsonrpc.parse_message(line)
            except jsonrpc.RpcError as exc:
                await outbox.send(exc.encode())
                continue
            await session.handle(message, outbox)
    log.info("agent_disconnected", conn_id=conn.id, session=label)


#: The MCP Streamable HTTP server :func:`install` returns: ``nursery.start(server, core, host,
#: port)`` reports the bound port, or raises StartupError (port taken).
HttpServer = Callable[..., Awaitable[None]]


def install(core: BrokerCore) -> tuple[AgentHandler, HttpServer]:
    """Build the MCP front door on ``core``: return its agent handler (for
    ``BrokerCore.attach``) and its HTTP server (for ``run_daemon`` to start)."""
    server = McpServer(core)

    async def agent_handler(core: BrokerCore, conn: Connection, hello: AgentConnect) -> None:
        await serve_agent(server, conn, hello)

    async def http_server(
        core: BrokerCore, host: str, port: int, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
    ) -> None:
        await serve_http(server, host, port, task_status=task_status)

    return agent_handler, http_server
