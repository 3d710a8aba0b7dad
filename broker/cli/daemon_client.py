"""How toolbridge's own commands reach the running daemon (status, tools, call, codegen).

They use the app port (or the daemon's Unix socket, preferred when ``runtime.json`` names one:
see ``app_client.transport``) with a different first message (protocol.md section 8): ``admin`` for one
question and one answer, ``agentConnect`` for an MCP JSON-RPC stream (:func:`agent_connect` is
the one copy of that handshake; ``toolbridge stdio`` uses it too). The sans-IO
:class:`app_client.protocol.AgentLinkClient` makes the request line and judges the reply; this
module does the I/O and the wording. Every step has a deadline, so no command hangs when the
daemon is down or stuck; failures raise :class:`DaemonUnavailable` with a one-line hint.

The CLI's constants are here, once: :data:`CONNECT_TIMEOUT` (5 s, for opening the stream and
for the agentConnect handshake) and :data:`DAEMON_LINE_LIMIT` (64 MiB, the longest line
accepted from the daemon, by the CLI and the stdio relay alike: a ``tools/list`` of many big
schemas, or a big tool result, is one line).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import trio

from app_client.channel import LineChannel
from app_client.discovery import DaemonAddress, find_daemon
from app_client.errors import DaemonNotFound
from app_client.protocol import AdminResponse, AgentLinkClient, ConnectionClosed, Rejected, RemoteProtocolError, Unexpected
from app_client.transport import connect_daemon

from ..errors import BrokerError
from ..version import CLI_CLIENT_NAME, VERSION

#: Seconds for opening the stream to the daemon, and for the agentConnect handshake.
CONNECT_TIMEOUT: Final = 5.0
#: The longest line accepted from the daemon (the CLI and the stdio relay).
DAEMON_LINE_LIMIT: Final = 64 * 1024 * 1024


class DaemonUnavailable(BrokerError):
    """The daemon is not running, refused us, or did not answer in time."""


class LineStream:
    """A trio stream read and written one JSON line at a time (reads through a LineChannel)."""

    def __init__(self, stream: trio.abc.Stream, max_line_bytes: int = DAEMON_LINE_LIMIT) -> None:
        self.stream = stream
        self.channel = LineChannel(stream, max_line_bytes=max_line_bytes)

    async def send_line(self, data: bytes) -> None:
        await self.stream.send_all(data if data.endswith(b"\n") else data + b"\n")

    async def receive_line(self) -> bytes | None:
        """The next line, or None at end of stream (RemoteProtocolError for a line over the limit)."""
        try:
            return await self.channel.receive_line()
        except ConnectionClosed:
            return None

    async def aclose(self) -> None:
        await trio.aclose_forcefully(self.stream)


def locate(home: Path) -> DaemonAddress:
    try:
        return find_daemon(home=home)
    except DaemonNotFound as exc:
        raise DaemonUnavailable(str(exc)) from None


async def open_line_stream(address: DaemonAddress) -> LineStream:
    try:
        with trio.fail_after(CONNECT_TIMEOUT):
            # The Unix socket when runtime.json names one, else TCP (TLS when asked for).
            stream = await connect_daemon(address)
    except (OSError, trio.TooSlowError):
        where = f" (from {address.runtime_file})" if address.runtime_file else ""
        raise DaemonUnavailable(
            f"the toolbridge daemon is not answering on {address.host}:{address.port}{where}; "
            "start it with `toolbridge serve`"
        ) from None
    return LineStream(stream)


async def admin_request(home: Path, command: str, args: dict[str, Any] | None = None, timeout: float = 10) -> Any:
    """Ask the daemon one admin question; return its result. Raises DaemonUnavailable."""
    address = locate(home)
    link = await open_line_stream(address)
    protocol = AgentLinkClient()
    try:
        with trio.move_on_after(timeout):
            await link.send_line(protocol.admin(address.token, command, args))
            line = await link.receive_line()
            if line is None:
                raise DaemonUnavailable("the daemon closed the connection without answering")
            try:
                answer = protocol.receive_line(line)
            except RemoteProtocolError as exc:
                raise DaemonUnavailable(f"the daemon sent something unexpected: {exc.message}") from None
            if isinstance(answer, Rejected):
                raise DaemonUnavailable(f"the daemon refused: {answer.error.message}")
            if not isinstance(answer, AdminResponse):
                raise DaemonUnavailable("the daemon sent something unexpected")
            if not answer.ok:
                raise DaemonUnavailable(answer.error or f"{command} failed")
            return answer.result
        raise DaemonUnavailable(f"the daemon did not answer {command!r} within {timeout:g} s")
    finally:
        await link.aclose()


async def open_agent_stream(address: DaemonAddress, *, discovery: bool = False) -> LineStream:
    """Connect as an agent: afterwards the stream carries MCP JSON-RPC lines."""
    link = await open_line_stream(address)
    try:
        await agent_connect(link.channel, address.token, discovery=discovery)
        return link
    except BaseException:
        await link.aclose()
        raise


async def agent_connect(
    channel: LineChannel, token: str, *, discovery: bool = False, timeout: float = CONNECT_TIMEOUT,
    code: bool = False,
    app: str | None = None,
) -> None:
    """The agentConnect handshake on an open channel (the only copy: the CLI and the stdio relay).

    Sends ``agentConnect`` with ``token``, reads one line and checks it is ``agentConnected``;
    anything else raises :class:`DaemonUnavailable` saying why. Whatever the daemon sent after
    that line stays buffered in ``channel`` for its owner's reads. The caller closes the
    stream on failure.
    """
    protocol = AgentLinkClient()
    try:
        with trio.fail_after(timeout):
            await channel.send_direct(protocol.connect(token, discovery=discovery, code=code, app=app))
            line = await channel.receive_line()
    except trio.TooSlowError:
        raise DaemonUnavailable("the toolbridge daemon did not answer the connection in time") from None
    except ConnectionClosed as exc:
        if exc.__cause__ is None:  # a clean end of stream
            raise DaemonUnavailable("the toolbridge daemon closed the connection at once") from None
        raise DaemonUnavailable(f"the toolbridge daemon dropped the connection: {exc.__cause__}") from None
    except OSError as exc:  # a stream that reports OS errors as they are (not as BrokenResourceError)
        raise DaemonUnavailable(f"the toolbridge daemon dropped the connection: {exc}") from None
    except RemoteProtocolError as exc:  # a reply over the line limit: it would have crashed the relay
        raise DaemonUnavailable(f"the toolbridge daemon sent an unexpected reply ({exc.message})") from None
    check_agent_reply(protocol, line)


def check_agent_reply(protocol: AgentLinkClient, line: bytes) -> None:
    """Have ``protocol`` judge the daemon's answer to ``agentConnect``; raise DaemonUnavailable saying why not."""
    try:
        reply = protocol.receive_line(line)
    except RemoteProtocolError as exc:
        raise DaemonUnavailable(f"the toolbridge daemon sent an unexpected reply ({exc.message})") from None
    if isinstance(reply, Rejected):
        raise DaemonUnavailable(f"the toolbridge daemon refused the connection: {reply.error.message}")
    if isinstance(reply, Unexpected):
        raise DaemonUnavailable(f"the toolbridge daemon sent an unexpected {type(reply.message).__name__}")


class McpLineClient:
    """A minimal MCP client over an agent stream (handshake era), for the CLI."""

    def __init__(self, link: LineStream) -> None:
        self.link = link
        self._next_id = 0

    async def request(
        self, method: str, params: dict[str, Any] | None = None, on_notification: Any = None
    ) -> dict[str, Any]:
        """Send a request; return its JSON-RPC response object (result or error)."""
        self._next_id += 1
        request_id = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.link.send_line(json.dumps(message).encode())
        while True:
            line = await self.link.receive_line()
            if line is None:
                raise DaemonUnavailable("the daemon closed the connection during the request")
            reply = json.loads(line)
            if reply.get("id") == request_id and "method" not in reply:
                return dict(reply)
            if on_notification is not None and "method" in reply and "id" not in reply:
                on_notification(reply)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.link.send_line(json.dumps(message).encode())

    async def initialize(self, client_name: str = CLI_CLIENT_NAME) -> dict[str, Any]:
        reply = await self.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": client_name, "version": VERSION},
            },
        )
        if "error" in reply:
            raise DaemonUnavailable(f"the daemon refused to initialize: {reply['error'].get('message')}")
        await self.notify("notifications/initialized")
        return dict(reply["result"])
