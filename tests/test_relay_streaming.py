"""The stdio relay passes a large response to the agent as it arrives (issue 33).

Two set-ups: a real daemon with an app answering large results and ``toolbridge stdio`` as a
subprocess (the bytes arrive exactly as the app wrote its content); and the relay in this
process against a scripted daemon on a real TCP socket, which sends the head of a large
response and then waits until the agent has read it (a relay that waits for the whole line
never gets there), or drops the link mid-line.
"""

from __future__ import annotations

import json
import os
import subprocess
from functools import partial
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
import trio.testing

from app_client.discovery import TOKEN_FILE
from broker.cli.relay_stream import STREAM_AFTER, DaemonReader, Piece
from broker.cli.stdio_relay import Relay
from app_client.channel import LineChannel
from app_client.protocol import RemoteProtocolError
from mcp_testkit import end_process, relay_command, relay_env
from test_large_results import big_daemon, content_json

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
#: A large result's content: over STREAM_AFTER, base64-like (no quotes, no escapes).
BIG_TEXT = "QUJD" * (STREAM_AFTER // 2)


def request(request_id: Any, method: str, params: dict[str, Any] | None = None) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}).encode() + b"\n"


def big_response(request_id: Any) -> bytes:
    """A large result line as the daemon writes it (its head first)."""
    return (b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b',"result":{"content":[{"type":"text","text":"'
            + BIG_TEXT.encode() + b'"}],"isError":false}}\n')


