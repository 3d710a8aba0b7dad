"""One-app scopes (``toolbridge stdio --app NAME``, ``/mcp/apps/NAME``): one app's tools under
their own names, end to end with the MCP SDK as the agent.

Over both transports (a ``toolbridge stdio --app`` subprocess; HTTP in-process) and both of
the SDK's modes (``legacy``: the 2025-11-25 handshake; ``auto``: 2026-07-28), against the real
daemon and scripted apps. Then bad names, token scopes, and the session-level promise that a
scope hears only of its own app's changes.
"""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
import trio.testing
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from app_client.protocol import PromptSpec, ResourceRead, ResourceResponse, ResourceSpec
from app_client.wire import AgentConnect, Register, ToolInvocation, ToolResponse, ToolResult, ToolSpec, encode_message
from broker.cli.daemon_client import admin_request
from broker.config import tokens
from broker.config.settings import Settings
from broker.daemon.broker_core import BrokerCore
from broker.daemon.run import DaemonInfo
from broker.mcp.jsonrpc import parse_message
from broker.mcp.server import McpServer
from broker.mcp.session import open_session
from mcp_testkit import (
    MODERN_META,
    Outbox,
    DEMO_TOOLS,
    HTTPX_STREAM_WARNINGS,
    OBJECT,
    ScriptedApp,
    connect_agent,
    http_client,
    mcp_url,
    relay_env,
    running_daemon,
)
from rawapp import RawApp

pytestmark = [pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS]

COMBOS = [("http", "legacy"), ("http", "auto"), ("stdio", "legacy"), ("stdio", "auto")]
KIND = "toolbridge/errorKind"
POST = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


class NamingApp(ScriptedApp):
    """Answers every call with the name of the tool it was invoked as (its own name)."""

    async def _answer(self, call: ToolInvocation) -> None:
        await self.send(ToolResponse(call.correlation_id, ToolResult(data={"tool": call.tool})))


def scope_url(info: DaemonInfo, app: str) -> str:
    return f"{mcp_url(info)}/apps/{app}"


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


def names_of(listed: types.ListToolsResult) -> list[str]:
    return [tool.name for tool in listed.tools]


def logged_tools(home: Path) -> list[tuple[str, str | None]]:
    with sqlite3.connect(f"file:{home / 'calls.sqlite3'}?mode=ro", uri=True) as db:
        rows = db.execute("select tool, error_kind from calls order by id").fetchall()
    db.close()
    return [(str(tool), kind) for tool, kind in rows]


# --- through the SDK ------------------------------------------------------------------------


@pytest.mark.parametrize(("transport", "mode"), COMBOS)
async def test_one_app_under_its_own_names_through_the_whole_pipeline(
    tmp_path: Path, transport: str, mode: str
) -> None:
    home = tmp_path / "home"
    async with running_daemon(home, call_log_flush_interval=0.05) as info, trio.open_nursery() as nursery:
        demo = await ScriptedApp(info.port, info.token).start(nursery)
        other = await ScriptedApp(info.port, info.token, "Other", tools=[ToolSpec("secret", "Not for you", OBJECT)]
                                  ).start(nursery)
        async with connect_agent(transport, mode, info, home, app="Demo") as client:
            assert client.server_capabilities.tools is not None
            assert client.server_capabilities.tools.list_changed is True
            listed = await client.list_tools()
            assert names_of(listed) == sorted(spec.name for spec in DEMO_TOOLS)  # no Demo__, no Other
            text_tool = next(tool for tool in listed.tools if tool.name == "text")
            assert text_tool.title == "Plain text" and text_tool.meta is None

            ok = await client.call_tool("echo", {"text": "hi"})  # auto over HTTP: Mcp-Param-Text too
            assert not ok.is_error and ok.structured_content == {"echo": {"text": "hi"}}
            invalid = await client.call_tool("echo", {"text": 5})  # validation, as on /mcp
            assert invalid.is_error and (invalid.meta or {}).get(KIND) == "invalid_arguments"
            late = await client.call_tool("hang", {})  # the tool's deadline (300 ms)
            assert late.is_error and (late.meta or {}).get(KIND) == "timeout"
            seen: list[tuple[float, float | None, str | None]] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                seen.append((progress, total, message))

            assert text_of(await client.call_tool("progress", {}, progress_callback=on_progress)) == "done"
            assert seen == [(1, 2, "step 1"), (2, 2, "step 2")]
            async with trio.open_nursery() as calls:  # cancelling reaches the app
                cancel = trio.CancelScope()

                async def slow() -> None:
                    with cancel:
                        await client.call_tool("slow", {})

                calls.start_soon(slow)
                await demo.until(lambda: any(i.tool == "slow" for i in demo.invocations))
                cancel.cancel()
            await demo.until(lambda: len(demo.cancels) == 1)

            for wrong in ("secret", "Demo__echo", "Other__secret"):  # another app's, or agent-facing names
                with pytest.raises(MCPError) as unknown:
                    await client.call_tool(wrong, {})
                assert unknown.value.error.code == -32602
                assert "'Demo' has no tool by that name" in unknown.value.error.message
        assert info.core.call_log is not None
        await info.core.call_log.wait_written(5)
        # The call log (and the audit) name the real tool: its agent-facing name.
        assert logged_tools(home) == [("Demo__echo", "ok"), ("Demo__echo", "invalid_arguments"),
                                      ("Demo__hang", "timeout"), ("Demo__progress", "ok"), ("Demo__slow", "cancelled")]
        assert [i.tool for i in demo.invocations] == ["echo", "hang", "progress", "slow"] and not other.invocations
        await demo.close()
        await other.close()


