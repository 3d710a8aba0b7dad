"""Large tool results (issues 17 and 18): raw passthrough of the content, and results as links.

A real daemon, an app over a raw socket that writes its answers as literal lines (so the exact
bytes are known), and as agents a raw ``agentConnect`` link (to see the daemon's exact bytes)
and the MCP SDK over stdio and HTTP in both eras.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import msgspec
import pytest
import trio
import trio.testing
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from app_client.protocol import Error, LineFramer, ToolInvocation, ToolSpec
from broker.config import tokens
from app_client.protocol import ToolResult
from broker.core.calllog import CALL_LOG_FILE, make_redacted_row, make_row
from broker.core.outcome import CallOutcome, OutcomeKind
from app_client.channel import SplitLine
from broker.core.passthrough import PassthroughResult, PayloadBudget, decode_tool_response
from broker.core.result_store import INLINE_KEY, LINK_KEY, ResultStore, is_result_uri
from broker.daemon.run import DaemonInfo
from broker.mcp.bigresults import response_parts
from mcp_testkit import HTTPX_STREAM_WARNINGS, ScriptedApp, connect_agent, http_client, mcp_url, running_daemon

pytestmark = [pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS]

OBJECT = {"type": "object"}
TOOLS = [ToolSpec(name, name, OBJECT) for name in ("image", "text", "struct", "fail", "mixed", "small", "bad")]
#: 1.5 MiB of bytes: over the default link threshold and the framer's hand-over size.
PAYLOAD = bytes(range(256)) * (6 * 1024)
PAYLOAD_B64 = base64.b64encode(PAYLOAD).decode()
#: A text with what a re-encoder would change: spacing, an escaped slash, \u escapes.
ODD_TEXT_JSON = '"caf\\u00e9 \\/ \\ud83d\\ude00 ' + "x" * (1024 * 1024) + '"'


def content_json(tool: str) -> str:
    """The literal ``content`` JSON the app sends for ``tool`` (odd spacing on purpose)."""
    if tool == "image":
        return '[ {"type": "image",  "mimeType":"image/png", "data":"' + PAYLOAD_B64 + '"} ]'
    if tool in ("text", "fail"):
        return '[{"type":"text" ,"text":' + ODD_TEXT_JSON + '}]'
    if tool == "struct":
        return '[{"type":"text","text":"' + "s" * (300 * 1024) + '"}]'
    if tool == "mixed":
        return ('[{"type":"text","text":"' + "t" * (600 * 1024) + '"},'
                '{"type":"resource_link","uri":"file:///tmp/x.png","name":"x"},'
                '{"type":"image","mimeType":"image/png","data":"' + PAYLOAD_B64[: 800 * 1024] + '"}]')
    if tool == "bad":  # an image block without its mimeType
        return '[{"type":"text","text":"ok"},{"type":"image","data":"' + PAYLOAD_B64 + '"}]'
    return '[{"type":"text","text":"small"}]'


class BigApp(ScriptedApp):
    """Answers each tool with a literal toolResponse line (see ``content_json``)."""

    def __init__(self, port: int, token: str) -> None:
        super().__init__(port, token, "Big", tools=TOOLS)
        self.errors: list[Any] = []

    async def _handle(self, message: Any) -> bool:
        self.errors.append(message)  # the daemon's error replies (a line over its limit)
        return isinstance(message, Error)

    async def _answer(self, call: ToolInvocation) -> None:
        tool = call.tool
        extra = ""
        if tool == "struct":
            extra = ',"structuredContent":{"rows": [1, 2, 3], "name": "caf\\u00e9"}'
        if tool == "fail":
            extra = ',"success":false,"error":"it broke"'
        line = ('{"type":"toolResponse","correlationId":' + str(call.correlation_id)
                + ',"result":{"content":' + content_json(tool) + extra + '}}\n')
        assert self._stream is not None
        async with self._send_lock:
            await self._stream.send_all(line.encode())


@asynccontextmanager
async def big_daemon(tmp_path: Path, **settings: Any) -> AsyncIterator[tuple[DaemonInfo, BigApp, Path]]:
    home = tmp_path / "home"
    async with running_daemon(home, **settings) as info, trio.open_nursery() as nursery:
        app = await BigApp(info.port, info.token).start(nursery)
        yield info, app, home
        await app.close()


class RawAgent:
    """An ``agentConnect`` link read as raw lines (the daemon's exact bytes)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.framer = LineFramer(64 * 1024 * 1024)
        self.ids = 0

    @classmethod
    async def connect(cls, info: DaemonInfo, token: str, app: str | None = None) -> RawAgent:
        agent = cls(await trio.open_tcp_stream("127.0.0.1", info.port))
        hello: dict[str, Any] = {"type": "agentConnect", "token": token}
        if app is not None:
            hello["app"] = app
        await agent.stream.send_all(json.dumps(hello).encode() + b"\n")
        assert json.loads(await agent.line())["type"] == "agentConnected"
        await agent.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                           "clientInfo": {"name": "raw", "version": "1"}})
        return agent

    async def line(self) -> bytes:
        with trio.fail_after(20):
            while (line := self.framer.next_line()) is None:
                data = await self.stream.receive_some(1 << 20)
                assert data, "the daemon closed the link"
                self.framer.receive_data(data)
        return line

    async def request(self, method: str, params: dict[str, Any]) -> bytes:
        """The response line (raw) to one request."""
        self.ids += 1
        await self.stream.send_all(json.dumps({"jsonrpc": "2.0", "id": self.ids, "method": method,
                                               "params": params}).encode() + b"\n")
        while True:
            line = await self.line()
            if b'"id":' + str(self.ids).encode() in line[:64]:
                return line


