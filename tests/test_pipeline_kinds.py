"""Every outcome kind of the call pipeline, through the real MCP SDK client, down to the call log.

One daemon (call log on), one scripted app, one SDK client over HTTP. Each call's outcome is
checked three ways: what the agent sees (``isError``, the message, ``_meta`` error kind), the
audit event in the daemon's log, and the row in the SQLite call log.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import structlog
import trio
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

import broker.core.router
from app_client.wire import ToolSpec
from broker.daemon.run import DaemonInfo
from mcp_testkit import DEMO_TOOLS, HTTPX_STREAM_WARNINGS, ScriptedApp, http_client, mcp_url, running_daemon

pytestmark = [pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS]

PATH_TOOL = ToolSpec(
    "open", "Open a file", {"type": "object", "properties": {"path": {"type": "string"}, "n": {"type": "integer"}},
                            "required": ["path"]})
# The scripted app never answers this one; its tiny timeout ends the call once it got there.
RAW_PATH_TOOL = ToolSpec("open_raw", "Open any path (opted out of the guard)", {"type": "object"},
                         path_guard=False, timeout_ms=200)


@asynccontextmanager
async def stack(tmp_path: Path, **settings: Any) -> AsyncIterator[tuple[DaemonInfo, ScriptedApp, Client]]:
    home = tmp_path / "home"
    async with running_daemon(home, call_log_flush_interval=0.05, max_queue=0, reconnect_grace=0.2, **settings) as info:
        async with trio.open_nursery() as nursery:
            app = await ScriptedApp(info.port, info.token, tools=[*DEMO_TOOLS, PATH_TOOL, RAW_PATH_TOOL]).start(nursery)
            async with http_client(info) as http:
                async with Client(streamable_http_client(mcp_url(info), http_client=http), mode="legacy") as client:
                    yield info, app, client
            await app.close()


def kind_of(result: types.CallToolResult) -> str | None:
    meta = result.meta or {}
    return meta.get("toolbridge/errorKind")


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def logged_kinds(home: Path, count: int) -> list[tuple[str, str, int, str | None]]:
    """(tool, error_kind, is_error, agent) of the call log's rows, once ``count`` are written."""
    with trio.fail_after(10):
        # Polled: the rows are written by another process (the daemon), read through SQLite.
        while True:
            try:
                with sqlite3.connect(f"file:{home / 'calls.sqlite3'}?mode=ro", uri=True) as db:
                    rows = db.execute("select tool, error_kind, is_error, agent from calls order by id").fetchall()
                db.close()
            except sqlite3.OperationalError:
                rows = []
            if len(rows) >= count:
                return rows
            await trio.sleep(0.02)


async def test_each_outcome_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with structlog.testing.capture_logs() as audit:
        async with stack(tmp_path) as (info, app, client):
            ok = await client.call_tool("Demo__echo", {"text": "hi"})
            assert not ok.is_error and kind_of(ok) is None

            with pytest.raises(MCPError) as unknown:
                await client.call_tool("Demo__nope", {})
            assert unknown.value.error.code == -32602 and "tools/list" in unknown.value.error.message

            invalid = await client.call_tool("Demo__open", {"n": "three"})
            assert invalid.is_error and kind_of(invalid) == "invalid_arguments"
            assert "$.n" in text_of(invalid) and "'path' is a required property" in text_of(invalid)

            guarded = await client.call_tool("Demo__open", {"path": "docs/%2e%2e/%2e%2e/etc/passwd"})
            assert guarded.is_error and kind_of(guarded) == "guard_rejected" and "$.path" in text_of(guarded)
            opted_out = await client.call_tool("Demo__open_raw", {"path": "../sibling"})
            assert kind_of(opted_out) == "timeout"  # it passed the guard and reached the app:
            assert any(i.tool == "open_raw" and i.parameters == {"path": "../sibling"} for i in app.invocations)

            failed = await client.call_tool("Demo__fail", {})
            assert failed.is_error and kind_of(failed) == "app_error"
            assert text_of(failed) == "the disk is full; free some space and retry"

            timed_out = await client.call_tool("Demo__hang", {})
            assert timed_out.is_error and kind_of(timed_out) == "timeout" and "timed out after 0.3 s" in text_of(timed_out)

            # busy: the app runs 8 at once (its maxConcurrency) and the queue holds none (max_queue=0).
            async with trio.open_nursery() as nursery:
                for _ in range(8):
                    nursery.start_soon(lambda: client.call_tool("Demo__slow", {}, read_timeout_seconds=None))
                await app.until(lambda: sum(i.tool == "slow" for i in app.invocations) == 8)
                busy = await client.call_tool("Demo__slow", {})
                assert busy.is_error and kind_of(busy) == "busy" and "retry after" in text_of(busy)
                assert (busy.meta or {}).get("toolbridge/retryAfterMs", 1) >= 100
                nursery.cancel_scope.cancel()  # cancelled by the agent: the app hears of each
            await app.until(lambda: len(app.cancels) >= 8)

            # An internal bug: the pipeline still answers, safely, and names no internals.
            def broken(_: object) -> None:
                raise RuntimeError("secret internals at /home/user/broker/router.py")

            monkeypatch.setattr(broker.core.router, "find_path_traversal", broken)
            crashed = await client.call_tool("Demo__echo", {"text": "x"})
            monkeypatch.undo()
            assert crashed.is_error and kind_of(crashed) == "internal_error"
            assert "secret" not in text_of(crashed) and "router.py" not in text_of(crashed)
            assert "not retried" in text_of(crashed)

            await app.close()
            gone = await client.call_tool("Demo__echo", {"text": "x"}, read_timeout_seconds=None)
            assert gone.is_error and kind_of(gone) == "app_disconnected"

            rows = await logged_kinds(info.core.settings.home, 18)

    events = {(entry["event"], entry.get("outcome")) for entry in audit if "outcome" in entry}
    assert {("tool_executed", "ok"), ("unknown_tool", "unknown_tool"),
            ("tool_arg_validation_failure", "invalid_arguments"), ("tool_guard_rejected", "guard_rejected"),
            ("tool_execution_error", "app_error"), ("tool_timeout", "timeout"), ("tool_execution_error", "busy"),
            ("tool_cancelled", "cancelled"), ("tool_execution_error", "internal_error"),
            ("tool_execution_error", "app_disconnected")} <= events
    executed = next(e for e in audit if e["event"] == "tool_executed")
    assert executed["app"] == "Demo" and executed["correlation_id"] and executed["duration_ms"] >= 0
    assert executed["agent"].startswith("mcp") and executed["session"]  # the SDK's clientInfo, the session

    kinds = {kind for _, kind, _, _ in rows}
    assert kinds >= {"ok", "unknown_tool", "invalid_arguments", "guard_rejected", "app_error", "timeout", "busy",
                     "cancelled", "internal_error", "app_disconnected"}
    assert all(is_error == (kind != "ok") for _, kind, is_error, _ in rows)
