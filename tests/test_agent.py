"""broker.agent against the real daemon and a scripted app: results, every error kind as an
exception, progress, cancellation, ``tb.apps``, generated stubs with ``tb`` as their client.

Most tests connect over HTTP (in-process, quick); one runs the same checks through the
``toolbridge stdio`` subprocess, the library's default.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio

from app_client.wire import ToolSpec
from broker.agent import (
    AgentError,
    AppDisconnected,
    ConnectError,
    ConnectionLost,
    Toolbridge,
    ToolAppError,
    ToolBusy,
    ToolCallError,
    ToolGuardRejected,
    ToolInvalidArguments,
    ToolMatch,
    ToolNotFound,
    ToolTimeout,
    connect,
)
from broker.agent._errors import error_from_result, error_from_rpc
from broker.codegen import generate_python, tools_from_registry
from broker.daemon.run import DaemonInfo
from mcp_testkit import DEMO_TOOLS, HTTPX_STREAM_WARNINGS, PNG_B64, ScriptedApp, mcp_url, running_daemon

pytestmark = [pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS]

ECHO_OUT = ToolSpec(
    "echo", "Echo the arguments back",
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    output_schema={"type": "object", "properties": {"echo": {"type": "object"}}, "required": ["echo"]},
)


@asynccontextmanager
async def daemon_and_app(tmp_path: Path, **settings: Any) -> AsyncIterator[tuple[DaemonInfo, ScriptedApp, Path]]:
    home = tmp_path / "home"
    settings.setdefault("reconnect_grace", 0.2)
    async with running_daemon(home, **settings) as info, trio.open_nursery() as nursery:
        app = await ScriptedApp(info.port, info.token).start(nursery)
        yield info, app, home
        await app.close()


async def check_calls_and_errors(tb: Toolbridge, info: DaemonInfo, app: ScriptedApp) -> None:
    # Results: structuredContent, else the JSON/text of one text block, else the blocks.
    assert await tb.call("Demo__echo", {"text": "hi"}) == {"echo": {"text": "hi"}}
    assert await tb.call("Demo__text") == "just text"
    blocks = await tb.call("Demo__image", {})
    assert [block.type for block in blocks] == ["text", "image"]
    assert isinstance(blocks[1], types.ImageContent) and blocks[1].data == PNG_B64

    # Every failure is an exception of its kind, carrying the daemon's message.
    with pytest.raises(ToolNotFound) as unknown:
        await tb.call("Demo__nope", {})
    assert unknown.value.kind == "unknown_tool" and unknown.value.code == -32602
    assert "Demo__nope" in unknown.value.message and unknown.value.tool == "Demo__nope"
    before = len(app.invocations)
    with pytest.raises(ToolInvalidArguments) as invalid:
        await tb.call("Demo__echo", {"text": 5})
    assert invalid.value.kind == "invalid_arguments" and "text" in invalid.value.message
    with pytest.raises(ToolGuardRejected):
        await tb.call("Demo__echo", {"text": "../../etc/passwd"})
    assert len(app.invocations) == before
    with pytest.raises(ToolAppError) as failed:
        await tb.call("Demo__fail")
    assert failed.value.message == "the disk is full; free some space and retry"
    assert failed.value.result is not None and failed.value.result.is_error
    with pytest.raises(ToolTimeout) as late:
        await tb.call("Demo__slow", timeout=0.1)
    assert "timed out after 0.1 s" in late.value.message
    await app.until(lambda: len(app.cancels) == 1)
    with pytest.raises(ToolTimeout):
        await tb.apps.Demo.hang()  # the tool's own 300 ms deadline
    assert isinstance(late.value, ToolCallError)

    # Progress: plain and async callbacks.
    seen: list[tuple[float, float | None, str | None]] = []
    assert await tb.call("Demo__progress", on_progress=lambda *report: seen.append(report)) == "done"

    async def async_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    await tb.call("Demo__progress", on_progress=async_progress)
    assert seen == [(1, 2, "step 1"), (2, 2, "step 2")] * 2

    # tb.apps: named like the generated stubs; keyword or dict arguments.
    assert list(tb.apps) == ["Demo"] and "Demo" in tb.apps
    assert dir(tb.apps.Demo) == sorted(spec.name for spec in DEMO_TOOLS)
    assert await tb.apps.Demo.echo(text="kw") == {"echo": {"text": "kw"}}
    assert await tb.apps.Demo.echo({"text": "dict"}) == {"echo": {"text": "dict"}}
    assert tb.apps.Demo.echo.name == "Demo__echo" and tb.apps.Demo.echo.__doc__ == "Echo the arguments back"
    with pytest.raises(AttributeError, match="connected: Demo"):
        tb.apps.Nope  # noqa: B018
    with pytest.raises(AttributeError, match="has no tool method 'nope'"):
        tb.apps.Demo.nope  # noqa: B018

    # Search, through the daemon's search_tools.
    matches = await tb.search("echo the arguments back", limit=2)
    assert matches[0] == ToolMatch("Demo__echo", "Demo", "Echo the arguments back", DEMO_TOOLS[0].input_schema)
    assert len(matches) <= 2
    with pytest.raises(ToolInvalidArguments):
        await tb.search("anything", limit=0)

    # An app that quits during a call.
    async with trio.open_nursery() as nursery:
        other = await ScriptedApp(info.port, info.token, "Other").start(nursery)
        outcome: list[BaseException] = []

        async def call() -> None:
            try:
                await tb.call("Other__slow")
            except ToolCallError as exc:
                outcome.append(exc)

        nursery.start_soon(call)
        await other.until(lambda: len(other.invocations) == 1)
        await other.close()
    assert isinstance(outcome[0], AppDisconnected)
    assert outcome[0].kind == "app_disconnected"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_over_http(tmp_path: Path, mode: str) -> None:
    async with daemon_and_app(tmp_path) as (info, app, home):
        async with connect(mcp_url(info), token=info.token, mode=mode) as tb:
            assert tb.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
            await check_calls_and_errors(tb, info, app)


async def test_over_stdio_the_default(tmp_path: Path) -> None:
    async with daemon_and_app(tmp_path) as (info, app, home):
        async with connect(home=home, auto_start=False) as tb:
            assert tb.protocol_version == "2026-07-28"
            await check_calls_and_errors(tb, info, app)
        assert len(info.core.calls) == 0


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_cancelling_the_scope_cancels_at_the_app_and_busy(tmp_path: Path, transport: str) -> None:
    async with daemon_and_app(tmp_path, max_pending_calls=1) as (info, app, home):
        target = {"home": home, "auto_start": False} if transport == "stdio" else {"url": mcp_url(info), "home": home}
        async with connect(**target) as tb, trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def call() -> None:
                with scope:
                    await tb.call("Demo__slow")
                    raise AssertionError("the call should not have finished")  # pragma: no cover

            nursery.start_soon(call)
            await app.until(lambda: any(i.tool == "slow" for i in app.invocations))
            with pytest.raises(ToolBusy) as busy:  # the one call allowed is in flight
                await tb.call("Demo__text")
            assert busy.value.retry_after_ms == 1000 and busy.value.kind == "busy"
            scope.cancel()
        await app.until(lambda: len(app.cancels) == 1)
        slow = next(i for i in app.invocations if i.tool == "slow")
        assert app.cancels[0].correlation_id == slow.correlation_id


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_apps_follow_the_daemon(tmp_path: Path, mode: str) -> None:
    async with daemon_and_app(tmp_path) as (info, app, home), trio.open_nursery() as nursery:
        async with connect(mcp_url(info), token=info.token, mode=mode) as tb:
            assert "Writer" not in tb.apps
            writer = await ScriptedApp(info.port, info.token, "Writer", tools=[ECHO_OUT]).start(nursery)
            with trio.fail_after(10):
                while "Writer" not in tb.apps:
                    await tb._refreshed.wait()
            assert await tb.apps.Writer.echo(text="w") == {"echo": {"text": "w"}}
            assert "Writer__echo" in tb.tools
            await writer.close()
            with trio.fail_after(10):
                while "Writer" in tb.apps:  # gone once its reconnect grace ends
                    await tb._refreshed.wait()


async def test_generated_stubs_take_tb_as_their_client(tmp_path: Path) -> None:
    async with daemon_and_app(tmp_path) as (info, app, home), trio.open_nursery() as nursery:
        # A name too long for the agent-facing limit is shortened with a hash there; the stubs
        # and the live namespace must still agree on its method name (tools/list's _meta).
        long_tool = ToolSpec("ExportTheCurrentDocumentAsPortableDocumentFormatWithEmbeddedFonts", "Export it")
        writer = await ScriptedApp(info.port, info.token, "Writer", tools=[ECHO_OUT, long_tool]).start(nursery)
        assert any(t.name != f"Writer__{t.spec.name}" for t in info.core.router.list_tools())
        source = generate_python(tools_from_registry(info.core.router.list_tools()))
        path = tmp_path / "toolbridge_stubs.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location("toolbridge_stubs_test", path)
        assert spec is not None and spec.loader is not None
        stubs = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = stubs  # TypedDict resolves its string annotations through it
        try:
            spec.loader.exec_module(stubs)
            async with connect(mcp_url(info), token=info.token) as tb:
                apps = stubs.Apps(tb)
                assert await apps.Writer.echo(text="typed") == {"echo": {"text": "typed"}}  # the outputSchema type
                assert await apps.Demo.text() == "just text"
                with pytest.raises(ToolAppError):
                    await apps.Demo.fail()
                # The live namespace uses the same method names as the stubs.
                for app_attr in tb.apps:
                    stub_methods = {name for name in dir(getattr(apps, app_attr)) if not name.startswith("_")}
                    assert set(dir(tb.apps[app_attr])) == stub_methods
                assert "export_the_current_document_as_portable_document_format_with_embedded_fonts" in dir(
                    tb.apps.Writer)
        finally:
            del sys.modules[spec.name]
        await writer.close()


async def test_connect_errors_and_unwrapped_exceptions(tmp_path: Path) -> None:
    with pytest.raises(ConnectError, match="cannot connect"):
        async with connect(home=tmp_path / "nobody", auto_start=False):
            raise AssertionError("connected to nothing")  # pragma: no cover
    async with daemon_and_app(tmp_path) as (info, app, home):
        with pytest.raises(ConnectError):
            async with connect(mcp_url(info), token="wrong"):
                raise AssertionError("connected with a wrong token")  # pragma: no cover
        # A tool error that leaves the block is itself, not an ExceptionGroup.
        with pytest.raises(ToolNotFound):
            async with connect(mcp_url(info), home=home) as tb:  # the token is read from home
                await tb.call("Demo__nope")


async def test_works_under_asyncio(tmp_path: Path) -> None:
    async with daemon_and_app(tmp_path) as (info, app, home):

        async def agent() -> list[Any]:
            async with connect(mcp_url(info), token=info.token) as tb:
                got: list[Any] = [await tb.apps.Demo.echo(text="asyncio")]
                try:
                    await tb.call("Demo__fail")
                except ToolAppError as exc:
                    got.append(exc.kind)
                return got

        got = await trio.to_thread.run_sync(asyncio.run, agent())
        assert got == [{"echo": {"text": "asyncio"}}, "app_error"]


def test_error_mapping() -> None:
    meta = {"toolbridge/errorKind": "busy", "toolbridge/retryAfterMs": 250}
    busy = error_from_result("A__b", meta, "wait")
    assert (type(busy), busy.kind, busy.retry_after_ms, busy.message, busy.tool) == (ToolBusy, "busy", 250, "wait", "A__b")
    odd = error_from_result("A__b", {"toolbridge/errorKind": "shutdown"}, "")
    assert (type(odd), odd.kind, odd.message) == (ToolCallError, "shutdown", "A__b failed (shutdown)")
    assert error_from_result("A__b", None, "x").kind == "error"
    assert type(error_from_rpc("A__b", -32000, "closed")) is ConnectionLost
    assert type(error_from_rpc("A__b", -32001, "timed out")) is ToolTimeout
    other = error_from_rpc("A__b", -32603, "boom")
    assert (type(other), other.kind, other.code) == (ToolCallError, "protocol_error", -32603)


def test_old_error_names_are_aliases() -> None:
    # README and agent code import the old names: they must stay the very same classes.
    import broker.agent

    assert broker.agent.ToolError is ToolCallError
    assert broker.agent.ToolbridgeError is AgentError
    assert {"ToolError", "ToolbridgeError", "ToolCallError", "AgentError"} <= set(broker.agent.__all__)
    assert issubclass(ToolCallError, AgentError) and issubclass(ConnectError, AgentError)