# --- issue 18: raw passthrough ----------------------------------------------------------------


@pytest.mark.parametrize("tool", ["image", "text", "struct"])
async def test_passthrough_keeps_the_apps_content_bytes(tmp_path: Path, tool: str) -> None:
    """The agent's line holds the app's content bytes unchanged (a re-encoder would change the
    spacing, the escapes, the key order) and structuredContent as a value."""
    async with big_daemon(tmp_path, result_link_bytes=0) as (info, app, home):
        agent = await RawAgent.connect(info, info.token)
        line = await agent.request("tools/call", {"name": f"Big__{tool}", "arguments": {}})
        expected = b'"content":' + content_json(tool).encode() + b","
        assert expected in line
        result = json.loads(line)["result"]
        assert result["isError"] is False
        assert result["content"] == json.loads(content_json(tool))
        if tool == "struct":
            assert result["structuredContent"] == {"rows": [1, 2, 3], "name": "café"}
        await agent.stream.aclose()


async def test_passthrough_failure_and_bad_blocks(tmp_path: Path) -> None:
    """A large failed result keeps its blocks after the error text; values are unchanged."""
    async with big_daemon(tmp_path, result_link_bytes=0) as (info, app, home):
        agent = await RawAgent.connect(info, info.token)
        result = json.loads(await agent.request("tools/call", {"name": "Big__fail", "arguments": {}}))["result"]
        assert result["isError"] is True
        assert result["content"][0] == {"type": "text", "text": "it broke"}
        assert result["content"][1:] == json.loads(content_json("fail"))
        await agent.stream.aclose()


async def test_passthrough_refuses_an_invalid_block_as_before(tmp_path: Path) -> None:
    async with big_daemon(tmp_path, result_link_bytes=0) as (info, app, home):
        agent = await RawAgent.connect(info, info.token)
        result = json.loads(await agent.request("tools/call", {"name": "Big__bad", "arguments": {}}))["result"]
        assert result["isError"] is True and result["_meta"]["toolbridge/errorKind"] == "app_error"
        assert "invalid content block #1 (image block needs a string 'mimeType')" in result["content"][0]["text"]
        await agent.stream.aclose()


def test_decode_tool_response_checks_blocks_without_decoding_them() -> None:
    line = bytearray(b'{"type":"toolResponse","correlationId":7,"result":{"content":' + content_json("image").encode()
                     + b',"structuredContent":{"a":1}}}')
    message = decode_tool_response(line)
    assert message is not None and message.correlation_id == 7
    result = message.result
    assert isinstance(result, PassthroughResult) and result.content is None
    assert bytes(result.raw_content) == content_json("image").encode()
    assert result.structured_content == {"a": 1}
    assert sorted(result.raw_blocks[0]) == ["data", "mimeType", "type"]
    # Not a toolResponse, or content that is not an array of objects: the usual decoder's job.
    assert decode_tool_response(b'{"type":"ping","id":1}') is None
    assert decode_tool_response(b'{"type":"toolResponse","correlationId":1,"result":{"content":[1]}}') is None
    assert decode_tool_response(b'{"type":"toolResponse","correlationId":1,"result":{"content":{}}}') is None


