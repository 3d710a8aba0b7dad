"""The pool of 2026-07-28 sessions (``broker.mcp.stateless``): reuse only when idle, per token
and mode, bounded; and the same over the real HTTP server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from broker.mcp import stateless
from broker.mcp.server import McpServer
from broker.mcp.session import open_session
from broker.mcp.stateless import StatelessSessions
from mcp_testkit import MODERN_META, ScriptedApp, http_client, mcp_url, running_daemon

HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json",
           "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "Demo__echo"}


def call(request_id: int, tool: str = "echo") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": f"Demo__{tool}", "arguments": {"n": request_id}, "_meta": MODERN_META}}


async def test_an_idle_session_is_reused_for_the_same_token_and_mode_only(tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "home") as info, trio.open_nursery() as nursery:
        pool = StatelessSessions(McpServer.of(info.core), limit=2)
        assert await pool.take(discovery=False, code=False, app=None, token="a") is None  # not running
        nursery.start_soon(pool.run)
        await trio.testing.wait_all_tasks_blocked()
        first = await pool.take(discovery=False, code=False, app=None, token="a")
        assert first is not None and first.principal == "token:a"
        pool.give_back(first, reusable=True)
        assert len(pool) == 1 and not first.closed.is_set()
        # Another token, another mode: never the same session.
        other = await pool.take(discovery=False, code=False, app=None, token="b")
        discovery = await pool.take(discovery=True, code=False, app=None, token="a")
        assert other is not first and discovery is not first and discovery is not None and discovery.discovery
        assert await pool.take(discovery=False, code=False, app=None, token="a") is first
        # A session whose exchange was not clean (a watcher ran) is closed, not pooled.
        pool.give_back(first, reusable=False)
        assert first.closed.is_set() and len(pool) == 0
        # At most ``limit`` idle: the oldest goes (closed).
        assert other is not None
        pool.give_back(other, reusable=True)
        pool.give_back(discovery, reusable=True)
        third = await pool.take(discovery=False, code=True, app=None, token="a")
        assert third is not None
        pool.give_back(third, reusable=True)
        assert len(pool) == 2 and other.closed.is_set() and not discovery.closed.is_set()
        nursery.cancel_scope.cancel()


async def test_a_session_with_a_call_in_flight_is_not_reused(tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "home") as info, trio.open_nursery() as nursery:
        app = await ScriptedApp(info.port, info.token).start(nursery)
        pool = StatelessSessions(McpServer.of(info.core))
        nursery.start_soon(pool.run)
        await trio.testing.wait_all_tasks_blocked()
        session = await pool.take(discovery=False, code=False, app=None, token="t")
        assert session is not None

        class Outbox:
            async def send(self, data: bytes, *, final: bool = False) -> None: ...
            def send_nowait(self, data: bytes) -> bool: return True
            def send_final_nowait(self, data: bytes) -> bool: return True
            def close(self) -> None: ...

        from broker.mcp.jsonrpc import parse_message

        await session.handle(parse_message(json.dumps(call(1, "slow")).encode()), Outbox())
        await app.until(lambda: len(app.invocations) == 1)
        assert session.busy
        pool.give_back(session, reusable=True)  # busy: closed, and its call ends at the app
        assert session.closed.is_set() and len(pool) == 0
        await app.until(lambda: len(app.cancels) == 1)
        await app.close()
        nursery.cancel_scope.cancel()


async def test_modern_requests_over_http_reuse_their_sessions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[Any] = []

    def counting(*args: Any, **kwargs: Any) -> Any:
        opened.append(kwargs["token"])
        return open_session(*args, **kwargs)

    monkeypatch.setattr(stateless, "open_session", counting)
    async with running_daemon(tmp_path / "home") as info, trio.open_nursery() as nursery:
        app = await ScriptedApp(info.port, info.token).start(nursery)
        async with http_client(info) as http:
            for n in range(1, 6):
                response = await http.post(mcp_url(info), content=json.dumps(call(n)).encode(), headers=HEADERS)
                assert response.status_code == 200
                assert response.json()["result"]["structuredContent"] == {"echo": {"n": n}}
        assert opened == ["default"]  # one session served the five requests, one after another
        await app.close()