class RawLines:
    """Bytes off a stream, split at newlines by the test itself (not by the code under test)."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.buffer = bytearray()

    async def fill(self, size: int) -> None:
        """Until at least ``size`` bytes are buffered."""
        with trio.fail_after(20):
            while len(self.buffer) < size:
                data = await self.stream.receive_some(1 << 20)
                assert data, "the stream ended"
                self.buffer += data

    async def line(self) -> bytes:
        with trio.fail_after(20):
            while (end := self.buffer.find(b"\n")) < 0:
                data = await self.stream.receive_some(1 << 20)
                assert data, "the stream ended"
                self.buffer += data
        line = bytes(self.buffer[:end])
        del self.buffer[:end + 1]
        return line

    async def message(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(await self.line())
        return value


# --- a real daemon and a relay subprocess ----------------------------------------------------


@asynccontextmanager
async def relay_process(home: Path) -> AsyncIterator[tuple[trio.Process, RawLines]]:
    process = await trio.lowlevel.open_process(relay_command(home, "--no-start"), stdin=subprocess.PIPE,
                                               stdout=subprocess.PIPE, env={**os.environ, **relay_env()})
    try:
        assert process.stdout is not None and process.stdin is not None
        yield process, RawLines(process.stdout)
    finally:
        await end_process(process)


async def test_a_large_result_arrives_byte_exact_through_daemon_and_relay(tmp_path: Path) -> None:
    async with big_daemon(tmp_path, result_link_bytes=0) as (info, app, home), \
            relay_process(home) as (process, lines):
        assert process.stdin is not None
        await process.stdin.send_all(request(0, "initialize", INIT["params"]))
        assert (await lines.message())["id"] == 0
        for request_id, tool in enumerate(["image", "small", "mixed", "image"], start=1):
            await process.stdin.send_all(request(request_id, "tools/call", {"name": f"Big__{tool}", "arguments": {}}))
            line = await lines.line()
            assert b'"content":' + content_json(tool).encode() + b"," in line  # the app's bytes, unchanged
            message = json.loads(line)
            assert message["id"] == request_id and message["result"]["isError"] is False
        await process.stdin.aclose()
        assert await process.wait() == 0  # every answer counted as given: nothing owed


async def test_a_result_over_the_line_limit_still_fails_cleanly_through_the_relay(tmp_path: Path) -> None:
    async with big_daemon(tmp_path, max_line_bytes=1024 * 1024) as (info, app, home), \
            relay_process(home) as (process, lines):
        assert process.stdin is not None
        await process.stdin.send_all(request(0, "initialize", INIT["params"]))
        assert (await lines.message())["id"] == 0
        await process.stdin.send_all(request(1, "tools/call", {"name": "Big__image", "arguments": {}}))
        result = (await lines.message())["result"]
        assert result["isError"] is True and "line_too_long" in result["content"][0]["text"]
        await process.stdin.send_all(request(2, "tools/call", {"name": "Big__small", "arguments": {}}))
        assert (await lines.message())["result"]["content"] == [{"type": "text", "text": "small"}]


# --- the relay in this process against a scripted daemon --------------------------------------


class ScriptedDaemon:
    """A TCP listener that answers agentConnect and hands each connection to the test."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.opened: list[trio.SocketStream] = []
        self.send, self.connections = trio.open_memory_channel[tuple[trio.SocketStream, RawLines]](4)

    async def serve(self, nursery: trio.Nursery) -> None:
        listeners = await nursery.start(partial(trio.serve_tcp, self._handle, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / TOKEN_FILE).write_text("secret\n")
        (self.home / "runtime.json").write_text(json.dumps({"pid": os.getpid(), "host": "127.0.0.1", "port": port}))

    async def _handle(self, stream: trio.SocketStream) -> None:
        self.opened.append(stream)
        lines = RawLines(stream)
        assert json.loads(await lines.line())["type"] == "agentConnect"
        await stream.send_all(b'{"type":"agentConnected"}\n')
        await self.send.send((stream, lines))
        await trio.sleep_forever()  # the test owns the connection now


@asynccontextmanager
async def scripted_relay(tmp_path: Path) -> AsyncIterator[tuple[ScriptedDaemon, trio.abc.SendStream, RawLines,
                                                                trio.Event]]:
    """A Relay in this process: the agent's stdin (send) and stdout (lines), and an event set
    when ``Relay.run`` has returned."""
    daemon = ScriptedDaemon(tmp_path / "home")
    stdin_send, stdin_receive = trio.testing.memory_stream_one_way_pair()
    stdout_send, stdout_receive = trio.testing.memory_stream_one_way_pair()
    done = trio.Event()
    async with trio.open_nursery() as nursery:
        await daemon.serve(nursery)

        relay = Relay(daemon.home, auto_start=False)

        async def run() -> None:
            await relay.run(stdin_receive, stdout_send)
            done.set()

        nursery.start_soon(run)
        yield daemon, stdin_send, RawLines(stdout_receive), done
        nursery.cancel_scope.cancel()
    if relay._link is not None:  # (a relay process exits here: its socket goes with it)
        await trio.aclose_forcefully(relay._link.stream)
    for stream in daemon.opened:
        await trio.aclose_forcefully(stream)


async def _initialized(daemon: ScriptedDaemon, stdin: trio.abc.SendStream,
                       out: RawLines) -> tuple[trio.SocketStream, RawLines]:
    await stdin.send_all(request(0, "initialize", INIT["params"]))
    stream, lines = await daemon.connections.receive()
    assert json.loads(await lines.line())["method"] == "initialize"
    await stream.send_all(b'{"jsonrpc":"2.0","id":0,"result":{}}\n')
    assert (await out.message())["id"] == 0
    return stream, lines


async def _replayed(daemon: ScriptedDaemon) -> tuple[trio.SocketStream, RawLines]:
    """The relay's next connection, with the session's initialize replayed and answered."""
    stream, lines = await daemon.connections.receive()
    replay = json.loads(await lines.line())
    assert replay["method"] == "initialize"
    await stream.send_all(b'{"jsonrpc":"2.0","id":' + json.dumps(replay["id"]).encode() + b',"result":{}}\n')
    return stream, lines


#: How much of a large response the daemon has sent when a test acts mid-stream.
HEAD = STREAM_AFTER + 1000


async def _streaming(stdin: trio.abc.SendStream, stream: trio.SocketStream, lines: RawLines, out: RawLines) -> None:
    """The agent calls (id 1); the daemon sends the head of a large answer, which the agent
    already has while the rest of the line is still to come."""
    await stdin.send_all(request(1, "tools/call", {"name": "x"}))
    assert json.loads(await lines.line())["id"] == 1
    await stream.send_all(big_response(1)[:HEAD])
    await out.fill(HEAD)


async def test_a_large_response_reaches_the_agent_before_its_line_ends(tmp_path: Path) -> None:
    """Round 4's relay received the whole line first: the agent got nothing while the daemon
    waited for it to have read the head (the test timed out there)."""
    async with scripted_relay(tmp_path) as (daemon, stdin, out, done):
        stream, lines = await _initialized(daemon, stdin, out)
        await _streaming(stdin, stream, lines, out)  # the agent has the head; the daemon holds the rest
        response = big_response(1)
        assert bytes(out.buffer) == response[:HEAD]
        await stream.send_all(response[HEAD:])
        assert await out.line() + b"\n" == response  # byte-exact
        await stdin.send_all(request(2, "tools/call", {"name": "y"}))
        assert json.loads(await lines.line())["id"] == 2
        await stream.send_all(b'{"jsonrpc":"2.0","id":2,"result":{"content":[],"isError":false}}\n')
        assert (await out.message())["id"] == 2
        await stdin.aclose()
        with trio.fail_after(10):
            await done.wait()  # nothing owed: the streamed answer counted as given


async def test_a_daemon_lost_mid_response_leaves_the_agents_stream_well_formed(tmp_path: Path) -> None:
    """The partial line is ended (one line the agent cannot parse, never glued to the next
    message), the request gets its error, and the next request goes to a new connection."""
    async with scripted_relay(tmp_path) as (daemon, stdin, out, done):
        stream, lines = await _initialized(daemon, stdin, out)
        await _streaming(stdin, stream, lines, out)
        await stream.aclose()  # the daemon goes mid-line
        assert await out.line() == big_response(1)[:HEAD]
        error = await out.message()
        assert error["id"] == 1 and error["error"]["code"] == -32000
        assert "connection to the toolbridge daemon was lost" in error["error"]["message"]
        # The next request: a new connection, the session replayed, the call answered.
        await stdin.send_all(request(2, "tools/call", {"name": "y"}))
        stream2, lines2 = await _replayed(daemon)
        call = json.loads(await lines2.line())
        assert call["id"] == 2
        await stream2.send_all(big_response(2))
        assert await out.line() + b"\n" == big_response(2)


async def test_a_cancel_mid_stream_leaves_other_calls_unaffected(tmp_path: Path) -> None:
    """The agent cancels the call whose answer is streaming and makes another: the streamed
    line is finished whole, the other answer follows it, each line parses."""
    async with scripted_relay(tmp_path) as (daemon, stdin, out, done):
        stream, lines = await _initialized(daemon, stdin, out)
        await _streaming(stdin, stream, lines, out)
        await stdin.send_all(json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                         "params": {"requestId": 1}}).encode() + b"\n" + request(2, "ping"))
        assert json.loads(await lines.line())["method"] == "notifications/cancelled"
        assert json.loads(await lines.line())["id"] == 2
        await stream.send_all(big_response(1)[HEAD:] + b'{"jsonrpc":"2.0","id":2,"result":{}}\n')
        assert await out.line() + b"\n" == big_response(1)
        assert await out.message() == {"jsonrpc": "2.0", "id": 2, "result": {}}
        await stdin.aclose()
        with trio.fail_after(10):
            await done.wait()


