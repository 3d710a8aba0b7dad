"""Federation end to end: brokers uplinked into brokers, an app under the deepest, the MCP SDK at the top.

Three daemons run in this trio loop with separate homes and ports: ``top`` (MCP over HTTP),
``mid`` uplinked into it as ``mid``, and ``desk`` uplinked into ``mid`` as ``desk``. The scripted
app ``Demo`` registers with ``desk``; agents at the top see its tools as ``mid__desk__Demo__*``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from broker.config import tokens
from app_client import ToolContext
from fedkit import Daemon, start_daemon, tool_names, wait_until
from mcp_testkit import HTTPX_STREAM_WARNINGS, PNG_B64, ScriptedApp, http_client, mcp_url

pytestmark = [pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS]

PREFIX = "mid__desk__Demo__"


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


@asynccontextmanager
async def three_brokers(tmp_path: Path, nursery: trio.Nursery, **top_settings: Any) -> AsyncIterator[tuple[Daemon, Daemon, Daemon]]:
    top = await start_daemon(nursery, tmp_path / "top", http_port=0, **top_settings)
    mid = await start_daemon(nursery, tmp_path / "mid", uplink=top.address, uplink_name="mid", uplink_token=top.token)
    desk = await start_daemon(nursery, tmp_path / "desk", uplink=mid.address, uplink_name="desk", uplink_token=mid.token)
    try:
        yield top, mid, desk
    finally:
        for daemon in (desk, mid, top):
            daemon.shutdown.set()


@asynccontextmanager
async def agent(top: Daemon, mode: str = "auto", **kwargs: Any) -> AsyncIterator[Client]:
    async with http_client(top.info) as http:
        async with Client(streamable_http_client(mcp_url(top.info), http_client=http), mode=mode, **kwargs) as client:
            yield client


async def test_three_hops_list_call_error_progress(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery, three_brokers(tmp_path, nursery) as (top, mid, desk):
        app = await ScriptedApp(desk.port, desk.token).start(nursery)
        await wait_until(top.core, lambda: PREFIX + "echo" in tool_names(top.core))
        async with agent(top) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert set(listed) == {PREFIX + spec.name for spec in app.tools}
            assert listed[PREFIX + "text"].annotations is not None
            assert listed[PREFIX + "text"].annotations.read_only_hint is True
            assert listed[PREFIX + "echo"].input_schema["properties"]["text"]["type"] == "string"

            ok = await client.call_tool(PREFIX + "echo", {"text": "hi"})
            assert (ok.is_error, ok.structured_content) == (False, {"echo": {"text": "hi"}})

            image = await client.call_tool(PREFIX + "image", {})
            assert [block.type for block in image.content] == ["text", "image"]
            assert isinstance(image.content[1], types.ImageContent) and image.content[1].data == PNG_B64

            failed = await client.call_tool(PREFIX + "fail", {})
            assert failed.is_error and "disk is full" in text_of(failed)

            invalid = await client.call_tool(PREFIX + "echo", {"text": 5})  # checked at the top already
            assert invalid.is_error and "text" in text_of(invalid)

            seen: list[tuple[float, float | None, str | None]] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                seen.append((progress, total, message))

            done = await client.call_tool(PREFIX + "progress", {}, progress_callback=on_progress)
            assert text_of(done) == "done"
            assert seen == [(1, 2, "step 1"), (2, 2, "step 2")]
            assert app.invocations[-1].progress is True
        # Each hop audited the call in its own pipeline; nothing is left in flight anywhere.
        assert all(len(d.core.calls) == 0 for d in (top, mid, desk))
        assert desk.core.status()["upstream"] == [mid.core.broker_id, top.core.broker_id]
        await app.close()


async def test_the_budget_shrinks_per_hop_and_the_nearest_error_wins(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery, three_brokers(tmp_path, nursery) as (top, mid, desk):
        app = await ScriptedApp(desk.port, desk.token).start(nursery)
        await wait_until(top.core, lambda: PREFIX + "slow" in tool_names(top.core))
        async with agent(top) as client:
            result = await client.call_tool(PREFIX + "slow", {}, meta={"toolbridge/timeoutMs": 2500})
        assert result.is_error
        message = text_of(result)
        # The deepest broker timed out first, and said so, before either deadline above it.
        assert message.startswith("at hop 'desk': Demo__slow timed out after"), message
        assert (result.meta or {}).get("toolbridge/errorKind") == "timeout"  # the kind survives the hops
        slow = next(i for i in app.invocations if i.tool == "slow")
        assert slow.timeout_ms is not None and slow.timeout_ms <= 1600  # 2.5 s, minus two hop margins
        await app.until(lambda: len(app.cancels) == 1)
        assert app.cancels[0].correlation_id == slow.correlation_id
        await app.close()


async def test_cancellation_reaches_the_app_through_every_hop(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery, three_brokers(tmp_path, nursery) as (top, mid, desk):
        app = await ScriptedApp(desk.port, desk.token).start(nursery)
        await wait_until(top.core, lambda: PREFIX + "slow" in tool_names(top.core))
        async with agent(top, mode="legacy") as client:
            async with trio.open_nursery() as calls:
                scope = trio.CancelScope()

                async def call() -> None:
                    with scope:
                        await client.call_tool(PREFIX + "slow", {})

                calls.start_soon(call)
                await app.until(lambda: any(i.tool == "slow" for i in app.invocations))
                scope.cancel()
            await app.until(lambda: len(app.cancels) == 1)
            assert text_of(await client.call_tool(PREFIX + "text", {})) == "just text"
        await wait_until(top.core, lambda: all(len(d.core.calls) == 0 for d in (top, mid, desk)))
        await app.close()


async def test_an_app_joining_below_is_announced_at_the_top(tmp_path: Path) -> None:
    changed = trio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with trio.open_nursery() as nursery, three_brokers(tmp_path, nursery) as (top, mid, desk):
        app = await ScriptedApp(desk.port, desk.token).start(nursery)
        await wait_until(top.core, lambda: PREFIX + "echo" in tool_names(top.core))
        async with agent(top, mode="legacy", message_handler=on_message) as client:
            before = {tool.name for tool in (await client.list_tools()).tools}
            other = await ScriptedApp(desk.port, desk.token, "Other").start(nursery)
            with trio.fail_after(10):
                await changed.wait()
            await wait_until(top.core, lambda: len(tool_names(top.core)) == 2 * len(app.tools))
            after = {tool.name for tool in (await client.list_tools()).tools}
            assert after - before == {f"mid__desk__Other__{spec.name}" for spec in other.tools}
            assert text_of(await client.call_tool("mid__desk__Other__text", {})) == "just text"
            await other.close()
        await app.close()


async def test_a_broker_killed_mid_call_fails_the_call_at_once_and_comes_back(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        top = await start_daemon(nursery, tmp_path / "top", reconnect_grace=0.5)
        desk = await start_daemon(nursery, tmp_path / "desk", uplink=top.address, uplink_name="desk",
                                  uplink_token=top.token)
        app = await ScriptedApp(desk.port, desk.token).start(nursery)
        await wait_until(top.core, lambda: "desk__Demo__slow" in tool_names(top.core))
        outcome: list[Any] = []

        async def call() -> None:
            outcome.append(await top.core.router.call_tool("desk__Demo__slow", {}, timeout=30))

        started = trio.current_time()
        nursery.start_soon(call)
        await app.until(lambda: any(i.tool == "slow" for i in app.invocations))
        desk.kill()
        await wait_until(top.core, lambda: bool(outcome))
        assert trio.current_time() - started < 10
        assert outcome[0].kind == "app_disconnected"
        # Its tools go after the grace period.
        await wait_until(top.core, lambda: not tool_names(top.core))

        # The parent restarts on the same port: a child reconnects by itself.
        port = top.port
        await top.stop()
        top = await start_daemon(nursery, tmp_path / "top", port=port)
        desk = await start_daemon(nursery, tmp_path / "desk", uplink=top.address, uplink_name="desk",
                                  uplink_token=top.token)
        await app.close()
        app = await ScriptedApp(desk.port, desk.token).start(nursery)
        await wait_until(top.core, lambda: "desk__Demo__echo" in tool_names(top.core))
        await top.stop()
        top = await start_daemon(nursery, tmp_path / "top", port=port)
        await wait_until(top.core, lambda: "desk__Demo__echo" in tool_names(top.core), timeout=15)
        ok = await top.core.router.call_tool("desk__Demo__echo", {"text": "back"})
        assert ok.kind == "ok"
        await app.close()
        desk.shutdown.set()
        top.shutdown.set()


async def test_a_child_process_killed_with_sigkill(tmp_path: Path) -> None:
    """The CLI flags end to end, then ``kill -9`` of the child broker while a call runs."""
    async with trio.open_nursery() as nursery:
        top = await start_daemon(nursery, tmp_path / "top")
        secret = tokens.issue(top.home, "desk", ["uplink"])
        token_file = tmp_path / "uplink-token"
        token_file.write_text(secret + "\n")
        child_home = tmp_path / "desk"
        env = {**os.environ, "TOOLBRIDGE_LOG_FORMAT": "json"}
        process = subprocess.Popen(
            [sys.executable, "-m", "broker", "serve", "--home", str(child_home), "--port", "0", "--no-http",
             "--uplink", top.address, "--uplink-name", "desk", "--uplink-token-file", str(token_file)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            with trio.fail_after(20):
                # Polled: the child daemon is another process; its runtime.json is its signal.
                while not (child_home / "runtime.json").exists():
                    await trio.sleep(0.05)
            from app_client.discovery import find_daemon

            address = find_daemon(home=child_home)
            app = await ScriptedApp(address.port, address.token).start(nursery)
            await wait_until(top.core, lambda: "desk__Demo__slow" in tool_names(top.core), timeout=15)
            outcome: list[Any] = []

            async def call() -> None:
                outcome.append(await top.core.router.call_tool("desk__Demo__slow", {}, timeout=30))

            nursery.start_soon(call)
            await app.until(lambda: any(i.tool == "slow" for i in app.invocations))
            started = trio.current_time()
            process.send_signal(signal.SIGKILL)
            await wait_until(top.core, lambda: bool(outcome))
            assert trio.current_time() - started < 5
            assert outcome[0].kind == "app_disconnected"
            assert "desk" in outcome[0].message
            await app.close()
        finally:
            process.kill()
            process.wait()
        top.shutdown.set()


async def test_a_tool_missing_at_a_hop_says_which_hop(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery, three_brokers(tmp_path, nursery) as (top, mid, desk):
        app = await ScriptedApp(desk.port, desk.token).start(nursery)
        await wait_until(top.core, lambda: PREFIX + "echo" in tool_names(top.core))
        # What a parent sends when its list is a moment behind: a name this hop no longer has.
        ctx = ToolContext(correlation_id=1, tool="Gone__echo", timeout_ms=5000, deadline=trio.current_time() + 5)
        result = await desk.core.uplink.relay({}, ctx)
        assert result.success is False
        assert result.error.startswith("at hop 'desk': unknown tool 'Gone__echo'")
        # A failure of the pipeline at a middle hop names that hop; the app's own words pass as they are.
        ctx = ToolContext(correlation_id=2, tool="desk__Demo__echo", timeout_ms=5000, deadline=trio.current_time() + 5)
        invalid = await mid.core.uplink.relay({"text": 5}, ctx)
        assert invalid.error.startswith("at hop 'mid': invalid arguments for desk__Demo__echo")
        ctx = ToolContext(correlation_id=3, tool="desk__Demo__fail", timeout_ms=5000, deadline=trio.current_time() + 5)
        failed = await mid.core.uplink.relay({}, ctx)
        assert failed.error == "the disk is full; free some space and retry"
        await app.close()