def test_response_parts_split_around_the_raw_content() -> None:
    raw = msgspec.Raw(b"[" + b'"a",' * 100_000 + b'"z"]')
    parts = response_parts("id-\"content\":null", {"content": raw, "isError": False, "resultType": "complete"})
    assert parts is not None and parts[1] is raw
    joined = b"".join(parts)
    assert joined.endswith(b"\n")
    assert json.loads(joined) == {"jsonrpc": "2.0", "id": 'id-"content":null',
                                  "result": {"content": json.loads(bytes(raw)), "isError": False,
                                             "resultType": "complete"}}
    assert response_parts(1, {"content": msgspec.Raw(b"[]"), "isError": False}) is None  # small: one encode


def test_the_framer_hands_over_a_large_line_without_a_copy() -> None:
    """A large line is collected read by read and handed over as one memory map (no buffer that
    grows by reallocation, no copy out of it); next_line still gives bytes; the limit holds."""
    big = b"x" * (2 * 1024 * 1024)
    for take in (True, False):
        framer = LineFramer(16 * 1024 * 1024)
        for start in range(0, len(big), 65536):
            framer.receive_data(big[start:start + 65536])
            assert (framer.next_line_buffer() if take else framer.next_line()) is None
        assert framer.buffered == len(big)
        framer.receive_data(b"\r\nnext\n")
        line = framer.next_line_buffer() if take else framer.next_line()
        assert isinstance(line, memoryview if take else bytes) and bytes(line) == big
        assert framer.next_line_buffer() == b"next" and framer.buffered == 0
    small = LineFramer(1024 * 1024 + 10)
    for start in range(0, len(big), 65536):
        small.receive_data(big[start:start + 65536])
        try:
            small.next_line_buffer()
        except Exception as exc:
            assert "line_too_long" in repr(exc) or "exceeded" in str(exc)
            break
    else:
        raise AssertionError("no line_too_long")
    small.receive_data(b"rest of it\nafter\n")
    assert small.next_line_buffer() == b"after"


@pytest.mark.parametrize("redact", [False, True])
async def test_call_log_summarises_a_passthrough_image_like_before(tmp_path: Path, redact: bool) -> None:
    async with big_daemon(tmp_path, result_link_bytes=0, call_log_redact=redact) as (info, app, home):
        agent = await RawAgent.connect(info, info.token)
        await agent.request("tools/call", {"name": "Big__image", "arguments": {}})
        await agent.stream.aclose()
    with sqlite3.connect(home / CALL_LOG_FILE) as db:
        (row,) = db.execute("SELECT result FROM calls WHERE tool = 'Big__image'").fetchall()
    # What the log held for the same image decoded (before issue 18): size and hash, or redacted.
    block = json.loads(content_json("image"))[0]
    expected = make_redacted_row if redact else make_row
    ts_row = (0.0, "t", None, None, None, None, None, CallOutcome(OutcomeKind.OK, result=ToolResult(content=[block])), 1.0)
    assert json.loads(row[0]) == json.loads(expected(ts_row)[8])
    assert (f"<redacted: {len(PAYLOAD)} bytes>" if redact else hashlib.sha256(PAYLOAD).hexdigest()) in row[0]


async def test_a_result_over_the_line_limit_fails_cleanly(tmp_path: Path) -> None:
    """Huge results stay bounded: a line over max_line_bytes fails its call, the link goes on."""
    async with big_daemon(tmp_path, max_line_bytes=1024 * 1024) as (info, app, home):
        agent = await RawAgent.connect(info, info.token)
        result = json.loads(await agent.request("tools/call", {"name": "Big__image", "arguments": {}}))["result"]
        assert result["isError"] is True and "line_too_long" in result["content"][0]["text"]
        small = json.loads(await agent.request("tools/call", {"name": "Big__small", "arguments": {}}))["result"]
        assert small["content"] == [{"type": "text", "text": "small"}]
        assert [e.code for e in app.errors] == ["line_too_long"]
        await agent.stream.aclose()


