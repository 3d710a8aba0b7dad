"""Handshake-era HTTP sessions and their GET streams: the table's limits (``broker.mcp.http_sessions``).

Raw HTTP/1.1 over real sockets against the real daemon: each client is one connection that
initializes a session and then keeps its GET stream open, as an idle MCP client does.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from broker.config import tokens
from broker.daemon.run import DaemonInfo
from broker.mcp.http_sessions import MAX_SESSIONS, MAX_STREAMS_PER_TOKEN
from mcp_testkit import running_daemon

INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}).encode()


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[DaemonInfo]:
    async with running_daemon(tmp_path / "home") as info:
        yield info


class StreamingClient:
    """One connection: ``initialize``, then a GET stream kept open (read only when asked)."""

    def __init__(self, stream: trio.SocketStream, token: str) -> None:
        self.stream = stream
        self.token = token
        self.buffer = b""
        self.session_id = ""

    @classmethod
    async def open(cls, info: DaemonInfo, token: str) -> StreamingClient:
        client = cls(await trio.open_tcp_stream("127.0.0.1", info.http_port), token)
        try:
            status, headers, body = await client.post(INITIALIZE)
            assert status == 200, body
            client.session_id = headers["mcp-session-id"]
            status = await client.get()
            assert status == 200
        except BaseException:
            await client.aclose()
            raise
        return client

    async def post(self, body: bytes) -> tuple[int, dict[str, str], bytes]:
        await self.stream.send_all(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\n"
            + f"Authorization: Bearer {self.token}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        status, headers = await self._head()
        size = int(headers["content-length"])
        while len(self.buffer) < size:
            await self._fill()
        answer, self.buffer = self.buffer[:size], self.buffer[size:]
        return status, headers, answer

    async def get(self) -> int:
        """Open the session's GET stream; its status (its body stays unread)."""
        await self.stream.send_all(
            b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
            + f"Authorization: Bearer {self.token}\r\nMcp-Session-Id: {self.session_id}\r\n\r\n".encode())
        return (await self._head())[0]

    async def _head(self) -> tuple[int, dict[str, str]]:
        while b"\r\n\r\n" not in self.buffer:
            await self._fill()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {n.strip().lower(): v.strip() for n, _, v in (line.partition(":") for line in lines)}
        return int(status_line.split()[1]), headers

    async def _fill(self) -> None:
        data = await self.stream.receive_some(65536)
        if not data:
            raise EOFError(self.buffer)
        self.buffer += data

    async def stream_ended(self) -> bool:
        """Read the stream until the server ends it (the last chunk, or the connection closed)."""
        while not self.buffer.endswith(b"0\r\n\r\n"):
            try:
                await self._fill()
            except EOFError:
                break
        return True

    async def aclose(self) -> None:
        await trio.aclose_forcefully(self.stream)

    async def ping(self, info: DaemonInfo) -> tuple[int, bytes]:
        """A request in this session, on a connection of its own (the stream holds this one)."""
        other = StreamingClient(await trio.open_tcp_stream("127.0.0.1", info.http_port), self.token)
        try:
            other.session_id = self.session_id
            body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}).encode()
            await other.stream.send_all(
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2025-11-25\r\n"
                + f"Mcp-Session-Id: {self.session_id}\r\n".encode()
                + f"Authorization: Bearer {self.token}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
            status, headers = await other._head()
            size = int(headers.get("content-length", "0"))
            while len(other.buffer) < size:
                await other._fill()
            return status, other.buffer[:size]
        finally:
            await other.aclose()


async def test_open_get_streams_no_longer_lock_new_sessions_out(daemon: DaemonInfo) -> None:
    """Regression (issue 27, item 14): only sessions without a GET stream could be evicted, so
    256 open streams (idle clients, or one client) got every new legacy session a 503 for as
    long as they stayed open. Now the idle session heard from least recently goes, stream and
    all; the others stay."""
    clients: list[StreamingClient] = []
    try:
        # Across tokens, so no token reaches its own share of streams.
        secrets = [daemon.token] + [tokens.issue(daemon.core.settings.home, f"agent{i}", ["agent"])
                                    for i in range(MAX_SESSIONS // MAX_STREAMS_PER_TOKEN)]
        for i in range(MAX_SESSIONS):
            clients.append(await StreamingClient.open(daemon, secrets[i % len(secrets)]))
        newcomer = await StreamingClient.open(daemon, secrets[-1])  # a 503 before
        clients.append(newcomer)
        with trio.fail_after(10):
            assert await clients[0].stream_ended()  # the one heard from least recently
        status, body = await clients[1].ping(daemon)  # the others stay
        assert status == 200 and json.loads(body)["result"] == {}, body
    finally:
        for client in clients:
            await client.aclose()


async def test_one_token_holds_at_most_its_share_of_get_streams(daemon: DaemonInfo) -> None:
    """One token's next stream past its share ends that token's least recently heard one;
    another token's streams are untouched."""
    home = daemon.core.settings.home
    greedy, other = tokens.issue(home, "greedy", ["agent"]), tokens.issue(home, "other", ["agent"])
    clients: list[StreamingClient] = []
    try:
        bystander = await StreamingClient.open(daemon, other)
        clients.append(bystander)
        for _ in range(MAX_STREAMS_PER_TOKEN + 1):
            clients.append(await StreamingClient.open(daemon, greedy))
        with trio.fail_after(10):
            assert await clients[1].stream_ended()  # greedy's first
        status, body = await bystander.ping(daemon)
        assert status == 200 and json.loads(body)["result"] == {}, body
    finally:
        for client in clients:
            await client.aclose()
