"""The status page's access rules, its JSON, cancel, ``toolbridge open`` and ``/metrics`` (issue 19).

Over real HTTP against the real daemon; the page in a real browser is test_status_page_browser.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from app_client.wire import Register

from broker.config import tokens
from broker.config.web_login import TICKET_SECONDS, TicketBook, check_ticket, login_key, login_label, mint_ticket
from broker.daemon.run import DaemonInfo
from broker.mcp.status_page import CSRF_HEADER, MAX_SESSIONS, cookie_name
from broker.version import VERSION
from faultkit import DaemonProcess
from mcp_testkit import HTTPX_STREAM_WARNINGS, ScriptedApp, http_client, mcp_url, running_daemon

pytestmark = [pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS]


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[DaemonInfo]:
    async with running_daemon(tmp_path / "home") as info:
        yield info


def base(info: DaemonInfo) -> str:
    return f"http://127.0.0.1:{info.http_port}"


def key(info: DaemonInfo) -> bytes:
    """The login tickets' key of this start of the daemon (what `toolbridge open` derives)."""
    return login_key(info.token, info.core.auth.instance)


async def log_in(http: httpx2.AsyncClient, info: DaemonInfo, ticket: str | None = None) -> httpx2.Response:
    """What the login page's script does with the link's fragment."""
    return await http.post(
        f"{base(info)}/login", json={"ticket": ticket or mint_ticket(key(info), time.time())},
        headers={"origin": base(info), CSRF_HEADER: "1"},
    )


async def logged_in(info: DaemonInfo) -> httpx2.AsyncClient:
    http = httpx2.AsyncClient(timeout=30)
    response = await log_in(http, info)
    assert response.status_code == 200, response.text
    return http


# --- tickets (pure) --------------------------------------------------------------------------


def test_a_ticket_works_once_for_its_daemon_within_a_minute() -> None:
    now = 1_700_000_000.0
    auth = tokens.Authenticator("secret", None)
    key = login_key("secret", auth.instance)
    # The daemon derives the same key without handing its token out.
    assert auth.derive_key(login_label(auth.instance)) == key
    ticket = mint_ticket(key, now)
    assert "secret" not in ticket
    assert check_ticket(key, ticket, now + 1) is not None
    assert check_ticket(login_key("other token", auth.instance), ticket, now + 1) is None
    # Another start of the same daemon (same token) has another key.
    assert check_ticket(login_key("secret", tokens.Authenticator("secret", None).instance), ticket, now + 1) is None
    assert check_ticket(key, ticket, now + TICKET_SECONDS + 1) is None
    tampered = ticket.replace(ticket.split(".")[1], str(int(now + 10_000)))
    assert check_ticket(key, tampered, now) is None
    for junk in ("", "v1", "v1.x.y.z", "." * 3, "v1.1.n." + "A" * 500):
        assert check_ticket(key, junk, now) is None
    book = TicketBook()
    assert book.redeem(key, ticket, now + 1)
    assert not book.redeem(key, ticket, now + 2)  # once only


# --- logging in --------------------------------------------------------------------------------


async def test_the_page_needs_a_login_and_the_cookie_is_locked_down(daemon: DaemonInfo) -> None:
    async with httpx2.AsyncClient(timeout=30) as http:
        anonymous = await http.get(f"{base(daemon)}/")
        assert anonymous.status_code == 403 and "toolbridge open" in anonymous.text
        assert (await http.get(f"{base(daemon)}/api/status")).status_code == 403
        # The login page itself is public (the ticket is in its fragment, never sent).
        assert (await http.get(f"{base(daemon)}/login")).status_code == 200
        response = await log_in(http, daemon)
        assert response.status_code == 200
        cookie = response.headers["set-cookie"]
        assert cookie.startswith(cookie_name(daemon.http_port) + "=")
        for attribute in ("HttpOnly", "SameSite=Strict", "Path=/"):
            assert attribute in cookie
        page = await http.get(f"{base(daemon)}/")
        assert page.status_code == 200 and "/static/status.js" in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert page.headers["x-frame-options"] == "DENY"
        status = (await http.get(f"{base(daemon)}/api/status")).json()
        assert status["apps"] == [] and status["calls"] == [] and status["csrf"]
        assert daemon.token not in json.dumps(status)