# --- issue 17: large results as links -----------------------------------------------------------

COMBOS = [("stdio", "legacy"), ("stdio", "auto"), ("http", "legacy"), ("http", "auto")]


def _link(result: types.CallToolResult) -> types.ResourceLink:
    links = [block for block in result.content if isinstance(block, types.ResourceLink)]
    assert len(links) == 1, result.content
    return links[0]


@pytest.mark.parametrize(("transport", "mode"), COMBOS)
async def test_a_large_result_arrives_as_a_link_and_reads_back_exactly(
        tmp_path: Path, transport: str, mode: str) -> None:
    async with big_daemon(tmp_path) as (info, app, home):
        async with connect_agent(transport, mode, info, home) as client:
            result = await client.call_tool("Big__image", {})
            assert not result.is_error
            text = result.content[0]
            assert isinstance(text, types.TextContent) and "resources/read" in text.text
            link = _link(result)
            assert is_result_uri(str(link.uri)) and link.mime_type == "image/png"
            assert result.meta is not None and result.meta[LINK_KEY]["bytes"] == len(content_json("image"))
            contents = (await client.read_resource(str(link.uri))).contents
            assert len(contents) == 1 and isinstance(contents[0], types.BlobResourceContents)
            assert contents[0].mime_type == "image/png" and base64.b64decode(contents[0].blob) == PAYLOAD
            # Text, and a result's own resource_link blocks stay inline beside the link.
            text_result = await client.call_tool("Big__text", {})
            read = (await client.read_resource(str(_link(text_result).uri))).contents
            assert isinstance(read[0], types.TextResourceContents)
            assert read[0].text == json.loads(ODD_TEXT_JSON)
            mixed = await client.call_tool("Big__mixed", {})
            uris = [str(b.uri) for b in mixed.content if isinstance(b, types.ResourceLink)]
            assert len(uris) == 2 and uris[1] == "file:///tmp/x.png" and is_result_uri(uris[0])
            parts = (await client.read_resource(uris[0])).contents
            assert [type(p).__name__ for p in parts] == ["TextResourceContents", "BlobResourceContents"]
            # Small results, and a call that opts out, come inline.
            small = await client.call_tool("Big__small", {})
            assert [b.type for b in small.content] == ["text"]
            inline = await client.call_tool("Big__image", {}, meta={INLINE_KEY: True})
            assert isinstance(inline.content[0], types.ImageContent)
            assert base64.b64decode(inline.content[0].data) == PAYLOAD


async def test_only_the_same_token_reads_a_link(tmp_path: Path) -> None:
    async with big_daemon(tmp_path) as (info, app, home):
        other = tokens.issue(home, "other-agent", ["agent"])
        async with connect_agent("http", "legacy", info, home) as client:
            uri = str(_link(await client.call_tool("Big__image", {})).uri)
            assert (await client.read_resource(uri)).contents
        async with http_client(info, Authorization=f"Bearer {other}") as http:
            async with Client(streamable_http_client(mcp_url(info), http_client=http), mode="legacy") as client:
                with pytest.raises(MCPError) as foreign:
                    await client.read_resource(uri)
                with pytest.raises(MCPError) as missing:
                    await client.read_resource(uri[:-4] + "0000")
        assert foreign.value.error.message.replace(uri, "U") == missing.value.error.message.replace(
            uri[:-4] + "0000", "U")
        assert "unknown resource" in foreign.value.error.message
        # stdio: the other token's agentConnect link cannot read it either.
        agent = await RawAgent.connect(info, other)
        answer = json.loads(await agent.request("resources/read", {"uri": uri}))
        assert "unknown resource" in answer["error"]["message"]
        await agent.stream.aclose()
    with sqlite3.connect(home / CALL_LOG_FILE) as db:  # (the daemon flushed it as it stopped)
        rows = db.execute("SELECT tool, is_error FROM calls WHERE tool IN ('result_link', 'result_read')").fetchall()
    assert ("result_link", 0) in rows and ("result_read", 0) in rows and ("result_read", 1) in rows


