"""The MCP front door: wires the MCP sessions into the daemon (stdio relay links and HTTP).

Theory of operation
-------------------
:func:`install` is called once by ``run_daemon`` (``broker.daemon.run``, which imports this
module; this package never imports ``broker.daemon``: the port helpers ``http`` needs are in
``broker.config.net``, and the connection is typed by the :class:`AgentConnection` protocol).
It takes the :class:`McpServer` every session shares (built by ``run_daemon`` from the core's
parts) and returns two things, patching nothing: the agent handler, which ``run_daemon`` gives
the core (``BrokerCore.attach``) so that ``agentConnect`` connections (from the ``toolbridge
stdio`` relay, a client program in ``broker.cli.stdio_relay``) go to :func:`serve_agent`, and
the Streamable HTTP server function for the daemon to start with
``nursery.start(http_server, host, port)``, and the admin handlers it serves: ``agents``
(the open sessions, for ``toolbridge status``), for the core's ``attach``.

An agent link carries raw MCP JSON-RPC, one message per line, both ways, for one agent
(in discovery mode when its ``agentConnect`` says ``discovery: true``; in the one-app scope of
a label when it says ``app``, see ``scope``: a name that cannot be a label, or ``app`` with
``discovery``, is refused with a fatal ``invalid_agent_connect`` error): its session lives
exactly as long as the connection, and when the connection ends every request
still in flight is cancelled (the apps are told). Lines go through the connection's single
writer; a line that is not valid JSON-RPC gets the JSON-RPC error it deserves and nothing
else changes.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import msgspec
import structlog
import trio

from app_client.channel import SplitLine, write_through
from app_client.protocol import (
    AdminRequest, AgentConnect, AgentConnected, ConnectionClosed, Error, Message, RemoteProtocolError,
)

from . import jsonrpc
from ..core.passthrough import PayloadBudget
from ..version import CLI_CLIENT_NAME
from .http import serve_http
from .scope import check_app_name
from .server import McpServer
from .session import open_session

log = structlog.get_logger("toolbridge.mcp")

__all__ = ["AGENTS_COMMAND", "install", "serve_agent", "AgentConnection", "AgentHandler", "ConnectionOutbox"]

#: The admin command that lists the agents' open sessions (``toolbridge status``).
AGENTS_COMMAND = "agents"


async def _agents(server: McpServer) -> list[dict[str, Any]]:
    """Each stateful MCP session open now: stdio relays and handshake-era HTTP sessions."""
    await trio.lowlevel.checkpoint()
    return sorted(
        ({"session": s.label, "transport": s.transport, "client": s.client_name, "clientVersion": s.client_version,
          "protocolVersion": s.protocol_version, "discovery": s.discovery, "code": s.code, "app": s.app}
         for s in server.open_sessions),
        key=lambda row: str(row["session"]),
    )


class AgentConnection(Protocol):
    """What an agent link needs of the daemon's connection (``broker.daemon.connection.Connection``:
    an ``app_client.channel.LineChannel`` plus wire messages and an id); structural, so this
    package never imports the daemon."""

    @property
    def id(self) -> int: ...

    @property
    def closed_reason(self) -> str | None: ...

    async def send(self, message: Message) -> None: ...

    async def receive_line(self) -> bytes: ...

    @property
    def read_drained(self) -> bool: ...

    async def send_bytes(self, data: bytes) -> None: ...

    def send_bytes_nowait(self, data: bytes) -> bool: ...

    def send_bytes_reliable_nowait(self, data: bytes | SplitLine) -> bool: ...


#: Serves one ``agentConnect`` connection (its hello already read) until it closes.
AgentHandler = Callable[[AgentConnection, AgentConnect], Awaitable[None]]


class ConnectionOutbox:
    """Messages for a stdio-relay agent: NDJSON lines through the connection's writer."""

    def __init__(self, conn: AgentConnection, payloads: PayloadBudget | None = None) -> None:
        self._conn = conn
        #: Counts large responses until written (app links pause while too much waits).
        self._payloads = payloads

    async def send(self, data: bytes, *, final: bool = False) -> None:
        try:
            await self._conn.send_bytes(data + b"\n")
        except ConnectionClosed:
            pass

    def send_nowait(self, data: bytes) -> bool:
        return self._conn.send_bytes_nowait(data + b"\n")

    def send_final_nowait(self, data: bytes) -> bool:
        # Held beside a full queue rather than waited for: the number is bounded by the calls
        # in flight. False only past that bound; the session then waits for room.
        return self._conn.send_bytes_reliable_nowait(data + b"\n") or self._conn.closed_reason is not None

    def send_final_parts_nowait(self, parts: list[bytes | msgspec.Raw]) -> bool:
        """:meth:`send_final_nowait` of a response in parts (its last ends with the newline),
        written in order without joining them (``bigresults``: a large result's content)."""
        line = SplitLine(part if isinstance(part, bytes) else memoryview(part) for part in parts)
        if self._payloads is not None:
            self._payloads.track(line, line.nbytes)
        return self._conn.send_bytes_reliable_nowait(line) or self._conn.closed_reason is not None

    def close(self) -> None:
        pass