async def test_a_ticket_is_refused_when_reused_expired_forged_or_posted_from_elsewhere(daemon: DaemonInfo) -> None:
    async with httpx2.AsyncClient(timeout=30) as http:
        ticket = mint_ticket(key(daemon), time.time())
        assert (await log_in(http, daemon, ticket)).status_code == 200
        http.cookies.clear()
        reused = await log_in(http, daemon, ticket)
        assert reused.status_code == 403 and "toolbridge open" in reused.json()["error"]
        assert "set-cookie" not in reused.headers
        old = await log_in(http, daemon, mint_ticket(key(daemon), time.time() - TICKET_SECONDS - 5))
        assert old.status_code == 403
        forged = await log_in(http, daemon, mint_ticket(login_key("not the token", daemon.core.auth.instance), time.time()))
        assert forged.status_code == 403
        fresh = {"ticket": mint_ticket(key(daemon), time.time())}
        # Another local server shares our site (the cookie would go to it) but not our origin.
        for origin in ("http://127.0.0.1:1", "http://localhost:" + str(daemon.http_port), "null"):
            other = await http.post(f"{base(daemon)}/login", json=fresh, headers={"origin": origin, CSRF_HEADER: "1"})
            assert other.status_code == 403, origin
        no_header = await http.post(f"{base(daemon)}/login", json=fresh, headers={"origin": base(daemon)})
        assert no_header.status_code == 403
        no_origin = await http.post(f"{base(daemon)}/login", json=fresh, headers={CSRF_HEADER: "1"})
        assert no_origin.status_code == 403
        # Only now, with everything right, does the same fresh ticket work: none of the above used it.
        ok = await http.post(f"{base(daemon)}/login", json=fresh, headers={"origin": base(daemon), CSRF_HEADER: "1"})
        assert ok.status_code == 200
        # The Host check (DNS rebinding) comes first, as for /mcp.
        rebound = await http.get(f"{base(daemon)}/api/status", headers={"host": "evil.example"})
        assert rebound.status_code == 421


async def test_sessions_are_capped(daemon: DaemonInfo) -> None:
    clients = [await logged_in(daemon) for _ in range(MAX_SESSIONS + 1)]
    try:
        assert (await clients[0].get(f"{base(daemon)}/api/status")).status_code == 403  # the oldest went
        assert (await clients[-1].get(f"{base(daemon)}/api/status")).status_code == 200
    finally:
        for client in clients:
            await client.aclose()


