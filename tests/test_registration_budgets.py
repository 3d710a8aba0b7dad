"""Registration cannot stall the loop or exhaust memory (issue 14, item 3).

Schemas compile in worker threads (the loop keeps serving other apps' calls meanwhile), the
daemon-wide budgets refuse what would break them with clear codes, and nothing the front door
or discovery cached keeps a departed app's tools alive.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from broker.daemon.run import DaemonInfo
from broker.mcp.server import McpServer
from mcp_testkit import HTTPX_STREAM_WARNINGS, ScriptedApp, http_client, mcp_url, running_daemon
from rawapp import ECHO_TOOL, RawApp

pytestmark = [pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS]


def big_tool(number: int, size: int) -> dict[str, Any]:
    """A tool whose schema is about ``size`` bytes and needs the full metaschema check."""
    count = size // 60
    properties = {f"field_{i:05d}": {"type": "string", "minLength": 1, "description": "x" * 8} for i in range(count)}
    return {"name": f"big_{number}", "description": "large", "inputSchema": {"type": "object", "properties": properties}}


def tool(name: str) -> dict[str, Any]:
    return {**ECHO_TOOL, "name": name}


async def test_a_big_registration_does_not_stall_other_apps_calls(tmp_path: Path) -> None:
    """Before: 50 tools x 256 KiB compiled on the loop blocked every call for 10.5 s (here, 10 x 100 KB
    held the loop ~4 s)."""
    async with running_daemon(tmp_path / "home", http_port=None) as info, trio.open_nursery() as nursery:
        probe = await ScriptedApp(info.port, info.token).start(nursery)
        worst = 0.0
        registered = trio.Event()
        calls_done = trio.Event()

        async def call_all_along() -> None:
            nonlocal worst
            last = trio.current_time()
            try:
                while not registered.is_set():  # the worst gap between two answers, pauses included
                    outcome = await info.core.router.call_tool("Demo__echo", {"text": "hi"})
                    assert outcome.kind == "ok"
                    await trio.sleep(0.01)  # paces the probe calls: a load, not a wait for a state
                    now = trio.current_time()
                    worst, last = max(worst, now - last), now
            finally:
                calls_done.set()

        nursery.start_soon(call_all_along)
        big = await RawApp.connect(info.port)
        reply = await big.register(info.token, app_name="Big", tools=[big_tool(n, 100_000) for n in range(8)],
                                 timeout=120)
        assert reply["type"] == "registered", reply
        added = [big_tool(n, 100_000) for n in range(8, 10)]
        await big.send({"type": "addTools", "tools": added})
        assert len((await big.recv_type("toolsUpdated", timeout=120))["toolNames"]) == 10
        registered.set()
        await calls_done.wait()  # the last probe call answered before the probe goes
        assert worst < 0.5, f"calls stopped for {worst:.2f} s behind another app's registration"
        assert info.core.registry.schema_bytes > 10 * 95_000
        await big.aclose()
        await probe.close()


async def test_the_tool_budget_is_daemon_wide(tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "home", http_port=None, max_tools_total=3) as info:
        first = await RawApp.connect(info.port)
        assert (await first.register(info.token, app_name="One", tools=[tool("a"), tool("b")]))["type"] == "registered"
        second = await RawApp.connect(info.port)
        refused = await second.register(info.token, app_name="Two", tools=[tool("a"), tool("b")])
        assert refused["code"] == "tool_budget_exhausted" and refused["fatal"] is True
        assert "max_tools_total" in refused["message"]
        # addTools over the budget is refused too, and the link stays.
        await first.send({"type": "addTools", "tools": [tool("c"), tool("d")]})
        error = await first.recv_type("error")
        assert error["code"] == "tool_budget_exhausted" and not error.get("fatal")
        await first.send({"type": "addTools", "tools": [tool("c")]})
        assert len((await first.recv_type("toolsUpdated"))["toolNames"]) == 3
        await RawApp.close_all()


async def test_the_schema_byte_budget_is_daemon_wide(tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "home", http_port=None, max_schema_bytes_total=150_000) as info:
        first = await RawApp.connect(info.port)
        reply = await first.register(info.token, app_name="One", tools=[big_tool(1, 100_000)], instanceId="one")
        assert reply["type"] == "registered"
        second = await RawApp.connect(info.port)
        refused = await second.register(info.token, app_name="Two", tools=[big_tool(2, 100_000)])
        assert refused["code"] == "schema_budget_exhausted" and "max_schema_bytes_total" in refused["message"]
        # Re-registering the same instance replaces its tools: their bytes do not count twice.
        again = await RawApp.connect(info.port)
        reply = await again.register(info.token, app_name="One", tools=[big_tool(1, 100_000)], instanceId="one")
        assert reply["type"] == "registered"
        assert 100_000 < info.core.registry.schema_bytes < 150_000
        await RawApp.close_all()


async def test_apps_per_token_are_bounded(tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "home", http_port=None, max_apps_per_token=2) as info:
        apps = [await RawApp.connect(info.port) for _ in range(3)]
        for number, app in enumerate(apps[:2]):
            assert (await app.register(info.token, app_name=f"App{number}"))["type"] == "registered"
        refused = await apps[2].register(info.token, app_name="App2")
        assert refused["code"] == "too_many_apps" and "max_apps_per_token" in refused["message"]
        # A reconnect of a registered instance replaces it: not one more app.
        again = await RawApp.connect(info.port)
        await again.send({"type": "register", "appName": "App9", "token": info.token, "tools": [ECHO_TOOL],
                          "instanceId": "x"})
        assert (await again.recv())["code"] == "too_many_apps"
        await RawApp.close_all()


async def wait_for_no_instances(info: DaemonInfo) -> None:
    registry = info.core.registry
    with trio.fail_after(10):
        while registry.instances():
            await registry.wait_changed(registry.version)


async def test_departed_apps_leave_nothing_in_the_caches(tmp_path: Path) -> None:
    """Before: the HTTP front door kept a departed app's encoded tools until the next tools/list."""
    async with running_daemon(tmp_path / "home", reconnect_grace=0.05) as info:
        app = await RawApp.connect(info.port)
        assert (await app.register(info.token, app_name="Gone", tools=[tool("a"), tool("b")]))["type"] == "registered"
        registry = info.core.registry
        refs = [weakref.ref(t) for t in registry.tools()] + [weakref.ref(registry.instances()[0])]
        async with http_client(info) as http:
            async with Client(streamable_http_client(mcp_url(info), http_client=http), mode="legacy") as client:
                listed = await client.list_tools()
                assert {t.name for t in listed.tools} == {"Gone__a", "Gone__b"}
                found = await client.call_tool("search_tools", {"query": "echo arguments"})
                assert not found.is_error
                await app.aclose()
                await wait_for_no_instances(info)
                gc.collect()
                assert [r for r in refs if r() is not None] == []
                [server] = [o for o in gc.get_objects() if isinstance(o, McpServer)]
                assert server._tools is None and len(server._encoded_entries) == 0
                assert server.meta._index is not None and len(server.meta._index) == 0
