"""Hostile input: oversized lines and bodies, JSON nested to blow the stack, path traversal in
tool arguments (end to end, through the MCP SDK).

Also covered elsewhere: ``test_protocol_raw.py::test_line_over_the_limit_fails_its_call_at_once``,
``test_mcp_http.py::test_a_huge_body_is_refused``, ``test_fuzz_*.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
import structlog
import trio
import trio.testing
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from app_client.wire import ToolSpec
from broker.daemon.run import DaemonInfo
from faultkit import MODERN_META, RawAgent
from mcp_testkit import HTTPX_STREAM_WARNINGS, ScriptedApp, http_client, mcp_url, running_daemon
from rawapp import ECHO_TOOL, RawApp

pytestmark = [pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS]

LIMIT = 64 * 1024


# --- oversized lines and bodies --------------------------------------------------------------------


async def test_an_endless_first_line_is_refused_without_buffering_it(tmp_path: Path) -> None:
    with structlog.testing.capture_logs() as logs:
        async with running_daemon(tmp_path / "home", http_port=None, max_line_bytes=LIMIT) as info:
            stream = await trio.open_tcp_stream("127.0.0.1", info.port)
            app = RawApp(stream)
            chunk = b'{"type": "register", "appName": "' + b"A" * (LIMIT // 4)
            try:
                for _ in range(64):  # never a newline: the daemon must not wait for one
                    await stream.send_all(chunk)
                    chunk = b"A" * (LIMIT // 4)
                    await trio.sleep(0.01)
            except trio.BrokenResourceError:
                pass  # refused and closed while we were still sending: as it should be
            else:
                raise AssertionError("the daemon kept reading an endless line")
            try:
                reply = await app.recv()
            except (trio.BrokenResourceError, EOFError):
                pass  # the reset may overtake the error line
            else:
                assert (reply["type"], reply["code"], reply["fatal"]) == ("error", "line_too_long", True)
            assert info.core.registry.instances() == []
            fresh = await RawApp.connect(info.port)
            assert (await fresh.register(info.token))["type"] == "registered"
            await fresh.aclose()
    [rejected] = [e for e in logs if e["event"] == "connection_rejected"]
    assert rejected["code"] == "line_too_long"


async def test_connections_waiting_to_register_are_bounded(tmp_path: Path) -> None:
    """Silent connections each may hold a line's worth of memory until register_timeout: cap them.

    A newcomer past the cap is not refused (that let idle connections lock real clients out):
    it evicts the oldest waiter that has sent nothing, so the cap holds and the newest gets in.
    """
    async with running_daemon(tmp_path / "home", http_port=None, max_unregistered_connections=2,
                              first_byte_timeout=60, register_timeout=60) as info:
        waiting = info.core._waiting
        oldest, partial = [await RawApp.connect(info.port) for _ in range(2)]
        line = json.dumps({"type": "register", "appName": "Partial", "token": info.token, "tools": [ECHO_TOOL]})
        await partial.send(line[:10].encode())  # has begun its line: no longer silent
        await _wait_for(lambda: len(waiting) == 2 and any(w.conn.bytes_received for w in waiting.values()))
        newcomer = await RawApp.connect(info.port)
        evicted = await oldest.recv()
        assert evicted["code"] == "too_many_connections" and evicted["fatal"] is True
        assert await oldest.closed()
        # Full again: the next one evicts the oldest *silent* waiter (newcomer), not partial.
        with trio.fail_after(10):  # the core pulses `changed` as waiters come and go
            await info.core.changed.wait_until(lambda: len(waiting) == 2)
        last = await RawApp.connect(info.port)
        assert (await newcomer.recv())["code"] == "too_many_connections"
        with trio.fail_after(10):  # the core pulses `changed` as waiters come and go
            await info.core.changed.wait_until(lambda: len(waiting) == 2)
        assert len(waiting) <= 2  # the cap held throughout: bounded memory
        # The survivors register; registered apps do not count against the cap.
        await partial.send(line[10:].encode() + b"\n")
        assert (await partial.recv())["type"] == "registered"
        assert (await last.register(info.token, app_name="Last"))["type"] == "registered"
        late = await RawApp.connect(info.port)
        assert (await late.register(info.token, app_name="Late"))["type"] == "registered"
        await RawApp.close_all()


async def _wait_for(condition: Any) -> None:
    """Let the daemon's tasks run until ``condition()`` holds (fails after 10 s).

    Kept as a loop for the one condition nothing signals: the bytes a waiting connection has
    read (the channel counts them on every read, where a pulse would cost every link)."""
    with trio.fail_after(10):
        while not condition():
            await trio.testing.wait_all_tasks_blocked()
            await trio.sleep(0)


async def test_an_oversized_line_on_an_agent_link_is_refused_and_the_link_goes_on(tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "home", http_port=None, max_line_bytes=LIMIT) as info, \
            trio.open_nursery() as nursery:
        agent = await RawAgent.connect(nursery, info.port, info.token)
        huge = {"jsonrpc": "2.0", "id": "big", "method": "tools/list", "params": {"pad": "x" * (2 * LIMIT)}}
        await agent.send(huge)
        listed = await agent.response(await agent.request("tools/list"))
        assert listed["result"]["tools"] == []
        [refusal] = [m for k, m in agent.responses.items() if k is None]
        assert refusal["error"]["code"] == -32600 and "limit" in refusal["error"]["message"]
        await agent.aclose()


async def test_a_chunked_http_body_over_the_limit_is_refused(tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "home", max_http_body_bytes=LIMIT) as info, \
            httpx2.AsyncClient(timeout=30) as http:

        async def body() -> Any:  # no Content-Length: the limit must hold while streaming
            yield b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"pad": "'
            for _ in range(8):
                yield b"x" * (LIMIT // 2)
            yield b'"}}'

        response = await http.post(mcp_url(info), content=body(), headers={
            "authorization": f"Bearer {info.token}", "accept": "application/json, text/event-stream",
            "content-type": "application/json"})
        assert response.status_code == 413


# --- nesting deep enough to blow a recursive decoder's stack ------------------------------------------


DEEP = b"[" * 50_000 + b"]" * 50_000


async def test_deeply_nested_json_is_a_clean_error_everywhere(tmp_path: Path) -> None:
    """Regression: a 1000-deep line raised RecursionError out of the decoder, and the first
    line of an unauthenticated connection took the whole daemon down with it."""
    async with running_daemon(tmp_path / "home") as info, trio.open_nursery() as nursery:
        # Unauthenticated, as the first line:
        stranger = await RawApp.connect(info.port)
        await stranger.send(DEEP + b"\n")
        reply = await stranger.recv()
        assert (reply["code"], reply["fatal"]) == ("invalid_json", True) and "nested too deeply" in reply["message"]
        assert await stranger.closed()
        # From a registered app, naming its call: the call fails at once, the link goes on.
        app = await RawApp.connect(info.port)
        await app.register(info.token)
        box: list[Any] = []
        ended = trio.Event()

        async def agent_call() -> None:
            box.append(await info.core.router.call_tool("WatchTower__Echo", {}))
            ended.set()

        nursery.start_soon(agent_call)
        invocation = await app.recv_type("toolInvocation")
        await app.send(b'{"type": "toolResponse", "correlationId": %d, "result": {"data": ' % invocation["correlationId"]
                       + DEEP + b"}}\n")
        assert (await app.recv_type("error"))["code"] == "invalid_json"
        with trio.fail_after(10):
            await ended.wait()
        assert box[0].kind == "app_error"
        # On an agent link, and over HTTP:
        agent = await RawAgent.connect(nursery, info.port, info.token)
        await agent.send(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": ' + DEEP + b"}\n")
        await agent.response(None, timeout=10)  # the refusal names no id
        assert agent.responses[None]["error"]["code"] == -32700
        assert (await agent.response(await agent.request("tools/list")))["result"]["tools"]
        async with httpx2.AsyncClient(timeout=30) as http:
            response = await http.post(mcp_url(info), content=DEEP, headers={
                "authorization": f"Bearer {info.token}", "accept": "application/json, text/event-stream",
                "content-type": "application/json"})
            assert response.status_code == 400 and response.json()["error"]["code"] == -32700
        await agent.aclose()
        await app.aclose()
        # The daemon is alive and well.
        fresh = await RawApp.connect(info.port)
        assert (await fresh.register(info.token, app_name="After"))["type"] == "registered"
        await fresh.aclose()


# --- path traversal in tool arguments, end to end ----------------------------------------------------

TRAVERSALS = [
    "../../etc/passwd", "..\\..\\windows\\win.ini", "docs/../../secret", "..", "a/..",
    "%2e%2e/%2e%2e/etc/passwd", "%2E%2E%2F", "..%2f..%2f", "%2e%2e%5c", "%252e%252e%252f",
    "%25252e%25252e%25252f",                        # percent-encoded three times
    "．．／．．／etc", "\u2025/etc", "\ufe52\ufe52/etc",   # Unicode forms that fold to ".."
    "..\u2215etc", "..\u29f5etc", "..\ufe68etc",    # slashes Windows' best-fit conversion makes real
    "%c0%ae%c0%ae/", "..%c0%af",                    # overlong UTF-8
    "safe/..\u0000.txt", "x/..\u0000",              # NUL: C APIs stop reading there
    # Regressions (issue 14): nine layers of encoding, IIS %u escapes, the 4-byte overlong form.
    "%25252525252525252e%25252525252525252e/x", "%u002e%u002e/", "%f0%80%80%ae%f0%80%80%ae/",
]
ALLOWED = ["/etc/hosts", "C:\\Users\\me\\notes.txt", "wait...", "1..10", "v1..v2", "....", "file:///tmp/x", "50% off"]


@pytest.fixture
async def guarded(tmp_path: Path) -> Any:
    tools = [ToolSpec("echo", "Echo", {"type": "object"})]
    async with running_daemon(tmp_path / "home") as info, trio.open_nursery() as nursery:
        app = await ScriptedApp(info.port, info.token, tools=tools).start(nursery)
        async with http_client(info) as http, \
                Client(streamable_http_client(mcp_url(info), http_client=http)) as client:
            yield info, app, client
        await app.close()


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_path_traversal_never_reaches_the_app(guarded: tuple[DaemonInfo, ScriptedApp, Client]) -> None:
    info, app, client = guarded
    for value in TRAVERSALS:
        for arguments in ({"path": value}, {"files": [{"name": "ok"}, {"name": value}]}, {"map": {value: 1}}):
            result = await client.call_tool("Demo__echo", arguments)
            assert result.is_error, (value, arguments)
            assert "path traversal" in text_of(result), value
    assert app.invocations == []
    for value in ALLOWED:
        result = await client.call_tool("Demo__echo", {"path": value})
        assert not result.is_error, value
    assert [i.parameters["path"] for i in app.invocations] == ALLOWED


#: About as deep as the daemon's JSON decoders go (they stop near Python's recursion limit).
DEEPEST_ARGUMENT = 900


async def test_a_traversal_nested_as_deep_as_json_allows_is_caught(tmp_path: Path) -> None:
    """Regression: the guard stopped looking 64 levels down, so a deeper '..' reached the app."""
    tools = [ToolSpec("echo", "Echo", {"type": "object"})]
    async with running_daemon(tmp_path / "home", http_port=None) as info, trio.open_nursery() as nursery:
        app = await ScriptedApp(info.port, info.token, tools=tools).start(nursery)
        agent = await RawAgent.connect(nursery, info.port, info.token)
        for number, leaf in enumerate(('"../../etc/passwd"', '{"../k": 1}')):
            opening = "".join("[" if level % 2 else '{"k": ' for level in reversed(range(DEEPEST_ARGUMENT)))
            closing = "".join("]" if level % 2 else "}" for level in range(DEEPEST_ARGUMENT))
            await agent.send(('{"jsonrpc": "2.0", "id": "deep%d", "method": "tools/call", "params": {"name": '
                              '"Demo__echo", "_meta": %s, "arguments": {"deep": %s%s%s}}}\n'
                              % (number, json.dumps(MODERN_META), opening, leaf, closing)).encode())
            response = await agent.response(f"deep{number}")
            assert "path traversal" in response["result"]["content"][0]["text"], str(response)[:300]
        assert app.invocations == []
        await agent.aclose()
        await app.close()