async def test_toolbridge_open_prints_a_one_time_link(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with running_daemon(home) as info:
        result = await trio.run_process(
            [sys.executable, "-m", "broker", "open", "--print", "--home", str(home)], capture_stdout=True,
            capture_stderr=True,
        )
        link = result.stdout.decode().strip()
        assert link.startswith(f"http://127.0.0.1:{info.http_port}/login#v1.")
        assert info.token not in link
        async with httpx2.AsyncClient(timeout=30) as http:
            assert (await log_in(http, info, link.split("#", 1)[1])).status_code == 200
    stopped = subprocess.run([sys.executable, "-m", "broker", "open", "--print", "--home", str(home)],
                             capture_output=True, text=True)
    assert stopped.returncode == 1 and "toolbridge serve" in stopped.stderr


async def test_a_used_login_link_stays_used_after_a_daemon_restart(tmp_path: Path) -> None:
    """Regression (issue 27, item 15): the daemon remembers used tickets in memory only, so a
    link used once worked again after a restart within its minute. Tickets are bound to the
    daemon's start (runtime.json's ``instance``): the restarted daemon refuses the old one."""
    home = tmp_path / "home"

    async def link() -> str:
        result = await trio.run_process(
            [sys.executable, "-m", "broker", "open", "--print", "--home", str(home)], capture_stdout=True,
            capture_stderr=True)
        return result.stdout.decode().strip().split("#", 1)[1]

    async with running_daemon(home) as first:
        ticket = await link()
        async with httpx2.AsyncClient(timeout=30) as http:
            assert (await log_in(http, first, ticket)).status_code == 200
    async with running_daemon(home) as second:
        async with httpx2.AsyncClient(timeout=30) as http:
            replayed = await log_in(http, second, ticket)
            assert replayed.status_code == 403, "a used link must not work again after a restart"
            assert (await log_in(http, second, await link())).status_code == 200


async def test_a_used_login_link_stays_used_after_the_daemon_process_is_killed_and_restarted(tmp_path: Path) -> None:
    """The same with a real ``toolbridge serve`` process, killed and started again on its home."""
    home = tmp_path / "home"
    daemon = DaemonProcess(home, 0, "--http-port", "0")

    async def link() -> str:
        result = await trio.run_process(
            [sys.executable, "-m", "broker", "open", "--print", "--home", str(home)], capture_stdout=True,
            capture_stderr=True)
        return result.stdout.decode().strip()

    async def redeem(http: httpx2.AsyncClient, url: str) -> int:
        origin, _, ticket = url.partition("/login#")
        response = await http.post(f"{origin}/login", json={"ticket": ticket},
                                   headers={"origin": origin, CSRF_HEADER: "1"})
        return response.status_code

    try:
        await daemon.start()
        used = await link()
        async with httpx2.AsyncClient(timeout=30) as http:
            assert await redeem(http, used) == 200
        daemon.kill()
        await daemon.start()
        async with httpx2.AsyncClient(timeout=30) as http:
            # The same ticket at the new daemon's port (the link's fragment is all it takes).
            replayed = f"http://127.0.0.1:{daemon.http_port}/login#{used.partition('#')[2]}"
            assert await redeem(http, replayed) == 403
            assert await redeem(http, await link()) == 200
    finally:
        daemon.stop()


# --- the state and cancel ------------------------------------------------------------------------


async def test_the_state_shows_apps_sessions_calls_and_cancel_needs_the_csrf_token(daemon: DaemonInfo) -> None:
    async with trio.open_nursery() as nursery, http_client(daemon) as agent:
        app = await ScriptedApp(daemon.port, daemon.token).start(nursery)
        page = await logged_in(daemon)
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "page-test", "version": "9"}}}
        started = await agent.post(mcp_url(daemon), json=init, headers=headers)
        session_headers = {**headers, "mcp-session-id": started.headers["mcp-session-id"]}
        answers: list[Any] = []
        answered = trio.Event()

        async def call_slow() -> None:
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "Demo__slow", "arguments": {}}}
            answers.append(await agent.post(mcp_url(daemon), json=call, headers=session_headers))
            answered.set()

        nursery.start_soon(call_slow)
        await app.until(lambda: len(app.invocations) == 1)
        state = (await page.get(f"{base(daemon)}/api/status")).json()
        [shown] = state["apps"]
        assert (shown["app"], shown["state"], shown["inFlight"]) == ("Demo", "connected", 1)
        assert "Demo__slow" in shown["tools"]
        assert any(s["client"] == "page-test" and s["transport"] == "http" for s in state["sessions"])
        [call] = state["calls"]
        assert call["tool"] == "Demo__slow" and call["elapsedMs"] >= 0
        cancel = f"{base(daemon)}/api/calls/{call['id']}/cancel"
        origin = {"origin": base(daemon)}
        assert (await page.post(cancel, headers={**origin, CSRF_HEADER: "wrong"})).status_code == 403
        assert (await page.post(cancel, headers={**origin, CSRF_HEADER: state["csrf"], "origin": "http://127.0.0.1:1"})
                ).status_code == 403
        async with httpx2.AsyncClient() as stranger:  # no cookie
            assert (await stranger.post(cancel, headers={**origin, CSRF_HEADER: state["csrf"]})).status_code == 403
        assert not app.cancels
        done = await page.post(cancel, headers={**origin, CSRF_HEADER: state["csrf"]})
        assert done.status_code == 200 and done.json() == {"cancelled": True}
        await app.until(lambda: len(app.cancels) == 1)
        with trio.fail_after(10):
            await answered.wait()
        assert "cancelled from the status page" in answers[0].text
        again = await page.post(cancel, headers={**origin, CSRF_HEADER: state["csrf"]})
        assert again.status_code == 404
        state = (await page.get(f"{base(daemon)}/api/status")).json()
        assert state["calls"] == []
        assert state["recent"][0]["tool"] == "Demo__slow" and state["recent"][0]["outcome"] == "cancelled"
        [tool] = state["tools"]
        assert (tool["tool"], tool["calls"], tool["failures"]) == ("Demo__slow", 1, 1)
        # Percentiles from the same buckets as /metrics: ordered, and within the longest bucket.
        assert tool["p50Ms"] <= tool["p95Ms"] <= tool["p99Ms"]
        await page.aclose()
        await app.close()