@pytest.mark.parametrize(("transport", "mode"), COMBOS)
async def test_the_scope_follows_its_app_as_it_comes_and_goes(tmp_path: Path, transport: str, mode: str) -> None:
    home = tmp_path / "home"
    changes_in, changes = trio.open_memory_channel[None](math.inf)

    async def on_message(message: Any) -> None:
        # In auto mode the SDK hands the listen stream's notifications here too: count those once.
        if isinstance(message, types.ToolListChangedNotification) and mode == "legacy":
            changes_in.send_nowait(None)

    async def changed() -> None:
        with trio.fail_after(10):
            await changes.receive()

    async with running_daemon(home, reconnect_grace=0.05) as info, trio.open_nursery() as nursery:
        await ScriptedApp(info.port, info.token, "Other").start(nursery)
        async with connect_agent(transport, mode, info, home, app="Late", message_handler=on_message) as client:
            assert names_of(await client.list_tools()) == []  # not connected yet: empty, not an error
            with pytest.raises(MCPError) as absent:
                await client.call_tool("echo", {"text": "x"})
            message = absent.value.error.message
            assert absent.value.error.code == -32602
            assert "The app 'Late' is not connected" in message and "Start the app" in message
            async with trio.open_nursery() as listening:
                if mode == "auto":  # 2026-07-28: changes come on a subscriptions/listen stream
                    subscription_ready = trio.Event()

                    async def listen() -> None:
                        async with client.listen(tools_list_changed=True) as subscription:
                            assert subscription.honored.tools_list_changed is True
                            subscription_ready.set()
                            async for _event in subscription:
                                changes_in.send_nowait(None)

                    listening.start_soon(listen)
                    await subscription_ready.wait()

                late = await ScriptedApp(info.port, info.token, "Late").start(nursery)
                await changed()
                assert names_of(await client.list_tools()) == sorted(spec.name for spec in DEMO_TOOLS)
                assert text_of(await client.call_tool("text", {})) == "just text"

                await late.close()  # gone once its (short) reconnect grace ends
                await changed()
                assert names_of(await client.list_tools()) == []
                with pytest.raises(MCPError, match="not connected"):
                    await client.call_tool("text", {})

                again = await ScriptedApp(info.port, info.token, "Late").start(nursery)  # reconnect restores it
                await changed()
                assert "text" in names_of(await client.list_tools())
                assert text_of(await client.call_tool("text", {})) == "just text"
                listening.cancel_scope.cancel()
            await again.close()
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(("transport", "mode"), [("http", "legacy"), ("stdio", "auto")])
async def test_own_names_collide_with_nothing_else(tmp_path: Path, transport: str, mode: str) -> None:
    """An app's own names that are a meta-tool's name, another app's agent-facing name, or two
    names /mcp would sanitize alike: in the scope each is that app's tool and nothing else."""
    home = tmp_path / "home"
    own = ["search_tools", "call_tool", "Other__echo", "a.b", "a_b"]
    async with running_daemon(home) as info, trio.open_nursery() as nursery:
        demo = await NamingApp(info.port, info.token, "Demo", tools=[ToolSpec(n, f"tool {n}", OBJECT) for n in own]
                               ).start(nursery)
        other = await NamingApp(info.port, info.token, "Other", tools=[ToolSpec("echo", "echo", OBJECT)]
                                ).start(nursery)
        async with connect_agent(transport, mode, info, home, app="Demo") as client:
            assert names_of(await client.list_tools()) == sorted(own)
            for name in own:
                result = await client.call_tool(name, {})
                assert result.structured_content == {"tool": name}, name
        assert sorted(i.tool for i in demo.invocations) == sorted(own)
        assert not other.invocations
        await demo.close()
        await other.close()