async def test_links_in_one_app_scopes(tmp_path: Path) -> None:
    """A link made in a one-app scope can be read there (stdio --app and /mcp/apps/NAME)."""
    async with big_daemon(tmp_path) as (info, app, home):
        agent = await RawAgent.connect(info, info.token, app="Big")
        result = json.loads(await agent.request("tools/call", {"name": "image", "arguments": {}}))["result"]
        uri = result["content"][1]["uri"]
        read = json.loads(await agent.request("resources/read", {"uri": uri}))["result"]
        assert base64.b64decode(read["contents"][0]["blob"]) == PAYLOAD
        # A scope knows its app's resources by their own URIs only: the prefixed form is unknown there.
        refused = json.loads(await agent.request("resources/read", {"uri": "toolbridge://Big/x"}))
        assert refused["error"]["code"] == -32002 and "unknown resource" in refused["error"]["message"]
        await agent.stream.aclose()
        async with http_client(info) as http:
            async with Client(streamable_http_client(mcp_url(info) + "/apps/Big", http_client=http),
                              mode="auto") as client:
                link = _link(await client.call_tool("image", {}))
                blob = (await client.read_resource(str(link.uri))).contents[0]
                assert isinstance(blob, types.BlobResourceContents) and base64.b64decode(blob.blob) == PAYLOAD


async def test_a_result_larger_than_the_store_comes_inline(tmp_path: Path) -> None:
    async with big_daemon(tmp_path, result_link_store_bytes=1024 * 1024) as (info, app, home):
        agent = await RawAgent.connect(info, info.token)
        result = json.loads(await agent.request("tools/call", {"name": "Big__image", "arguments": {}}))["result"]
        assert result["content"][0]["type"] == "image"
        await agent.stream.aclose()


def _blocks(*sizes: int) -> list[list[dict[str, msgspec.Raw]]]:
    return [[{"type": msgspec.Raw(b'"text"'), "text": msgspec.Raw(b'"' + b"x" * size + b'"')}] for size in sizes]


class _Line(bytearray):
    """An app's line that can be watched (bytes cannot hold weak references)."""


async def test_a_link_keeps_a_copy_of_what_it_serves_not_the_apps_line() -> None:
    """The store's values were views of the app's whole line: 110 links of ~1.1 MiB accounted
    for 121 MiB and held 1,055 MB. They are copied out: the line can go, the bytes stay exact."""
    import gc
    import weakref

    content = ('[{"type":"image","mimeType":"image/png","data":"' + "QUJD" * 1000 + '"},'
               '{"type":"text","text":"caf\\u00e9"},'
               '{"type":"resource","resource":{"uri":"file:///a","text":"x"}}]')
    line = _Line(b'{"type":"toolResponse","correlationId":7,"result":{"success":true,"content":'
                 + content.encode() + b',"structuredContent":{"pad":"' + b"p" * 100_000 + b'"}}}')
    response = decode_tool_response(line)
    assert response is not None and isinstance(response.result, PassthroughResult)
    store = ResultStore(max_bytes=1 << 20, ttl=60)
    entry = store.put("p", "T", response.result.raw_blocks, len(response.result.raw_content))
    assert entry is not None
    watch = weakref.ref(line)
    del line, response
    gc.collect()
    assert watch() is None, "the store keeps the app's line alive"
    contents = msgspec.json.decode(msgspec.json.encode(store.read(entry.uri, "p").contents))
    assert contents == [{"uri": entry.uri, "mimeType": "image/png", "blob": "QUJD" * 1000},
                        {"uri": entry.uri, "mimeType": "text/plain", "text": "caf\u00e9"},
                        {"uri": "file:///a", "text": "x"}]
    assert bytes(store.read(entry.uri, "p").contents[1]["text"]) == b'"caf\\u00e9"'  # the app's bytes


async def test_links_expire_after_their_ttl(autojump_clock: trio.testing.MockClock) -> None:
    store = ResultStore(max_bytes=1000, ttl=60)
    (blocks,) = _blocks(10)
    entry = store.put("agent", "T", blocks, 12)
    assert entry is not None and store.read(entry.uri, "agent") is entry
    await trio.sleep(59)
    assert store.read(entry.uri, "agent") is entry
    await trio.sleep(2)
    with pytest.raises(Exception, match="unknown resource"):
        store.read(entry.uri, "agent")
    assert len(store) == 0 and store.bytes == 0