# --- /metrics --------------------------------------------------------------------------------


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text) for s in family.samples
    }


class OneAtATimeApp(ScriptedApp):
    """The scripted app, taking one call at a time: a second call queues for its slot."""

    def _register(self) -> Register:
        return Register(app_name=self.app_name, token=self.token, tools=self.tools, max_concurrency=1)


async def test_queue_time_and_run_time_are_separate_histograms(tmp_path: Path) -> None:
    # Issue 30 item 12. Two calls of `hang` (its own 300 ms deadline) at once on an app with one
    # slot: the first holds the slot until its deadline while the second waits for it.
    async with running_daemon(tmp_path / "home") as daemon, trio.open_nursery() as nursery:
        await OneAtATimeApp(daemon.port, daemon.token).start(nursery)
        outcomes: list[str] = []

        async def call() -> None:
            outcomes.append((await daemon.core.router.call_tool("Demo__hang", {})).kind)

        async with trio.open_nursery() as calls:
            calls.start_soon(call)
            calls.start_soon(call)
        assert outcomes == ["timeout", "timeout"]
        async with http_client(daemon) as scraper:
            got = samples((await scraper.get(f"{base(daemon)}/metrics")).text)
        labels = (("app", "Demo"), ("tool", "hang"))
        queued, ran = got[("toolbridge_call_queue_seconds_sum", labels)], got[("toolbridge_call_run_seconds_sum", labels)]
        whole = got[("toolbridge_call_duration_seconds_sum", labels)]
        assert ran >= 0.25  # the first call held the slot until its deadline
        assert queued >= 0.1  # the second waited for it
        assert abs(queued + ran - whole) < 0.01
        nursery.cancel_scope.cancel()


