"""The status page's "why" and its tool inspector over real HTTP against the real daemon (issue 31).

Failed calls show their kind, the message the agent got (withheld with ``call_log_redact``) and
the ``toolbridge logs --id`` line; the inspector's calls need cookie + CSRF + Origin, run the
router's pipeline as the agent ``status-page`` (call log included), stream progress, can be
cancelled, and a login made with a scoped token lists and calls only its scope.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from app_client.wire import ToolSpec

from broker.config import tokens
from broker.mcp.status_page import CSRF_HEADER
from mcp_testkit import DEMO_TOOLS, HTTPX_STREAM_WARNINGS, ScriptedApp, http_client, running_daemon
from test_status_page import base, logged_in

pytestmark = [pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS]

#: "echo" answers with its arguments: a form with a nested object and an enum.
FORM_SCHEMA = {"type": "object", "required": ["mode"], "properties": {
    "mode": {"type": "string", "enum": ["fast", "careful"], "default": "fast"},
    "size": {"type": "object", "properties": {"width": {"type": "integer"}, "height": {"type": "integer"}}},
    "tags": {"type": "array", "items": {"type": "string"}},
}}
TOOLS = [ToolSpec("echo", "Echo the arguments back", FORM_SCHEMA), *[t for t in DEMO_TOOLS if t.name != "echo"]]


async def state(page: httpx2.AsyncClient, info: Any) -> dict[str, Any]:
    return (await page.get(f"{base(info)}/api/status")).json()  # type: ignore[no-any-return]


async def inspect_call(page: httpx2.AsyncClient, info: Any, name: str, arguments: Any,
                       headers: dict[str, str] | None = None) -> httpx2.Response:
    csrf = (await state(page, info))["csrf"]
    sent = {"origin": base(info), CSRF_HEADER: csrf} if headers is None else headers
    return await page.post(f"{base(info)}/api/inspect/call", json={"name": name, "arguments": arguments},
                           headers=sent)


def lines(response: httpx2.Response) -> list[dict[str, Any]]:
    return [json.loads(line) for line in response.text.splitlines()]


async def test_a_failed_call_shows_why_and_where_its_full_record_is(tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "home") as info, trio.open_nursery() as nursery:
        app = await ScriptedApp(info.port, info.token, tools=TOOLS).start(nursery)
        page = await logged_in(info)
        assert lines(await inspect_call(page, info, "Demo__fail", {}))[-1]["result"]["isError"]
        invalid = lines(await inspect_call(page, info, "Demo__echo", {"mode": "reckless"}))
        assert invalid[-1]["result"]["_meta"]["toolbridge/errorKind"] == "invalid_arguments"
        shown = await state(page, info)
        invalid_row, fail_row = shown["recent"][:2]
        # The message the agent got (the app's text; the schema error), and the record's command.
        assert fail_row["outcome"] == "app_error" and "the disk is full" in fail_row["message"]
        assert fail_row["logs"] == f"toolbridge logs --id {fail_row['id']} --json"
        assert invalid_row["outcome"] == "invalid_arguments" and "mode" in invalid_row["message"]
        assert fail_row["agent"] == "status-page"
        assert shown["daemon"]["callLogRedact"] is False
        await page.aclose()
        await app.close()


async def test_with_call_log_redact_the_page_withholds_app_text(tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "home", call_log_redact=True) as info, trio.open_nursery() as nursery:
        app = await ScriptedApp(info.port, info.token).start(nursery)
        page = await logged_in(info)
        await inspect_call(page, info, "Demo__fail", {})
        await inspect_call(page, info, "Demo__hang", {})
        shown = await state(page, info)
        timed_out, failed = shown["recent"][:2]
        assert failed["outcome"] == "app_error" and failed["message"] is None
        assert timed_out["outcome"] == "timeout" and "timed out" in timed_out["message"]  # the daemon's words
        await page.aclose()
        await app.close()


async def test_inspector_calls_need_cookie_csrf_and_origin_and_run_the_whole_pipeline(tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "home") as info, trio.open_nursery() as nursery:
        app = await ScriptedApp(info.port, info.token, tools=TOOLS).start(nursery)
        page = await logged_in(info)
        catalog = (await page.get(f"{base(info)}/api/inspect/catalog")).json()
        [echo] = [t for t in catalog["tools"] if t["name"] == "Demo__echo"]
        assert (echo["app"], echo["tool"], echo["inputSchema"]) == ("Demo", "echo", FORM_SCHEMA)
        csrf = (await state(page, info))["csrf"]
        url = f"{base(info)}/api/inspect/call"
        call = {"name": "Demo__echo", "arguments": {"mode": "careful"}}
        own = {"origin": base(info)}
        refused = [
            await page.post(url, json=call, headers=own),  # no CSRF header
            await page.post(url, json=call, headers={**own, CSRF_HEADER: "wrong"}),
            await page.post(url, json=call, headers={CSRF_HEADER: csrf}),  # no Origin
            await page.post(url, json=call, headers={"origin": "http://127.0.0.1:1", CSRF_HEADER: csrf}),
        ]
        async with httpx2.AsyncClient() as stranger:  # no cookie
            refused.append(await stranger.post(url, json=call, headers={**own, CSRF_HEADER: csrf}))
        assert [r.status_code for r in refused] == [403] * 5
        assert app.invocations == []
        assert (await page.get(f"{base(info)}/api/inspect/catalog", headers={"origin": "http://evil.example"})
                ).status_code == 403
        async with httpx2.AsyncClient() as stranger:
            assert (await stranger.get(f"{base(info)}/api/inspect/catalog")).status_code == 403

        arguments = {"mode": "careful", "size": {"width": 3, "height": 4}, "tags": ["a"]}
        answer = lines(await inspect_call(page, info, "Demo__echo", arguments))
        assert isinstance(answer[0]["id"], int)
        result = answer[-1]["result"]
        assert result["isError"] is False and result["structuredContent"] == {"echo": arguments}
        [invocation] = app.invocations
        assert invocation.parameters == arguments
        image = lines(await inspect_call(page, info, "Demo__image", {}))[-1]["result"]
        assert [b["type"] for b in image["content"]] == ["text", "image"]
        # The call log has it, under the agent status-page.
        call_log = info.core.router.call_log
        assert call_log is not None
        with trio.fail_after(10):
            await call_log.wait_written(2)
        from broker.cli.logs_command import LogFilter, connect_readonly, fetch_rows
        conn = connect_readonly(tmp_path / "home" / "calls.sqlite3")
        rows = fetch_rows(conn, LogFilter(tool="Demo__echo"))
        conn.close()
        assert [(r["agent"], r["error_kind"]) for r in rows] == [("status-page", "ok")]
        await page.aclose()
        await app.close()


async def test_inspector_streams_progress_and_its_cancel_reaches_the_app(tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "home") as info, trio.open_nursery() as nursery:
        app = await ScriptedApp(info.port, info.token).start(nursery)
        page = await logged_in(info)
        answer = lines(await inspect_call(page, info, "Demo__progress", {}))
        assert [a["progress"] for a in answer if "progress" in a] == [1, 2]
        assert answer[1] == {"progress": 1, "total": 2, "message": "step 1"}
        assert answer[-1]["result"]["content"][0]["text"] == "done"

        csrf = (await state(page, info))["csrf"]
        headers = {"origin": base(info), CSRF_HEADER: csrf}
        async with page.stream("POST", f"{base(info)}/api/inspect/call", json={"name": "Demo__slow", "arguments": {}},
                               headers=headers) as response:
            received = response.aiter_lines()
            first = json.loads(await received.__anext__())
            shown = await state(page, info)
            [running] = shown["calls"]
            assert running["id"] == first["id"] and running["agent"] == "status-page"
            assert running["queuedMs"] + running["runMs"] <= running["elapsedMs"] + 1
            cancelled = await page.post(f"{base(info)}/api/calls/{first['id']}/cancel", headers=headers)
            assert cancelled.json() == {"cancelled": True}
            await app.until(lambda: len(app.cancels) == 1)
            last = json.loads(await received.__anext__())
        assert last["result"]["_meta"]["toolbridge/errorKind"] == "cancelled"
        await page.aclose()
        await app.close()


async def test_a_scoped_login_lists_and_calls_only_its_scope(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with running_daemon(home) as info, trio.open_nursery() as nursery:
        secret = tokens.issue(home, "demo-only", ["agent:Demo"])
        demo = await ScriptedApp(info.port, info.token).start(nursery)
        other = await ScriptedApp(info.port, info.token, app_name="Other").start(nursery)
        page = httpx2.AsyncClient(timeout=30)
        login = await page.post(f"{base(info)}/login", content=b"{}", headers={
            "origin": base(info), CSRF_HEADER: "1", "authorization": f"Bearer {secret}"})
        assert login.status_code == 200, login.text
        catalog = (await page.get(f"{base(info)}/api/inspect/catalog")).json()
        assert {t["app"] for t in catalog["tools"]} == {"Demo"} and catalog["apps"] == ["Demo"]
        other_resources = await page.post(f"{base(info)}/api/inspect/mcp", json={
            "app": "Other", "method": "resources/list", "params": {}},
            headers={"origin": base(info), CSRF_HEADER: (await state(page, info))["csrf"]})
        assert other_resources.status_code == 403
        refused = await inspect_call(page, info, "Other__text", {})
        assert refused.status_code == 403 and "may not call Other__text" in refused.json()["error"]
        assert other.invocations == []
        allowed = lines(await inspect_call(page, info, "Demo__text", {}))
        assert allowed[-1]["result"]["isError"] is False
        async with httpx2.AsyncClient() as stranger:  # a token that is not one, or an app-only token
            bad = await stranger.post(f"{base(info)}/login", content=b"{}", headers={
                "origin": base(info), CSRF_HEADER: "1", "authorization": "Bearer nope"})
            assert bad.status_code == 403
        await page.aclose()
        await demo.close()
        await other.close()


async def test_code_mode_sessions_are_labelled_as_such_on_the_page_and_in_toolbridge_status(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with running_daemon(home) as info, http_client(info) as agent:
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "coder", "version": "1"}}}
        started = await agent.post(f"http://127.0.0.1:{info.http_port}/mcp/code", json=init, headers=headers)
        assert started.status_code == 200, started.text
        page = await logged_in(info)
        [session] = (await state(page, info))["sessions"]
        assert (session["client"], session["mode"]) == ("coder", "code")
        status = await trio.run_process([sys.executable, "-m", "broker", "status", "--home", str(home)],
                                        capture_stdout=True, capture_stderr=True)
        line = next(line for line in status.stdout.decode().splitlines() if "coder" in line)
        assert "code mode" in line and "discovery" not in line
        await page.aclose()


async def test_the_inspector_lists_reads_and_gets_an_apps_resources_and_prompts(tmp_path: Path) -> None:
    from test_mcp_resources import ReturningApp

    home = tmp_path / "home"
    async with running_daemon(home) as info, trio.open_nursery() as nursery:
        app = await ReturningApp(info.port, info.token).start(nursery)
        page = await logged_in(info)
        csrf = (await state(page, info))["csrf"]
        url = f"{base(info)}/api/inspect/mcp"
        own = {"origin": base(info), CSRF_HEADER: csrf}

        async def ask(method: str, params: dict[str, Any], headers: dict[str, str] = own) -> httpx2.Response:
            return await page.post(url, json={"app": "Notes", "method": method, "params": params}, headers=headers)

        assert (await ask("resources/list", {}, {"origin": base(info)})).status_code == 403  # no CSRF token
        assert (await ask("resources/list", {}, {CSRF_HEADER: csrf})).status_code == 403  # no Origin
        refused = await page.post(url, json={"app": "Notes", "method": "tools/call", "params": {}}, headers=own)
        assert refused.status_code == 400  # only reading methods
        listed = (await ask("resources/list", {})).json()["result"]["resources"]
        assert {r["uri"] for r in listed} == {"notes://readme", "img://logo.png"}  # the app's own URIs
        read = (await ask("resources/read", {"uri": "notes://readme"})).json()
        assert read["result"]["contents"][0]["text"] == "hello from Notes"
        missing = (await ask("resources/read", {"uri": "notes://nope"})).json()
        assert "error" in missing
        prompts = (await ask("prompts/list", {})).json()["result"]["prompts"]
        assert [p["name"] for p in prompts] == ["hello"]
        got = (await ask("prompts/get", {"name": "hello"})).json()
        assert got["result"]["messages"][0]["content"]["text"] == "hello"
        # Logged like an agent's reads, with the agent status-page.
        call_log = info.core.router.call_log
        assert call_log is not None
        with trio.fail_after(10):
            await call_log.wait_written(3)
        from broker.cli.logs_command import LogFilter, connect_readonly, fetch_rows
        conn = connect_readonly(home / "calls.sqlite3")
        rows = fetch_rows(conn, LogFilter(tool="resource_read"))
        conn.close()
        assert {r["agent"] for r in rows} == {"status-page"}
        await page.aclose()
        await app.close()


class _Origin:
    """A caller that only records how its call ended."""

    def __init__(self) -> None:
        self.outcomes: list[Any] = []

    def call_progress(self, call: Any, progress: float, total: float | None, message: str | None) -> None:
        pass

    def call_done(self, call: Any, outcome: Any) -> None:
        self.outcomes.append(outcome)


async def test_a_call_waiting_behind_another_shows_queue_time_apart_and_can_be_cancelled(tmp_path: Path) -> None:
    from broker.core.calls import Call
    from test_status_page import OneAtATimeApp

    async with running_daemon(tmp_path / "home") as info, trio.open_nursery() as nursery:
        app = await OneAtATimeApp(info.port, info.token).start(nursery)
        page = await logged_in(info)
        router = info.core.router
        first, second = _Origin(), _Origin()
        running = router.start_call("Demo__slow", {}, origin=first, deadlines=None)
        await app.until(lambda: len(app.invocations) == 1)
        waiting = router.start_call("Demo__text", {}, origin=second, deadlines=None)
        assert isinstance(running, Call) and isinstance(waiting, Call) and waiting.queued is not None
        shown = await state(page, info)
        by_id = {c["id"]: c for c in shown["calls"]}
        assert by_id[running.correlation_id]["runMs"] > 0
        queued = by_id[waiting.correlation_id]
        assert queued["runMs"] == 0 and queued["queuedMs"] == queued["elapsedMs"]
        [demo] = shown["apps"]
        assert (demo["inFlight"], demo["queued"]) == (1, 1)
        # The page's Cancel works on a call still waiting for its slot (it never reached the app).
        headers = {"origin": base(info), CSRF_HEADER: shown["csrf"]}
        cancelled = await page.post(f"{base(info)}/api/calls/{waiting.correlation_id}/cancel", headers=headers)
        assert cancelled.json() == {"cancelled": True}
        assert [o.kind for o in second.outcomes] == ["cancelled"] and len(app.invocations) == 1
        router.cancel(running)
        await page.aclose()
        await app.close()


class ProgressThenWaitApp(ScriptedApp):
    """``slow`` reports "4/12 step 4" when asked for progress, then runs until cancelled."""

    async def _answer(self, call: Any) -> None:
        from app_client.wire import ToolProgress

        if call.tool == "slow" and call.progress:
            await self.send(ToolProgress(call.correlation_id, 4, 12, "step 4"))
            return
        await super()._answer(call)


@pytest.mark.parametrize("redact", [False, True])
async def test_a_call_in_flight_shows_progress_as_done_of_total_and_its_message(tmp_path: Path, redact: bool) -> None:
    async with running_daemon(tmp_path / "home", call_log_redact=redact) as info, trio.open_nursery() as nursery:
        app = await ProgressThenWaitApp(info.port, info.token).start(nursery)
        page = await logged_in(info)
        headers = {"origin": base(info), CSRF_HEADER: (await state(page, info))["csrf"]}
        async with page.stream("POST", f"{base(info)}/api/inspect/call", json={"name": "Demo__slow", "arguments": {}},
                               headers=headers) as response:
            received = response.aiter_lines()
            first = json.loads(await received.__anext__())
            assert json.loads(await received.__anext__()) == {"progress": 4, "total": 12, "message": "step 4"}
            [call] = (await state(page, info))["calls"]
            assert call["progress"] == {"progress": 4, "total": 12, "message": None if redact else "step 4"}
            await page.post(f"{base(info)}/api/calls/{first['id']}/cancel", headers=headers)
            await app.until(lambda: len(app.cancels) == 1)
        await page.aclose()
        await app.close()


@pytest.mark.parametrize(("body", "call_error", "mcp_error"), [
    (None, "missing or over", "missing or over"),
    (b"{", "not JSON", "not JSON"),
    (b'"echo"', 'needs {"name"', 'needs {"app"'),  # JSON, but no object: never taken for an error message
    (b"[]", 'needs {"name"', 'needs {"app"'),
    (b'{"arguments": {}}', 'needs {"name"', 'needs {"app"'),
    (b'{"name": "echo", "arguments": [1]}', "arguments must be a JSON object", 'needs {"app"'),
])
def test_a_malformed_call_request_says_what_is_wrong(body: bytes | None, call_error: str, mcp_error: str) -> None:
    from broker.mcp.inspector import parse_call, parse_mcp

    assert call_error in parse_call(body)
    assert mcp_error in parse_mcp(body)
    assert parse_call(b'{"name": "echo"}') == ("echo", {})
    assert parse_mcp(b'{"app": "a", "method": "resources/list"}') == ("a", "resources/list", {})
