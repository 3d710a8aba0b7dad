"""Discovery mode end to end: the MCP SDK client sees only search_tools and call_tool.

Over both transports (``toolbridge stdio --discovery`` as a subprocess; HTTP at
``/mcp/discovery``) and both protocol eras, against the real daemon and a scripted app.
The session-level tests at the end check what a discovery session does not send.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
import trio.testing
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from app_client.wire import ToolSpec
from broker.config.settings import Settings
from broker.daemon.broker_core import BrokerCore
from broker.daemon.run import DaemonInfo
from broker.discovery import meta_tools
from broker.mcp.jsonrpc import parse_message
from broker.mcp.server import McpServer
from broker.mcp.session import open_session
from mcp_testkit import (HTTPX_STREAM_WARNINGS, MODERN_META, Outbox, ScriptedApp, daemon_app_agent, http_client,
                         running_daemon)

pytestmark = [pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS]

COMBOS = [("http", "legacy"), ("http", "auto"), ("stdio", "legacy"), ("stdio", "auto")]
KIND = "toolbridge/errorKind"
EXPORT = ToolSpec(
    "export_pdf", "Export the open document as a PDF file",
    {"type": "object", "properties": {"path": {"type": "string", "description": "Where to write the PDF"}},
     "required": ["path"]},
)


def discovery_url(info: DaemonInfo) -> str:
    return f"http://127.0.0.1:{info.http_port}/mcp/discovery"


def setup(tmp_path: Path, transport: str, mode: str, **kwargs: Any) -> Any:
    return daemon_app_agent(tmp_path, transport, mode, discovery=True, **kwargs)


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


def kind_of(result: types.CallToolResult) -> str | None:
    assert result.is_error
    return (result.meta or {}).get(KIND)


@pytest.mark.parametrize(("transport", "mode"), COMBOS)
async def test_discovery_lists_meta_tools_and_calls_through_the_pipeline(tmp_path: Path, transport: str, mode: str) -> None:
    async with setup(tmp_path, transport, mode) as (info, app, client):
        assert client.server_capabilities.tools is not None
        assert client.server_capabilities.tools.list_changed is False
        assert client.instructions is not None and "search_tools" in client.instructions
        listed = await client.list_tools()
        assert sorted(tool.name for tool in listed.tools) == ["call_tool", "search_tools"]
        search = next(tool for tool in listed.tools if tool.name == "search_tools")
        assert search.input_schema["required"] == ["query"]

        found = await client.call_tool("search_tools", {"query": "echo the arguments back", "limit": 3})
        assert not found.is_error
        hits = found.structured_content["tools"]
        assert hits[0] == {"name": "Demo__echo", "app": "Demo", "description": "Echo the arguments back",
                           "inputSchema": app.tools[0].input_schema, "confidence": "high"}
        assert len(hits) <= 3 and found.structured_content["match"] == "words"
        assert found.structured_content["noClearFit"] is False
        search_output = search.output_schema or {}
        assert search_output["properties"]["noClearFit"]["type"] == "boolean"
        assert json.loads(text_of(found)) == found.structured_content

        # Never an empty answer: a typo in every word, or only common words, still give
        # candidates, and the answer says how they were found and how far to trust them.
        typos = await client.call_tool("search_tools", {"query": "ecko the argumnets bakc"})
        assert typos.structured_content["match"] == "corrected"
        assert typos.structured_content["tools"][0]["name"] == "Demo__echo"
        common = await client.call_tool("search_tools", {"query": "what have I got on tomorrow?"})
        assert not common.is_error and common.structured_content["tools"]
        assert common.structured_content["match"] in ("semantic", "loose", "any")  # semantic: the extra is there
        assert {t["confidence"] for t in common.structured_content["tools"]} == {"low"}
        assert common.structured_content["noClearFit"] is True  # an agent can stop searching

        ok = await client.call_tool("call_tool", {"name": "Demo__echo", "arguments": {"text": "hi"}})
        assert not ok.is_error
        assert ok.structured_content == {"echo": {"text": "hi"}}
        assert app.invocations[-1].tool == "echo" and app.invocations[-1].parameters == {"text": "hi"}

        # The router's pipeline applies to call_tool: validation, guards, app errors, deadlines.
        calls_before = len(app.invocations)
        invalid = await client.call_tool("call_tool", {"name": "Demo__echo", "arguments": {"text": 5}})
        assert kind_of(invalid) == "invalid_arguments" and "Demo__echo" in text_of(invalid)
        guarded = await client.call_tool("call_tool", {"name": "Demo__echo", "arguments": {"text": "../../etc/passwd"}})
        assert kind_of(guarded) == "guard_rejected"
        assert len(app.invocations) == calls_before  # rejected calls never reach the app
        failed = await client.call_tool("call_tool", {"name": "Demo__fail"})
        assert kind_of(failed) == "app_error" and "disk is full" in text_of(failed)
        late = await client.call_tool("call_tool", {"name": "Demo__slow"}, meta={"toolbridge/timeoutMs": 100})
        assert kind_of(late) == "timeout"
        await app.until(lambda: len(app.cancels) == 1)

        # call_tool's own arguments, and a tool nobody offers: errors the model can act on.
        unknown = await client.call_tool("call_tool", {"name": "Demo__nope"})
        assert kind_of(unknown) == "unknown_tool" and "search_tools" in text_of(unknown)
        nameless = await client.call_tool("call_tool", {"arguments": {}})
        assert kind_of(nameless) == "invalid_arguments" and "call_tool" in text_of(nameless)
        no_query = await client.call_tool("search_tools", {"limit": 2})
        assert kind_of(no_query) == "invalid_arguments" and "query" in text_of(no_query)

        # A direct call by agent-facing name works in discovery mode too.
        direct = await client.call_tool("Demo__text", {})
        assert (direct.is_error, text_of(direct)) == (False, "just text")
        with pytest.raises(MCPError) as caught:
            await client.call_tool("Demo__nope", {})
        assert caught.value.code == -32602


@pytest.mark.parametrize(("transport", "mode"), [("stdio", "legacy"), ("http", "auto")])
async def test_progress_and_cancellation_through_call_tool(tmp_path: Path, transport: str, mode: str) -> None:
    async with setup(tmp_path, transport, mode) as (info, app, client):
        seen: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total, message))

        done = await client.call_tool("call_tool", {"name": "Demo__progress"}, progress_callback=on_progress)
        assert text_of(done) == "done"
        assert seen == [(1, 2, "step 1"), (2, 2, "step 2")]

        async with trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def call() -> None:
                with scope:
                    await client.call_tool("call_tool", {"name": "Demo__slow"})
                    raise AssertionError("the call should not have finished")  # pragma: no cover

            nursery.start_soon(call)
            await app.until(lambda: any(i.tool == "slow" for i in app.invocations))
            scope.cancel()
        await app.until(lambda: len(app.cancels) == 1)
        slow = next(i for i in app.invocations if i.tool == "slow")
        assert app.cancels[0].correlation_id == slow.correlation_id


async def test_search_follows_apps_as_they_come(tmp_path: Path) -> None:
    async with setup(tmp_path, "http", "auto") as (info, app, client), trio.open_nursery() as nursery:
        before = await client.call_tool("search_tools", {"query": "export the document as pdf"})
        assert all(hit["name"] != "Writer__export_pdf" for hit in before.structured_content["tools"])
        writer = await ScriptedApp(info.port, info.token, "Writer", tools=[EXPORT]).start(nursery)
        after = await client.call_tool("search_tools", {"query": "export the document as pdf"})
        assert after.structured_content["tools"][0]["name"] == "Writer__export_pdf"
        assert after.structured_content["tools"][0]["app"] == "Writer"
        # The listed tools did not change: still the two meta-tools.
        assert sorted(t.name for t in (await client.list_tools()).tools) == ["call_tool", "search_tools"]
        await writer.close()


async def test_the_default_mode_still_lists_everything_and_can_search(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with running_daemon(home) as info, trio.open_nursery() as nursery:
        app = await ScriptedApp(info.port, info.token).start(nursery)
        async with http_client(info) as http:
            url = f"http://127.0.0.1:{info.http_port}/mcp"
            async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
                assert client.server_capabilities.tools is not None
                assert client.server_capabilities.tools.list_changed is True
                names = [tool.name for tool in (await client.list_tools()).tools]
                assert "search_tools" not in names and "Demo__echo" in names
                # The meta-tools are callable by name in every mode (the agent library searches so).
                found = await client.call_tool("search_tools", {"query": "plain text"})
                assert found.structured_content["tools"][0]["name"] == "Demo__text"
        await app.close()


async def test_http_discovery_path_variants(tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "home") as info, http_client(info) as http:
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        slash = await http.post(discovery_url(info) + "/", json=init, headers=headers)
        assert slash.status_code == 200
        assert slash.json()["result"]["capabilities"] == {"tools": {"listChanged": False}, "resources": {"subscribe": True, "listChanged": True}, "prompts": {"listChanged": True}, "completions": {}, "logging": {}}
        other = await http.post(discovery_url(info) + "/more", json=init, headers=headers)
        assert other.status_code == 404
        assert "/mcp/discovery" in other.json()["error"]["message"]


# --- the session itself ---------------------------------------------------------------------

def message(payload: dict[str, Any]) -> Any:
    return parse_message(json.dumps({"jsonrpc": "2.0", **payload}))


def add_app(core: BrokerCore, name: str) -> None:
    core.registry.register(
        object(),  # type: ignore[arg-type]  # the registry only keeps the link
        app_name=name, instance_id=None, tools=[EXPORT], max_concurrency=1, app_version=None,
    )


@pytest.mark.parametrize("discovery", [True, False])
async def test_a_discovery_session_sends_no_list_changed(
    tmp_path: Path, discovery: bool, autojump_clock: trio.testing.MockClock
) -> None:
    core = BrokerCore(Settings(home=tmp_path), "secret")
    outbox = Outbox()
    server = McpServer.of(core)
    async with open_session(server, transport="stdio", label="t", notify=outbox, discovery=discovery) as session:
        await session.handle(message({"id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}), outbox)
        init = await outbox.next()
        assert init["result"]["capabilities"]["tools"]["listChanged"] is not discovery
        await session.handle(message({"method": "notifications/initialized"}), outbox)
        add_app(core, "Writer")
        await trio.sleep(1)  # virtual: well past the coalescing delay
        if discovery:
            assert outbox.empty()
        else:
            assert (await outbox.next())["method"] == "notifications/tools/list_changed"
        await session.handle(message({"id": 2, "method": "tools/list"}), outbox)
        names = [tool["name"] for tool in (await outbox.next())["result"]["tools"]]
        assert names == (["call_tool", "search_tools"] if discovery else ["Writer__export_pdf"])


async def test_a_discovery_listen_honours_nothing(tmp_path: Path) -> None:
    core = BrokerCore(Settings(home=tmp_path), "secret")
    outbox = Outbox()
    async with open_session(McpServer.of(core), transport="http", stateful=False, discovery=True) as session:
        listen = {"id": "listen-1", "method": "subscriptions/listen",
                  "params": {"notifications": {"toolsListChanged": True}, "_meta": MODERN_META}}
        await session.handle(message(listen), outbox)
        ack = await outbox.next()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"] == {}
        await session.handle(message({"id": 2, "method": "tools/list", "params": {"_meta": MODERN_META}}), outbox)
        reply = await outbox.next()
        assert [t["name"] for t in reply["result"]["tools"]] == sorted(t["name"] for t in meta_tools())
        assert reply["result"]["ttlMs"] == 0
        session.close()


async def test_example_requests_guide_the_agents_search_and_stay_out_of_its_view(tmp_path: Path) -> None:
    """An app's typical requests (exampleRequests) let search_tools find its tool from the users'
    words; the agent sees them nowhere: not in tools/list, not in the search's answer."""
    receive = ToolSpec("receive_shipment", "Record the quantities of an inbound purchase order",
                       example_requests=["my pallets came in, log them", "we just unloaded the lorry"])
    book = ToolSpec("book_carrier", "Book a lorry to collect an outbound order")
    async with running_daemon(tmp_path / "home") as info, trio.open_nursery() as nursery:
        depot = await ScriptedApp(info.port, info.token, "Depot", tools=[receive, book]).start(nursery)
        async with http_client(info) as http:
            url = f"http://127.0.0.1:{info.http_port}/mcp"
            async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
                listed = [tool.model_dump(by_alias=True) for tool in (await client.list_tools()).tools]
                assert any(tool["name"] == "Depot__receive_shipment" for tool in listed)
                assert "unloaded" not in json.dumps(listed)
                found = await client.call_tool("search_tools", {"query": "the lorry is unloaded, pallets are in"})
                assert found.structured_content["tools"][0]["name"] == "Depot__receive_shipment"
                assert "unloaded" not in json.dumps(found.structured_content)
        await depot.close()