# --- the reader alone ------------------------------------------------------------------------


async def test_the_reader_streams_only_results_and_bounds_whole_lines() -> None:
    """Only a result's head is streamed (not an error, a notification, the relay's own replayed
    initialize); any other line is collected whole, up to the limit."""
    left, right = trio.testing.memory_stream_pair()
    reader = DaemonReader(LineChannel(right), max_line_bytes=STREAM_AFTER * 2, stream_after=1024)
    error = b'{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"' + b"e" * 4000 + b'"}}\n'
    notification = b'{"jsonrpc":"2.0","method":"x","params":{"p":"' + b"n" * 4000 + b'"}}\n'
    own = b'{"jsonrpc":"2.0","id":"own","result":{"x":"' + b"o" * 4000 + b'"}}\n'
    too_long = b'{"jsonrpc":"2.0","method":"y","params":"' + b"z" * (STREAM_AFTER * 3) + b'"}\n'
    result = b'{"jsonrpc":"2.0","id":"r-1","result":{"x":"' + b"r" * 4000 + b'"}}\n'
    head = len(result) // 2  # the result's line arrives in two reads: streamed from the first
    await left.send_all(error + notification + own + too_long + b"\r\n" + result[:head])
    items: list[Any] = []
    with trio.fail_after(10):
        while not (items and isinstance(items[-1], Piece)):
            items += await reader.receive(streamable=lambda request_id: request_id != "own")
        await left.send_all(result[head:])
        while not items[-1].last:
            items += await reader.receive()
    assert items[:3] == [error[:-1], notification[:-1], own[:-1]]
    assert isinstance(items[3], RemoteProtocolError) and items[3].code == "line_too_long"
    pieces = items[4:]
    assert all(isinstance(p, Piece) and p.request_id == "r-1" for p in pieces)
    assert pieces[0].first and pieces[-1].last
    assert b"".join(p.data for p in pieces) == result
    assert not reader.streaming


async def test_a_list_lost_with_the_daemon_is_sent_again_on_the_next_connection(tmp_path: Path) -> None:
    """tools/list changes nothing, so the agent gets its answer, not an error, when the daemon
    restarts before answering; a tools/call lost at the same moment still gets its error (it
    may have run), and a list lost twice gets one too (repeated once at most)."""
    async with scripted_relay(tmp_path) as (daemon, stdin, out, done):
        stream, lines = await _initialized(daemon, stdin, out)
        await stdin.send_all(request(5, "tools/list") + request(6, "tools/call", {"name": "x"}))
        assert json.loads(await lines.line())["id"] == 5
        assert json.loads(await lines.line())["id"] == 6
        await stream.aclose()  # the daemon goes before answering either
        error = await out.message()
        assert error["id"] == 6 and "may or may not have run" in error["error"]["message"]
        stream2, lines2 = await _replayed(daemon)
        again = json.loads(await lines2.line())
        assert again == {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {}}
        await stream2.send_all(b'{"jsonrpc":"2.0","id":5,"result":{"tools":[]}}\n')
        assert await out.message() == {"jsonrpc": "2.0", "id": 5, "result": {"tools": []}}
        # Lost twice: the second time it fails like any other request.
        await stdin.send_all(request(7, "prompts/list"))
        assert json.loads(await lines2.line())["id"] == 7
        await stream2.aclose()
        stream3, lines3 = await _replayed(daemon)
        assert json.loads(await lines3.line())["id"] == 7
        await stream3.aclose()
        error = await out.message()
        assert error["id"] == 7 and "was lost before it answered prompts/list" in error["error"]["message"]
        await stdin.aclose()
        with trio.fail_after(10):
            await done.wait()  # nothing is owed any more