async def test_the_least_recently_read_link_is_evicted_first() -> None:
    store = ResultStore(max_bytes=300, ttl=60)
    first, second, third = _blocks(100, 100, 100)
    a = store.put("p", "T", first, 100)
    b = store.put("p", "T", second, 100)
    assert a is not None and b is not None
    store.read(a.uri, "p")  # a is now the most recently used
    c = store.put("p", "T", third, 150)  # needs room: b goes
    assert c is not None and store.bytes == 250
    with pytest.raises(Exception, match="unknown resource"):
        store.read(b.uri, "p")
    assert store.read(a.uri, "p") is a
    assert store.put("p", "T", third, 301) is None  # larger than the whole store: not kept
    with pytest.raises(Exception, match="unknown resource"):
        store.read(a.uri, "q")  # another principal


async def test_the_payload_budget_pauses_until_queued_responses_are_freed() -> None:
    """Back-pressure for many large results in flight: the budget is over while more than its
    limit waits for agents, and has room again once those lines are freed (here in a worker
    thread, as the call log's writer may free a result)."""
    budget = PayloadBudget(limit=100)
    held = [SplitLine([b"x" * 80]), SplitLine([b"y" * 80])]
    for line in held:
        budget.track(line, line.nbytes)
    del line
    assert budget.over and budget.held == 160
    roomy = trio.Event()

    async def wait() -> None:
        await budget.room()
        roomy.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        assert not roomy.is_set()  # 160 > 100: app links would not read on
        last = held.pop()
        await trio.to_thread.run_sync(held.clear)  # a line freed in another thread: 80 left
        with trio.fail_after(5):
            await roomy.wait()
        assert budget.held == 80 and not budget.over
        del last
        await trio.testing.wait_all_tasks_blocked()
    assert budget.held == 0


class PrebuiltApp(ScriptedApp):
    """Answers ``image`` with one prebuilt line (sent in two writes: no copy per call)."""

    BODY = (b',"result":{"success":true,"content":[{"type":"image","mimeType":"image/png","data":"'
            + PAYLOAD_B64.encode() * 3 + b'"}]}}\n')

    def __init__(self, port: int, token: str) -> None:
        super().__init__(port, token, "Big", tools=TOOLS)

    async def _answer(self, call: ToolInvocation) -> None:
        assert self._stream is not None
        async with self._send_lock:
            await self._stream.send_all(b'{"type":"toolResponse","correlationId":%d' % call.correlation_id)
            await self._stream.send_all(self.BODY)


async def test_the_daemon_holds_one_copy_of_a_large_result_and_none_after(tmp_path: Path) -> None:
    """Python-level allocations (tracemalloc) while 6 MB results cross: at most one copy of the
    line at a time (the framer's buffer, decoded in place and written from there), none left
    once it was written. Before issue 18: ~6 copies at peak, one kept until the next call."""
    import tracemalloc

    # (No call log: its writer thread holds a result until it wrote the row, soon but not at once.)
    async with running_daemon(tmp_path / "home", result_link_bytes=0, http_port=None, call_log=False) as info, \
            trio.open_nursery() as nursery:
        app = await PrebuiltApp(info.port, info.token).start(nursery)
        stream = await trio.open_tcp_stream("127.0.0.1", info.port)

        async def call(request_id: int) -> int:
            await stream.send_all(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                                              "params": {"name": "Big__image", "arguments": {}}}).encode() + b"\n")
            received = 0
            with trio.fail_after(20):
                while not (data := await stream.receive_some(1 << 16)).endswith(b"\n"):
                    received += len(data)
            return received + len(data)

        await stream.send_all(json.dumps({"type": "agentConnect", "token": info.token}).encode() + b"\n")
        await stream.receive_some(1000)
        await stream.send_all(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).encode()
            + b"\n")
        await stream.receive_some(100_000)
        await call(1)  # warm-up: caches, buffers
        line = len(PrebuiltApp.BODY)
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            for request_id in range(2, 5):
                assert await call(request_id) > line
            await trio.testing.wait_all_tasks_blocked()
            current, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert (peak - base) < 1.6 * line, (peak - base) / line
        assert (current - base) < 0.3 * line, (current - base) / line
        await stream.aclose()
        await app.close()