async def serve_agent(server: McpServer, conn: AgentConnection, hello: AgentConnect) -> None:
    """Serve one ``toolbridge stdio`` relay connection until it closes."""
    if hello.app is not None:
        problem = check_app_name(hello.app)
        if problem is None and (hello.discovery or hello.code):
            mode = "discovery" if hello.discovery else "code"
            problem = (f"{mode} mode and a one-app scope cannot be combined: an app's scope already "
                       f"lists only its tools (drop --{mode} or --app)")
        if problem is not None:
            log.warning("agent_rejected", conn_id=conn.id, reason="app")
            await conn.send(Error("invalid_agent_connect", f"agentConnect: {problem}", fatal=True))
            return
    await conn.send(AgentConnected())
    # Whose large-result links this agent may read (bigresults): its token's name.
    grant = server.auth.check(hello.token)
    outbox = ConnectionOutbox(conn, server.router.payloads)
    label = server.next_label("stdio")
    # At debug: the session's mcp_initialized line says who it is (and is quiet for the CLI's).
    log.debug("agent_connected", conn_id=conn.id, session=label, discovery=hello.discovery, code=hello.code,
              app=hello.app)
    async with open_session(
        server, transport="stdio", label=label, notify=outbox, reinitialize=True, discovery=hello.discovery,
        code=hello.code, app=hello.app, token=grant.name if grant is not None else None,
    ) as session:
        while True:
            try:
                line = await conn.receive_line()
            except ConnectionClosed:
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
            # The read's last request (an agent at concurrency 1): its invocation goes to the
            # app in this step (app_client.channel.write_through). Not entered for the others
            # (three calls a message saved where a read brings many).
            if conn.read_drained:
                with write_through():
                    await session.handle(message, outbox)
            else:
                await session.handle(message, outbox)
    level = logging.DEBUG if session.client_name == CLI_CLIENT_NAME else logging.INFO
    log.log(level, "agent_disconnected", conn_id=conn.id, session=label)


#: The MCP Streamable HTTP server :func:`install` returns: ``nursery.start(server, host, port)``
#: reports the bound port, or raises StartupError (port taken).
HttpServer = Callable[..., Awaitable[None]]


#: An admin command's handler, as the daemon calls it: ``(core, request) -> result``.
AdminHandler = Callable[[Any, AdminRequest], Awaitable[Any]]


def install(server: McpServer) -> tuple[AgentHandler, HttpServer, dict[str, AdminHandler]]:
    """Build the MCP front door on ``server``: return its agent handler (for
    ``BrokerCore.attach``), its HTTP server (for ``run_daemon`` to start) and the admin
    commands it serves (``agents``; also for ``BrokerCore.attach``)."""

    def agent_handler(conn: AgentConnection, hello: AgentConnect) -> Awaitable[None]:
        # The coroutine itself, not awaited in a wrapper: a frame fewer for every step of the
        # agent's reader to resume (one a message).
        return serve_agent(server, conn, hello)

    async def http_server(
        host: str, port: int, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
    ) -> None:
        await serve_http(server, host, port, task_status=task_status)

    async def agents(core: Any, request: AdminRequest) -> list[dict[str, Any]]:
        return await _agents(server)

    return agent_handler, http_server, {AGENTS_COMMAND: agents}
