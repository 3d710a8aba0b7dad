"""End to end: the official MCP SDK client against the real daemon and a real app.

Every test runs over both transports (Streamable HTTP in-process; stdio through a
``toolbridge stdio`` subprocess) and in both of the SDK's modes: ``legacy`` (the initialize
handshake, 2025-11-25) and its default ``auto`` (which negotiates 2026-07-28).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import Client, MCPError

from broker.daemon.run import DaemonInfo
from mcp_testkit import HTTPX_STREAM_WARNINGS, PNG_B64, ScriptedApp, connect_agent, daemon_app_agent, running_daemon

pytestmark = [pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS]

COMBOS = [("http", "legacy"), ("http", "auto"), ("stdio", "legacy"), ("stdio", "auto")]
EXPECTED_VERSION = {"legacy": "2025-11-25", "auto": "2026-07-28"}


connect = connect_agent


@asynccontextmanager
async def setup(tmp_path: Path, transport: str, mode: str, **kwargs: Any) -> AsyncIterator[tuple[DaemonInfo, ScriptedApp, Client]]:
    async with daemon_app_agent(tmp_path, transport, mode, **kwargs) as (info, app, client):
        assert client.protocol_version == EXPECTED_VERSION[mode]
        yield info, app, client


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


@pytest.mark.parametrize(("transport", "mode"), COMBOS)
async def test_list_and_call(tmp_path: Path, transport: str, mode: str) -> None:
    async with setup(tmp_path, transport, mode) as (info, app, client):
        assert client.server_capabilities.tools is not None
        assert client.server_capabilities.tools.list_changed is True
        listed = await client.list_tools()
        names = [tool.name for tool in listed.tools]
        assert names == sorted(names)
        assert names == [f"Demo__{spec.name}" for spec in sorted(app.tools, key=lambda s: s.name)]
        text_tool = next(tool for tool in listed.tools if tool.name == "Demo__text")
        assert text_tool.title == "Plain text"
        assert text_tool.annotations is not None and text_tool.annotations.read_only_hint is True

        ok = await client.call_tool("Demo__echo", {"text": "hi"})
        assert not ok.is_error
        assert ok.structured_content == {"echo": {"text": "hi"}}
        assert '"text":"hi"' in text_of(ok)

        unusual = await client.call_tool("Demo__echo", {"text": " grüße "})  # base64 in Mcp-Param-Text
        assert unusual.structured_content == {"echo": {"text": " grüße "}}

        plain = await client.call_tool("Demo__text", {})
        assert (plain.is_error, text_of(plain)) == (False, "just text")

        failed = await client.call_tool("Demo__fail", {})
        assert failed.is_error
        assert "disk is full" in text_of(failed)

        invalid = await client.call_tool("Demo__echo", {"text": 5})
        assert invalid.is_error and "text" in text_of(invalid)

        timed_out = await client.call_tool("Demo__hang", {})
        assert timed_out.is_error
        assert "timed out after" in text_of(timed_out)

        image = await client.call_tool("Demo__image", {})
        assert not image.is_error
        kinds = [block.type for block in image.content]
        assert kinds == ["text", "image"]
        picture = image.content[1]
        assert isinstance(picture, types.ImageContent)
        assert (picture.data, picture.mime_type) == (PNG_B64, "image/png")

        with pytest.raises(MCPError) as caught:
            await client.call_tool("Demo__nope", {})
        assert caught.value.code == -32602
        assert "Demo__nope" in caught.value.message


@pytest.mark.parametrize(("transport", "mode"), COMBOS)
async def test_progress_reaches_the_client(tmp_path: Path, transport: str, mode: str) -> None:
    async with setup(tmp_path, transport, mode) as (info, app, client):
        seen: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total, message))

        result = await client.call_tool("Demo__progress", {}, progress_callback=on_progress)
        assert text_of(result) == "done"
        assert seen == [(1, 2, "step 1"), (2, 2, "step 2")]
        assert app.invocations[-1].progress is True


@pytest.mark.parametrize(("transport", "mode"), COMBOS)
async def test_cancellation_reaches_the_app(tmp_path: Path, transport: str, mode: str) -> None:
    async with setup(tmp_path, transport, mode) as (info, app, client):
        async with trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def call() -> None:
                with scope:
                    await client.call_tool("Demo__slow", {})
                    raise AssertionError("the call should not have finished")  # pragma: no cover

            nursery.start_soon(call)
            await app.until(lambda: any(i.tool == "slow" for i in app.invocations))
            scope.cancel()
        await app.until(lambda: len(app.cancels) == 1)
        invocation = next(i for i in app.invocations if i.tool == "slow")
        assert app.cancels[0].correlation_id == invocation.correlation_id
        # The session is still good after a cancel.
        assert text_of(await client.call_tool("Demo__text", {})) == "just text"
        assert len(info.core.calls) == 0


@pytest.mark.parametrize(("transport", "mode"), COMBOS)
async def test_app_connecting_mid_session_is_announced(tmp_path: Path, transport: str, mode: str) -> None:
    changed = trio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with setup(tmp_path, transport, mode, message_handler=on_message) as (info, app, client):
        before = {tool.name for tool in (await client.list_tools()).tools}
        async with trio.open_nursery() as nursery:
            if mode == "legacy":
                second = await ScriptedApp(info.port, info.token, "Other").start(nursery)
                with trio.fail_after(10):
                    await changed.wait()
            else:
                async with client.listen(tools_list_changed=True) as subscription:
                    assert subscription.honored.tools_list_changed is True
                    second = await ScriptedApp(info.port, info.token, "Other").start(nursery)
                    with trio.fail_after(10):
                        async for _event in subscription:
                            break
            after = {tool.name for tool in (await client.list_tools()).tools}
            assert after - before == {f"Other__{spec.name}" for spec in second.tools}
            assert text_of(await client.call_tool("Other__text", {})) == "just text"
            await second.close()


async def test_many_agents_at_once_never_get_each_others_answers(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with running_daemon(home) as info, trio.open_nursery() as nursery:
        app = await ScriptedApp(info.port, info.token).start(nursery)
        agents = [("http", "legacy"), ("http", "auto"), ("stdio", "legacy"), ("stdio", "auto")]
        mismatches: list[str] = []

        async def agent(number: int, transport: str, mode: str) -> None:
            async with connect(transport, mode, info, home) as client, trio.open_nursery() as calls:
                for call in range(15):
                    calls.start_soon(one_call, client, f"agent{number}-call{call}")

        async def one_call(client: Client, text: str) -> None:
            result = await client.call_tool("Demo__echo", {"text": text})
            if result.structured_content != {"echo": {"text": text}}:
                mismatches.append(f"{text} got {result.structured_content}")  # pragma: no cover

        async with trio.open_nursery() as everyone:
            for number, (transport, mode) in enumerate(agents):
                everyone.start_soon(agent, number, transport, mode)
        assert mismatches == []
        assert len(app.invocations) == 60
        await app.close()


async def test_a_call_can_ask_for_its_own_deadline(tmp_path: Path) -> None:
    async with setup(tmp_path, "http", "auto") as (info, app, client):
        result = await client.call_tool("Demo__slow", {}, meta={"toolbridge/timeoutMs": 150})
        assert result.is_error
        assert "timed out after 0.15 s" in text_of(result)
        await app.until(lambda: len(app.cancels) == 1)


@pytest.mark.parametrize(("transport", "mode"), COMBOS)
async def test_a_mistyped_tool_name_gets_did_you_mean(tmp_path: Path, transport: str, mode: str) -> None:
    # Issue 30 item 7: typos (a few edits away) as the CLI finds them, not only case and punctuation.
    async with setup(tmp_path, transport, mode) as (info, app, client):
        with pytest.raises(MCPError) as typo:
            await client.call_tool("Demo__ehco", {"text": "x"})
        assert "Did you mean one of: Demo__echo?" in str(typo.value)
        async with connect(transport, mode, info, tmp_path / "home", app="Demo") as scoped:
            with pytest.raises(MCPError) as in_scope:
                await scoped.call_tool("progres", {})
            assert "Did you mean progress?" in str(in_scope.value)
        assert app.invocations == []


def test_the_fuzzy_comparison_is_bounded() -> None:
    from broker.core.names import FUZZY_MAX_CHARS, FUZZY_MAX_NAMES, near_names

    names = [f"App__tool_{i:05d}" for i in range(FUZZY_MAX_NAMES)]
    assert near_names("App__tool_0001x", names, fuzzy=True)[:1] == ["App__tool_00010"]
    # Past the bound only case and punctuation count (the loop's cost stays ~20 ms).
    assert near_names("App__tool_0001x", [*names, "App__extra"], fuzzy=True) == []
    assert near_names("App__TOOL_00010", [*names, "App__extra"], fuzzy=True) == ["App__tool_00010"]
    assert near_names("x" * (FUZZY_MAX_CHARS + 1), ["x" * FUZZY_MAX_CHARS], fuzzy=True) == []