async def test_a_second_instance_is_addressed_by_its_label(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with running_daemon(home) as info, trio.open_nursery() as nursery:
        first = await NamingApp(info.port, info.token, "Demo", tools=[ToolSpec("one", "", OBJECT)]).start(nursery)
        second = await NamingApp(info.port, info.token, "Demo", tools=[ToolSpec("two", "", OBJECT)]).start(nursery)
        assert second.registered is not None and second.registered.app_label == "Demo_2"
        async with connect_agent("http", "legacy", info, home, app="Demo_2") as client:
            assert names_of(await client.list_tools()) == ["two"]
            assert (await client.call_tool("two", {})).structured_content == {"tool": "two"}
            agents = await admin_request(home, "agents")  # toolbridge status shows the scope
            assert [(a["transport"], a["app"]) for a in agents] == [("http", "Demo_2")]
        async with connect_agent("http", "auto", info, home, app="demo") as client:  # labels are case-sensitive
            assert names_of(await client.list_tools()) == []
        assert [i.tool for i in second.invocations] == ["two"] and not first.invocations
        await first.close()
        await second.close()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_restarted_app_stays_in_its_scope_while_its_old_copy_waits_out_the_grace(
    tmp_path: Path, mode: str
) -> None:
    """A new process of the app comes back as Demo_2 while Demo waits out its reconnect grace:
    the scope Demo serves the connected copy at once, and keeps it once the grace ends."""
    home = tmp_path / "home"
    async with running_daemon(home, reconnect_grace=0.5) as info, trio.open_nursery() as nursery:
        old = await NamingApp(info.port, info.token, "Demo", tools=[ToolSpec("one", "", OBJECT)]).start(nursery)
        async with connect_agent("http", mode, info, home, app="Demo") as client:
            assert names_of(await client.list_tools()) == ["one"]
            await old.close()  # the process quits; its instance waits out the grace
            new = await NamingApp(info.port, info.token, "Demo", tools=[ToolSpec("one", "", OBJECT)]).start(nursery)
            assert new.registered is not None and new.registered.app_label == "Demo_2"
            assert (await client.call_tool("one", {})).structured_content == {"tool": "one"}
            assert [i.tool for i in new.invocations] == ["one"]
            with trio.fail_after(10):  # the old copy's grace ends: Demo_2 is still served as Demo
                while any(i.label == "Demo" for i in info.core.registry.instances()):
                    await info.core.registry.wait_changed(info.core.registry.version)
            assert names_of(await client.list_tools()) == ["one"]
            assert (await client.call_tool("one", {})).structured_content == {"tool": "one"}
            assert len(new.invocations) == 2 and not old.invocations
            await new.close()


# --- bad names, the gate, and token scopes --------------------------------------------------


async def test_bad_app_names_over_http_are_404_and_the_daemon_keeps_serving(tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "home") as info, http_client(info) as http:
        base = mcp_url(info)
        for tail, says in [
            ("/apps", "name the app"), ("/apps/", "name the app"),
            ("/apps/" + "x" * 65, "at most 64 characters"),
            ("/apps/%2e%2e", "not an app label"), ("/apps/%2e%2e/%2e%2e/mcp", "not an app label"),
            ("/apps/a%2Fb", "not an app label"), ("/apps/a%5Cb", "not an app label"),
            ("/apps/Demo/tools", "not an app label"), ("/apps/De%20mo", "not an app label"),
            ("/apps/D%C3%A9mo", "not an app label"), ("/apps/Demo%00", "not an app label"),
        ]:
            reply = await http.post(base + tail, json=INIT, headers=POST)
            assert reply.status_code == 404, tail
            assert says in reply.json()["error"]["message"], tail
        # httpx removes literal dot segments; a raw request keeps them (and the daemon sees them).
        body = json.dumps(INIT).encode()
        for raw_path in (b"/mcp/apps/..", b"/mcp/apps/../mcp", b"/mcp/apps/./Demo"):
            stream = await trio.open_tcp_stream("127.0.0.1", info.http_port or 0)
            async with stream:
                await stream.send_all(
                    b"POST " + raw_path + b" HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                    b"accept: application/json, text/event-stream\r\nauthorization: Bearer " + info.token.encode()
                    + b"\r\nconnection: close\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
                response = b""
                with trio.fail_after(10):
                    while chunk := await stream.receive_some(65536):
                        response += chunk
            assert response.startswith(b"HTTP/1.1 404"), raw_path
            assert b"not an app label" in response, raw_path
        ok = await http.post(scope_url(info, "Demo") + "/", json=INIT, headers=POST)  # a trailing slash is fine
        assert ok.status_code == 200
        body = ok.json()["result"]
        # The same capabilities as /mcp: the scope serves its app's resources and prompts too.
        everything = (await http.post(base, json=INIT, headers=POST)).json()["result"]["capabilities"]
        assert body["capabilities"] == everything and body["capabilities"]["tools"] == {"listChanged": True}
        assert body["capabilities"]["resources"] == {"subscribe": True, "listChanged": True}
        assert "desktop application Demo" in body["instructions"]
        # A session belongs to the path it started at: it cannot change scope (nor leave it).
        session = {"mcp-session-id": ok.headers["mcp-session-id"], **POST}
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        assert (await http.post(scope_url(info, "Demo"), json=listing, headers=session)).status_code == 200
        for elsewhere in (base, base + "/discovery", scope_url(info, "Other")):
            moved = await http.post(elsewhere, json=listing, headers=session)
            assert moved.status_code == 404, elsewhere
        full = await http.post(base, json=INIT, headers=POST)
        moved_in = {"mcp-session-id": full.headers["mcp-session-id"], **POST}
        assert (await http.post(scope_url(info, "Demo"), json=listing, headers=moved_in)).status_code == 404
        # Host and Origin rules are the same as /mcp's.
        assert (await http.post(scope_url(info, "Demo"), json=INIT, headers={**POST, "origin": "https://evil.example"})
                ).status_code == 403
        assert (await http.post(scope_url(info, "Demo"), json=INIT, headers={**POST, "host": "evil.example"})
                ).status_code == 421


async def test_bad_app_names_at_agent_connect_are_refused_clearly(tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "home") as info:
        for fields, says in [
            ({"app": "../etc"}, "not an app label"), ({"app": "x" * 65}, "at most 64"), ({"app": ""}, "name the app"),
            ({"app": "Demo", "discovery": True}, "cannot be combined"),
            ({"app": "Demo", "code": True}, "cannot be combined"),
        ]:
            conn = await RawApp.connect(info.port)
            await conn.send(encode_message(AgentConnect(token=info.token, **fields)))
            reply = await conn.recv()
            assert (reply["type"], reply["code"], reply["fatal"]) == ("error", "invalid_agent_connect", True), fields
            assert says in reply["message"], fields
            assert await conn.closed()
            await conn.aclose()
        conn = await RawApp.connect(info.port)  # the wrong type: refused like any malformed first line
        await conn.send(json.dumps({"type": "agentConnect", "token": info.token, "app": 5}).encode() + b"\n")
        reply = await conn.recv()
        assert reply["type"] == "error" and reply["fatal"] is True
        await conn.aclose()
        conn = await RawApp.connect(info.port)  # and the daemon goes on serving good ones
        await conn.send(encode_message(AgentConnect(token=info.token, app="Demo")))
        assert (await conn.recv())["type"] == "agentConnected"
        await conn.aclose()


@pytest.mark.parametrize(("args", "says"), [
    (["--app", "../x"], "not an app label"),
    (["--app", "y" * 65], "at most 64"),
    (["--app", "Demo", "--discovery"], "cannot be combined"),
    (["--app", "Demo", "--code"], "cannot be combined"),
])
def test_stdio_refuses_a_bad_app_before_connecting(tmp_path: Path, args: list[str], says: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "broker", "stdio", "--home", str(tmp_path / "home"), "--no-start", *args],
        input=b"", capture_output=True, timeout=60, env={**relay_env(), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 2
    assert says in done.stderr.decode() and done.stdout == b""
    assert not (tmp_path / "home" / "runtime.json").exists()


async def test_an_agent_token_scoped_to_an_app_opens_only_that_apps_scope(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with running_daemon(home) as info:
        demo_only = tokens.issue(home, "demo-agent", ["agent:Demo*"])
        full = tokens.issue(home, "agent", ["agent"])
        app_token = tokens.issue(home, "demo-app", ["app:Demo"])
        async with http_client(info) as http:

            async def status(url: str, secret: str) -> int:
                reply = await http.post(url, json=INIT, headers={**POST, "authorization": f"Bearer {secret}"})
                if reply.status_code == 403:
                    assert "may not connect agents" in reply.json()["error"]["message"]
                return reply.status_code

            base = mcp_url(info)
            assert await status(scope_url(info, "Demo"), demo_only) == 200
            assert await status(scope_url(info, "Demo_2"), demo_only) == 200  # the pattern's other copies
            for url in (base, base + "/discovery", base + "/code", scope_url(info, "Other"), scope_url(info, "demo")):
                assert await status(url, demo_only) == 403, url
            assert await status(scope_url(info, "Other"), full) == 200  # plain agent: any scope
            assert await status(scope_url(info, "Demo"), app_token) == 403  # an app's token connects no agents

        for secret, app, expected in [(demo_only, "Demo", "agentConnected"), (demo_only, None, "forbidden"),
                                      (demo_only, "Other", "forbidden"), (full, "Other", "agentConnected"),
                                      (app_token, "Demo", "forbidden")]:
            conn = await RawApp.connect(info.port)
            await conn.send(encode_message(AgentConnect(token=secret, app=app)))
            reply = await conn.recv()
            assert reply.get("code", reply["type"]) == expected, (app, expected)
            await conn.aclose()


def test_agent_scopes_parse_and_match() -> None:
    grant = tokens.Grant("t", (tokens.parse_scope("agent:Watch*"),), "x")
    assert not grant.allows_agent and not grant.allows_agent_to(None)
    assert grant.allows_agent_to("WatchTower") and grant.allows_agent_to("WatchTower_2")
    assert not grant.allows_agent_to("watchtower") and not grant.allows_agent_to("Other")
    assert grant.describe() == "agent:Watch*"
    plain = tokens.Grant("p", (tokens.parse_scope("agent"),), "y")
    assert plain.allows_agent and plain.allows_agent_to("Anything") and plain.describe() == "agent"
    with pytest.raises(tokens.TokenError):
        tokens.parse_scope("agent:")


# --- the session: list_changed only for its own app -----------------------------------------

def rpc(payload: dict[str, Any]) -> Any:
    return parse_message(json.dumps({"jsonrpc": "2.0", **payload}))


def add_app(core: BrokerCore, name: str, tools: list[str]) -> Any:
    instance, _ = core.registry.register(
        object(),  # type: ignore[arg-type]  # the registry only keeps the link
        app_name=name, instance_id=None, tools=[ToolSpec(t, t, OBJECT) for t in tools], max_concurrency=1,
        app_version=None,
    )
    return instance


@pytest.mark.parametrize("modern", [False, True])
async def test_a_scope_hears_only_of_its_own_apps_changes(
    tmp_path: Path, modern: bool, autojump_clock: trio.testing.MockClock
) -> None:
    core = BrokerCore(Settings(home=tmp_path), "secret")
    server = McpServer.of(core)
    outbox = Outbox()
    async with open_session(server, transport="stdio", label="t", notify=outbox, app="Writer") as session:
        if modern:
            listen = {"id": "l", "method": "subscriptions/listen",
                      "params": {"notifications": {"toolsListChanged": True}, "_meta": MODERN_META}}
            await session.handle(rpc(listen), outbox)
            assert (await outbox.next())["params"]["notifications"] == {"toolsListChanged": True}
        else:
            await session.handle(rpc({"id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}),
                                 outbox)
            assert (await outbox.next())["result"]["capabilities"]["tools"]["listChanged"] is True
            await session.handle(rpc({"method": "notifications/initialized"}), outbox)
        meta = {"_meta": MODERN_META} if modern else {}

        other = add_app(core, "Reader", ["open"])
        await trio.sleep(1)  # virtual: well past the coalescing delay
        assert outbox.empty()  # another app came: nothing for this scope
        writer = add_app(core, "Writer", ["export_pdf"])
        assert (await outbox.next())["method"] == "notifications/tools/list_changed"
        await session.handle(rpc({"id": 2, "method": "tools/list", "params": meta}), outbox)
        assert [t["name"] for t in (await outbox.next())["result"]["tools"]] == ["export_pdf"]

        core.registry.add_tools(other, [ToolSpec("close", "close", OBJECT)])
        await trio.sleep(1)
        assert outbox.empty()  # the other app changed its tools: still nothing
        core.registry.add_tools(writer, [ToolSpec("print", "print", OBJECT)])
        assert (await outbox.next())["method"] == "notifications/tools/list_changed"
        core.registry.unlink(writer, writer.link)
        assert core.registry.expire(writer)
        assert (await outbox.next())["method"] == "notifications/tools/list_changed"
        await session.handle(rpc({"id": 3, "method": "tools/list", "params": meta}), outbox)
        assert (await outbox.next())["result"]["tools"] == []
        session.close()


async def test_a_scope_lists_in_pages_by_own_name(tmp_path: Path) -> None:
    core = BrokerCore(Settings(home=tmp_path), "secret")
    server = McpServer.of(core, page_size=2)
    add_app(core, "Writer", ["c.tool", "a tool", "b_tool"])
    add_app(core, "Reader", ["a", "b"])
    outbox = Outbox()
    async with open_session(server, transport="http", stateful=False, app="Writer") as session:
        listed: list[str] = []
        cursor: str | None = None
        for request_id in (1, 2):
            params: dict[str, Any] = {"_meta": MODERN_META, **({"cursor": cursor} if cursor else {})}
            await session.handle(rpc({"id": request_id, "method": "tools/list", "params": params}), outbox)
            result = (await outbox.next())["result"]
            listed += [tool["name"] for tool in result["tools"]]
            cursor = result.get("nextCursor")
        assert listed == ["a tool", "b_tool", "c.tool"] and cursor is None
        session.close()


# --- resources and prompts: the scope's own app's, under its own URIs and names ---------------


def resource_apps(info: DaemonInfo, demo_name: str = "Demo", note: str = "v1") -> tuple[Any, Any, dict[str, list[str]]]:
    """Two app_client apps with resources and prompts: ``Demo`` (the scope's) and ``Vault`` (not).
    The dict records what each app's handlers were asked for."""
    from app_client import App

    asked: dict[str, list[str]] = {"Demo": [], "Vault": []}
    vault = App("Vault", host="127.0.0.1", port=info.port, token=info.token)

    @vault.resource("vault://secret", mime_type="text/plain")
    def secret() -> str:
        asked["Vault"].append("vault://secret")
        return "the combination"

    @vault.resource_template("notes://doc/{name}")  # the same template as Demo's: still Vault's alone
    def vault_doc(name: str) -> str:
        asked["Vault"].append(f"notes://doc/{name}")
        return "vault doc"

    @vault.prompt(description="Unlock the vault")
    def unlock() -> str:
        asked["Vault"].append("unlock")
        return "unlock it"

    demo = App(demo_name, host="127.0.0.1", port=info.port, token=info.token)

    @demo.tool
    async def echo(text: str) -> str:
        """Echo the text."""
        return text

    @demo.resource("notes://readme", mime_type="text/plain", description="Read me")
    def readme() -> str:
        asked["Demo"].append("notes://readme")
        return f"hello from Demo {note}"

    @demo.resource("notes://logo.png", mime_type="image/png")
    def logo() -> bytes:
        asked["Demo"].append("notes://logo.png")
        return b"\x89PNG"

    @demo.resource_template("notes://doc/{name}", mime_type="text/markdown")
    def doc(name: str) -> str:
        asked["Demo"].append(f"notes://doc/{name}")
        return f"# {name}"

    @demo.prompt(description="Summarize a topic")
    def summarize(topic: str) -> str:
        asked["Demo"].append("summarize")
        return f"Summarize {topic}"

    return demo, vault, asked


def uris_of(listed: types.ListResourcesResult) -> list[str]:
    return [str(resource.uri) for resource in listed.resources]


@pytest.mark.filterwarnings("ignore:resources/.*subscribe is removed:mcp.shared.exceptions.MCPDeprecationWarning")
@pytest.mark.parametrize(("transport", "mode"), COMBOS)
async def test_a_scope_offers_its_apps_resources_and_prompts_under_own_names(
    tmp_path: Path, transport: str, mode: str
) -> None:
    """The scope lists, reads, subscribes to and renders its app's resources and prompts under the
    app's own URIs and names; another app's are invisible and unreachable by any spelling."""
    home = tmp_path / "home"
    updates: list[str] = []
    got = trio.Event()

    async def on_message(message: Any) -> None:
        # In auto mode the SDK hands the listen stream's notifications here too: count those once.
        if isinstance(message, types.ResourceUpdatedNotification) and mode == "legacy":
            updates.append(str(message.params.uri))
            got.set()

    async with running_daemon(home, call_log_flush_interval=0.05) as info:
        demo, vault, asked = resource_apps(info)
        async with vault.connected(timeout=10), demo.connected(timeout=10):
            async with connect_agent(transport, mode, info, home, app="Demo", message_handler=on_message) as client:
                capabilities = client.server_capabilities
                assert capabilities.resources is not None and capabilities.resources.subscribe is True
                assert capabilities.resources.list_changed is True
                assert capabilities.prompts is not None and capabilities.prompts.list_changed is True
                assert names_of(await client.list_tools()) == ["echo"]
                assert uris_of(await client.list_resources()) == ["notes://logo.png", "notes://readme"]
                templates = (await client.list_resource_templates()).resource_templates
                assert [(t.uri_template, t.name) for t in templates] == [("notes://doc/{name}", "doc")]
                text = (await client.read_resource("notes://readme")).contents[0]
                assert isinstance(text, types.TextResourceContents) and text.text == "hello from Demo v1"
                assert str(text.uri) == "notes://readme"
                blob = (await client.read_resource("notes://logo.png")).contents[0]
                assert isinstance(blob, types.BlobResourceContents) and blob.mime_type == "image/png"
                md = (await client.read_resource("notes://doc/plan")).contents[0]
                assert isinstance(md, types.TextResourceContents) and md.text == "# plan"

                # Another app's resources, by every spelling: its own URI, the toolbridge:// form
                # (its label or this app's), traversal through this app's template.
                for uri, why in [
                    ("vault://secret", "offers no such resource"),
                    ("toolbridge://Vault/vault://secret", "offers no such resource"),
                    ("toolbridge://Demo/notes://readme", "offers no such resource"),
                    ("toolbridge://Demo/vault://secret", "offers no such resource"),
                    ("notes://doc/..", "'..'"), ("notes://doc/%2e%2e", "'..'"),
                    ("notes://doc/../../vault://secret", "offers no such resource"),
                    ("notes://readme/../../vault://secret", "offers no such resource"),
                ]:
                    with pytest.raises(MCPError) as refused:
                        await client.read_resource(uri)
                    assert why in refused.value.error.message, (uri, refused.value.error.message)
                    assert "combination" not in refused.value.error.message

                prompts = (await client.list_prompts()).prompts
                assert [(p.name, p.description) for p in prompts] == [("summarize", "Summarize a topic")]
                rendered = await client.get_prompt("summarize", {"topic": "rust"})
                message = rendered.messages[0].content
                assert isinstance(message, types.TextContent) and message.text == "Summarize rust"
                for name in ("unlock", "Vault__unlock", "Demo__summarize"):
                    with pytest.raises(MCPError, match="has no prompt by that name"):
                        await client.get_prompt(name)
                with pytest.raises(MCPError, match="missing topic"):
                    await client.get_prompt("summarize")

                # Updates: by the app's own URI; another app's (even of a URI spelled alike) never.
                if mode == "legacy":
                    await client.session.subscribe_resource("notes://readme")
                    with pytest.raises(MCPError, match="offers no such resource"):
                        await client.session.subscribe_resource("vault://secret")
                    vault.resource_updated("notes://doc/x")
                    vault.resource_updated("vault://secret")
                    demo.resource_updated("notes://readme")
                    with trio.fail_after(10):
                        await got.wait()
                else:
                    async with client.listen(resource_subscriptions=["notes://readme", "vault://secret",
                                                                     "notes://doc/x"]) as subscription:
                        vault.resource_updated("notes://doc/x")
                        vault.resource_updated("vault://secret")
                        demo.resource_updated("notes://readme")
                        with trio.fail_after(10):
                            async for event in subscription:
                                updates.append(str(getattr(event, "uri", None)))
                                break
                assert updates == ["notes://readme"]
        assert asked["Vault"] == []  # nothing reached the other app
        assert asked["Demo"] == ["notes://readme", "notes://logo.png", "notes://doc/plan", "summarize"]
        # The call log names them as /mcp does: agent-facing URIs and prompt names.
        assert info.core.call_log is not None
        with trio.fail_after(10):
            await info.core.call_log.wait_written(3 + 8 + 1 + 4)
        with sqlite3.connect(f"file:{home / 'calls.sqlite3'}?mode=ro", uri=True) as db:
            rows = db.execute("select tool, arguments from calls where error_kind is null or error_kind = 'ok' "
                              "order by id").fetchall()
        db.close()
        assert [(tool, json.loads(arguments)) for tool, arguments in rows if tool != "Demo__echo"] == [
            ("resource_read", {"uri": "toolbridge://Demo/notes://readme"}),
            ("resource_read", {"uri": "toolbridge://Demo/notes://logo.png"}),
            ("resource_read", {"uri": "toolbridge://Demo/notes://doc/plan"}),
            ("prompt_get", {"name": "Demo__summarize"}),
        ]


class NotesApp(ScriptedApp):
    """A raw-socket app (so that it can quit without ``goodbye``, as a crash does) with one
    resource and one prompt; a read answers with ``note``."""

    def __init__(self, port: int, token: str, note: str) -> None:
        super().__init__(port, token, "Demo", tools=[ToolSpec("one", "", OBJECT)])
        self.note = note

    def _register(self) -> Register:
        return Register(app_name="Demo", token=self.token, protocol_version=2, tools=self.tools,
                        resources=[ResourceSpec("notes://readme", "readme")], prompts=[PromptSpec("hello")])

    async def _handle(self, message: Any) -> bool:
        if not isinstance(message, ResourceRead):
            return False
        await self.send(ResourceResponse(message.correlation_id,
                                         contents=[{"uri": message.uri, "text": self.note}]))
        return True


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_restarted_app_keeps_its_resources_in_its_scope(tmp_path: Path, mode: str) -> None:
    """A new process of the app (Demo_2 while Demo waits out its grace) serves the scope Demo's
    resources and prompts, under the same own URIs."""
    home = tmp_path / "home"
    async with running_daemon(home, reconnect_grace=30) as info, trio.open_nursery() as nursery:
        async with connect_agent("http", mode, info, home, app="Demo") as client:
            old = await NotesApp(info.port, info.token, "old").start(nursery)
            text = (await client.read_resource("notes://readme")).contents[0]
            assert isinstance(text, types.TextResourceContents) and text.text == "old"
            await old.close()  # no goodbye: its instance waits out the grace
            new = await NotesApp(info.port, info.token, "new").start(nursery)
            assert new.registered is not None and new.registered.app_label == "Demo_2"
            assert any(i.label == "Demo" and i.link is None for i in info.core.registry.instances())
            assert uris_of(await client.list_resources()) == ["notes://readme"]
            text = (await client.read_resource("notes://readme")).contents[0]
            assert isinstance(text, types.TextResourceContents) and text.text == "new"
            assert [p.name for p in (await client.list_prompts()).prompts] == ["hello"]
            await new.close()


async def test_an_agent_token_scoped_to_an_app_reaches_only_that_apps_resources(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with running_daemon(home) as info:
        demo_only = tokens.issue(home, "demo-agent", ["agent:Demo*"])
        demo, vault, asked = resource_apps(info)
        async with vault.connected(timeout=10), demo.connected(timeout=10):
            async with http_client(info, Authorization=f"Bearer {demo_only}") as http:
                async with Client(streamable_http_client(scope_url(info, "Demo"), http_client=http)) as client:
                    assert uris_of(await client.list_resources()) == ["notes://logo.png", "notes://readme"]
                    for uri in ("vault://secret", "toolbridge://Vault/vault://secret"):
                        with pytest.raises(MCPError, match="offers no such resource"):
                            await client.read_resource(uri)
                    assert [p.name for p in (await client.list_prompts()).prompts] == ["summarize"]
                    with pytest.raises(MCPError, match="has no prompt"):
                        await client.get_prompt("Vault__unlock")
                for url in (mcp_url(info), scope_url(info, "Vault")):  # and /mcp (every app's) stays closed
                    reply = await http.post(url, json=INIT, headers=POST)
                    assert reply.status_code == 403, url
        assert asked["Vault"] == []


class FakePort:
    async def read_resource(self, uri: str, timeout: float) -> list[dict[str, Any]]:
        return [{"uri": uri, "text": "x"}]

    async def get_prompt(self, name: str, arguments: dict[str, str], timeout: float) -> dict[str, Any]:
        return {"messages": []}


@pytest.mark.parametrize("modern", [False, True])
async def test_a_scope_hears_only_of_its_own_apps_resource_and_prompt_changes(
    tmp_path: Path, modern: bool, autojump_clock: trio.testing.MockClock
) -> None:
    core = BrokerCore(Settings(home=tmp_path), "secret")
    server = McpServer.of(core)
    directory = core.registry.resources
    outbox = Outbox()
    resource_changed = "notifications/resources/list_changed"
    prompts_changed = "notifications/prompts/list_changed"
    async with open_session(server, transport="stdio", label="t", notify=outbox, app="Writer") as session:
        if modern:
            listen = {"id": "l", "method": "subscriptions/listen", "params": {
                "notifications": {"toolsListChanged": True, "resourcesListChanged": True, "promptsListChanged": True,
                                  "resourceSubscriptions": ["doc://a"]}, "_meta": MODERN_META}}
            await session.handle(rpc(listen), outbox)
            assert (await outbox.next())["params"]["notifications"] == {
                "toolsListChanged": True, "resourcesListChanged": True, "promptsListChanged": True,
                "resourceSubscriptions": ["doc://a"]}
        else:
            await session.handle(rpc({"id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}),
                                 outbox)
            capabilities = (await outbox.next())["result"]["capabilities"]
            assert capabilities["resources"] == {"subscribe": True, "listChanged": True}
            assert capabilities["prompts"] == {"listChanged": True}
            await session.handle(rpc({"method": "notifications/initialized"}), outbox)
        meta = {"_meta": MODERN_META} if modern else {}

        reader = add_app(core, "Reader", ["open"])
        reader_port = FakePort()
        directory.offer(reader.label, reader_port, [ResourceSpec("doc://a", "a")], [])
        directory.offer_prompts(reader.label, reader_port, [PromptSpec("p")])
        await trio.sleep(1)  # virtual: well past the coalescing delay
        assert outbox.empty()  # another app's resources and prompts: nothing for this scope
        writer = add_app(core, "Writer", ["export_pdf"])
        assert (await outbox.next())["method"] == "notifications/tools/list_changed"
        port = FakePort()
        directory.offer(writer.label, port, [ResourceSpec("doc://a", "a")], [])
        assert (await outbox.next())["method"] == resource_changed
        directory.offer_prompts(writer.label, port, [PromptSpec("p")])
        assert (await outbox.next())["method"] == prompts_changed
        await session.handle(rpc({"id": 2, "method": "resources/list", "params": meta}), outbox)
        assert [r["uri"] for r in (await outbox.next())["result"]["resources"]] == ["doc://a"]
        await session.handle(rpc({"id": 3, "method": "prompts/list", "params": meta}), outbox)
        assert [p["name"] for p in (await outbox.next())["result"]["prompts"]] == ["p"]

        directory.updated(reader.label, "doc://a")  # the other app's doc://a
        directory.offer(reader.label, reader_port, [ResourceSpec("doc://b", "b")], [])
        await trio.sleep(1)
        assert outbox.empty()
        if not modern:
            await session.handle(rpc({"id": 4, "method": "resources/subscribe", "params": {"uri": "doc://a"}}), outbox)
            assert (await outbox.next())["result"] == {}
        directory.updated(writer.label, "doc://a")
        assert (await outbox.next())["params"]["uri"] == "doc://a"
        directory.offer(writer.label, port, [ResourceSpec("doc://a", "a")], [])  # the same list again: nothing
        await trio.sleep(1)
        assert outbox.empty()
        directory.withdraw(writer.label, port)
        assert {(await outbox.next())["method"], (await outbox.next())["method"]} == {resource_changed,
                                                                                     prompts_changed}
        session.close()