async def test_metrics_are_scraped_with_the_token(tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "home") as daemon, trio.open_nursery() as nursery:
        url = f"{base(daemon)}/metrics"
        async with httpx2.AsyncClient(timeout=30) as anonymous:
            refused = await anonymous.get(url)
            assert refused.status_code == 403 and "toolbridge token" in refused.text
            assert "www-authenticate" not in refused.headers
            page = await logged_in(daemon)  # the page's cookie is not a token
            assert (await page.get(url)).status_code == 403
            await page.aclose()
        app = await ScriptedApp(daemon.port, daemon.token).start(nursery)
        outcomes = [await daemon.core.router.call_tool(name, {}) for name in ("Demo__echo", "Demo__echo", "Demo__fail")]
        assert [o.kind for o in outcomes] == ["ok", "ok", "app_error"]
        await daemon.core.router.call_tool("no_such_tool", {})
        agent_secret = tokens.issue(daemon.core.settings.home, "prometheus", ["agent"])
        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {agent_secret}"}, timeout=30) as scraper:
            response = await scraper.get(url)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain; version=")
        got = samples(response.text)
        # Issue 30 item 12: `tool` is the tool's own name, beside `app` (not Demo__echo).
        assert got[("toolbridge_calls_total", (("app", "Demo"), ("outcome", "ok"), ("tool", "echo")))] == 2
        assert got[("toolbridge_calls_total", (("app", "Demo"), ("outcome", "app_error"), ("tool", "fail")))] == 1
        # An unknown tool's name is not a label value (an agent could make up names without end).
        assert got[("toolbridge_calls_total", (("app", ""), ("outcome", "unknown_tool"), ("tool", "(unknown)")))] == 1
        assert "no_such_tool" not in response.text
        for histogram in ("duration", "queue", "run"):
            assert got[(f"toolbridge_call_{histogram}_seconds_count", (("app", "Demo"), ("tool", "echo")))] == 2
            assert got[(f"toolbridge_call_{histogram}_seconds_bucket",
                        (("app", "Demo"), ("le", "+Inf"), ("tool", "echo")))] == 2
        assert got[("toolbridge_build_info", (("version", VERSION),))] == 1
        assert got[("toolbridge_calls_awaiting_answer", ())] == 0  # a gauge, named as one (was _calls_sent)
        assert got[("toolbridge_event_loop_stall_seconds_count", ())] >= 0
        assert ("toolbridge_event_loop_stall_seconds_bucket", (("le", "+Inf"),)) in got
        if sys.platform.startswith("linux"):  # prometheus_client's process collector reads /proc
            assert got[("process_resident_memory_bytes", ())] > 0 and got[("process_open_fds", ())] > 0
        assert got[("toolbridge_apps", (("state", "connected"),))] == 1
        assert got[("toolbridge_app_registrations_total", ())] == 1
        assert got[("toolbridge_app_disconnects_total", ())] == 0
        assert got[("toolbridge_calls_in_flight", (("app", "Demo"),))] == 0
        assert got[("toolbridge_calls_queued", (("app", "Demo"),))] == 0
        assert got[("toolbridge_agent_sessions", (("transport", "http"),))] == 0
        received = got[("toolbridge_app_bytes_total", (("direction", "received"),))]
        sent = got[("toolbridge_app_bytes_total", (("direction", "sent"),))]
        assert received > 0 and sent > 0
        await app.close()
        await daemon.core.changed.wait_until(lambda: not any(i.link for i in daemon.core.registry.instances()))
        async with http_client(daemon) as scraper:
            after = samples((await scraper.get(url)).text)
        assert after[("toolbridge_app_disconnects_total", ())] == 1
        assert after[("toolbridge_apps", (("state", "reconnecting"),))] == 1
        # A departed link's bytes stay counted.
        assert after[("toolbridge_app_bytes_total", (("direction", "received"),))] >= received


async def test_a_failing_observer_never_fails_the_call(daemon: DaemonInfo) -> None:
    def broken(*args: Any) -> None:
        raise RuntimeError("an observer's bug")

    daemon.core.router.observers.insert(0, broken)
    async with trio.open_nursery() as nursery:
        app = await ScriptedApp(daemon.port, daemon.token).start(nursery)
        outcome = await daemon.core.router.call_tool("Demo__echo", {"text": "hi"})
        assert outcome.kind == "ok"
        unknown = await daemon.core.router.call_tool("Demo__nope", {})  # ends inside start_call
        assert unknown.kind == "unknown_tool"
        # The observers after the broken one still ran.
        state = daemon.core.router.observers[1].__self__.state()  # type: ignore[attr-defined]
        assert [c["tool"] for c in state["recent"]] == ["Demo__nope", "Demo__echo"]
        await app.close()
