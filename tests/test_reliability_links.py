"""Misbehaving peers over real sockets: an app that stops reading, apps that flood or spoof
correlation ids, agents that go away mid-call.

The daemon runs in the test's trio loop (so its state can be inspected) and listens on real
TCP; well-behaved apps are app_client subprocesses (``tests/faultapp.py``) or scripted raw
apps; misbehaving ones are raw sockets in this process. Times are real; bounds are generous.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import trio.testing
import pytest
import trio

from broker.daemon.connection import Connection
from broker.daemon.run import DaemonInfo, run_daemon
from broker.core.router import CallOutcome
from broker.config.settings_file import load_settings
from faultkit import MODERN_META, ProcessApp, RawAgent, error_kind, result_text
from mcp_testkit import HTTPX_STREAM_WARNINGS, ScriptedApp, mcp_url, relay_command, relay_env, running_daemon
from rawapp import RawApp

pytestmark = [pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS]


async def call(info: DaemonInfo, name: str, args: dict[str, Any], **kw: Any) -> CallOutcome:
    return await info.core.router.call_tool(name, args, **kw)


# --- an app that stops reading its socket --------------------------------------------------------


@pytest.mark.skipif(os.name != "posix", reason="app subprocess killed with SIGKILL at the end")
async def test_an_app_that_stops_reading_is_cut_off_and_nobody_else_notices(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("port = 0\nhttp_port = 0\nwrite_timeout = 1.0\noutbound_queue = 8\n")
    settings = load_settings(None, home, {})
    assert (settings.write_timeout, settings.outbound_queue) == (1.0, 8)
    shutdown = trio.Event()
    async with trio.open_nursery() as nursery:
        info: DaemonInfo = await nursery.start(
            lambda task_status: run_daemon(settings, shutdown=shutdown, task_status=task_status))
        good = await ProcessApp(home, "Good").start(nursery)
        stuck = await RawApp.connect(info.port)
        assert (await stuck.register(info.token, app_name="Stuck", maxConcurrency=64))["type"] == "registered"
        [link] = [link for link in info.core.links.values() if link.label == "Stuck"]
        conn: Connection = link.conn
        # From here on the stuck app never reads: the kernel's buffers fill, then the daemon's.

        outcomes: dict[str, CallOutcome] = {}
        all_ended = trio.Event()
        payload = "x" * (512 * 1024)

        async def stuck_call(i: int) -> None:
            outcomes[f"s{i}"] = await call(info, "Stuck__Echo", {"text": payload}, timeout=60)
            if len(outcomes) == 64:
                all_ended.set()

        good_results: list[CallOutcome] = []

        async def keep_calling_the_good_app() -> None:
            while True:
                good_results.append(await call(info, "Good__echo", {"text": "ok"}, timeout=30))
                await trio.sleep(0.02)  # paces the load on the good app: not a wait for a state

        max_queued = 0

        async def watch_queue() -> None:
            nonlocal max_queued
            while True:
                max_queued = max(max_queued, conn._send.statistics().current_buffer_used)
                await trio.sleep(0.005)  # samples the queue's fill: nothing to wait for

        async with trio.open_nursery() as watchers:
            watchers.start_soon(keep_calling_the_good_app)
            watchers.start_soon(watch_queue)
            started = trio.current_time()
            for i in range(64):  # 32 MiB of invocations: far more than socket buffers hold
                nursery.start_soon(stuck_call, i)
            with trio.fail_after(30):
                await all_ended.wait()
            cut_off_after = trio.current_time() - started
            watchers.cancel_scope.cancel()

        print(f"\nstuck app cut off; all 64 calls failed after {cut_off_after:.2f} s; "
              f"outbound queue peaked at {max_queued} of {settings.outbound_queue}")
        assert max_queued <= settings.outbound_queue  # the daemon never holds more for it
        assert {o.kind for o in outcomes.values()} <= {"app_disconnected"}, {o.kind for o in outcomes.values()}
        assert link.id not in info.core.links
        assert conn.closed_reason is not None and "did not read" in conn.closed_reason
        assert len(info.core.calls) == 0
        # The good app answered throughout, and still does.
        assert good_results and all(r.kind == "ok" for r in good_results), [r.kind for r in good_results]
        assert (await call(info, "Good__echo", {"text": "after"})).kind == "ok"
        await good.stop()
        await RawApp.close_all()
        shutdown.set()


# --- floods of random, stale and foreign correlation ids --------------------------------------------


async def drain_errors(app: RawApp, counts: dict[str, int], ponged: trio.Event) -> None:
    """Read everything the daemon sends the app, counting error codes; answer pings.

    ``ponged`` is set at the first pong the daemon sends."""
    try:
        while True:
            message = await app.recv(timeout=60)
            if message["type"] == "ping":
                await app.send({"type": "pong", "id": message.get("id")})
            key = message.get("code", message["type"])
            counts[key] = counts.get(key, 0) + 1
            if key == "pong":
                ponged.set()
    except (EOFError, trio.BrokenResourceError, trio.ClosedResourceError):
        return


async def test_a_flood_of_random_and_stale_correlation_ids_changes_nothing(daemon: DaemonInfo) -> None:
    rng = random.Random(7)
    flooder = await RawApp.connect(daemon.port)
    await flooder.register(daemon.token, app_name="Flooder", maxConcurrency=4)
    bystander = await RawApp.connect(daemon.port)
    await bystander.register(daemon.token, app_name="Bystander")

    # One finished call gives a stale id.
    async with trio.open_nursery() as nursery:
        box: list[CallOutcome] = []

        async def first() -> None:
            box.append(await call(daemon, "Flooder__Echo", {"text": "first"}))

        nursery.start_soon(first)
        stale = (await flooder.recv_type("toolInvocation"))["correlationId"]
        await flooder.send({"type": "toolResponse", "correlationId": stale, "result": {"data": "first"}})
    assert box[0].kind == "ok"

    outcomes: dict[str, CallOutcome] = {}
    counts: dict[str, int] = {}
    victim_done, ponged = trio.Event(), trio.Event()
    async with trio.open_nursery() as nursery:
        async def agent(key: str, name: str, text: str) -> None:
            outcomes[key] = await call(daemon, name, {"text": text}, timeout=60)
            if key == "victim":
                victim_done.set()

        nursery.start_soon(agent, "victim", "Flooder__Echo", "mine")
        pending = await flooder.recv_type("toolInvocation")
        real = pending["correlationId"]
        nursery.start_soon(drain_errors, flooder, counts, ponged)

        lines = []
        for i in range(6000):
            cid = rng.choice([stale, rng.randrange(0, 2**62), -rng.randrange(1, 2**31), real + rng.randrange(1, 10**6)])
            if rng.random() < 0.2:
                lines.append({"type": "toolProgress", "correlationId": cid, "progress": i})
            elif rng.random() < 0.1:
                lines.append({"type": "error", "code": "boom", "message": "spoofed", "correlationId": cid})
            else:
                lines.append({"type": "toolResponse", "correlationId": cid, "result": {"data": "forged"}})
        blob = b"".join(json.dumps(line).encode() + b"\n" for line in lines)

        async def bystander_serves() -> None:
            for n in range(20):
                nursery.start_soon(agent, f"b{n}", "Bystander__Echo", f"b{n}")
                invocation = await bystander.recv_type("toolInvocation")
                await bystander.send({"type": "toolResponse", "correlationId": invocation["correlationId"],
                                      "result": {"data": invocation["parameters"]["text"]}})

        async with trio.open_nursery() as both:
            both.start_soon(flooder.send, blob)
            both.start_soon(bystander_serves)
        # The flood is over; the daemon is still answering it. Now the real answer:
        await flooder.send({"type": "toolResponse", "correlationId": real, "result": {"data": "mine"}})
        with trio.fail_after(30):
            await victim_done.wait()
        await flooder.send({"type": "ping", "id": 424242})
        with trio.fail_after(30):
            await ponged.wait()
        nursery.cancel_scope.cancel()

    victim = outcomes["victim"]
    assert victim.kind == "ok" and victim.result is not None and victim.result.data == "mine"
    for n in range(20):
        assert outcomes[f"b{n}"].result is not None and outcomes[f"b{n}"].result.data == f"b{n}"
    # Each forged line got an unknown_correlation_id error, unless the daemon's queue to the
    # flooder was full at that moment (errors are dropped rather than buffered without bound).
    assert 0 < counts.get("unknown_correlation_id", 0) <= len(lines)
    assert len(daemon.core.calls) == 0
    assert {i["label"]: i["connected"] for i in daemon.core.registry.summary()} == {"Flooder": True, "Bystander": True}


async def test_an_app_cannot_answer_or_fail_another_apps_call(daemon: DaemonInfo) -> None:
    owner = await RawApp.connect(daemon.port)
    await owner.register(daemon.token, app_name="Owner")
    thief = await RawApp.connect(daemon.port)
    await thief.register(daemon.token, app_name="Thief")
    box: list[CallOutcome] = []
    async with trio.open_nursery() as nursery:
        async def agent() -> None:
            box.append(await call(daemon, "Owner__Echo", {"text": "mine"}))

        nursery.start_soon(agent)
        cid = (await owner.recv_type("toolInvocation"))["correlationId"]
        forgeries: list[dict[str, Any] | bytes] = [
            {"type": "toolResponse", "correlationId": cid, "result": {"data": "stolen"}},
            {"type": "toolProgress", "correlationId": cid, "progress": 1},
            {"type": "error", "code": "boom", "message": "spoofed failure", "correlationId": cid},
            # A malformed response naming the call would fail it if it came from its owner:
            f'{{"type": "toolResponse", "correlationId": {cid}, "result": 5}}\n'.encode(),
        ]
        for forged in forgeries:
            await thief.send(forged)
        codes = [(await thief.recv_type("error"))["code"] for _ in forgeries]
        assert codes == ["unknown_correlation_id"] * 3 + ["invalid_message"]
        await owner.send({"type": "ping", "id": 1})
        assert (await owner.recv_type("pong"))["id"] == 1  # nothing reached the owner meanwhile
        assert not box and len(daemon.core.calls) == 1
        await owner.send({"type": "toolResponse", "correlationId": cid, "result": {"data": "real"}})
    assert box[0].kind == "ok" and box[0].result is not None and box[0].result.data == "real"


# --- agents that go away mid-call -------------------------------------------------------------------


async def open_relay(home: Path) -> trio.Process:
    return await trio.lowlevel.open_process(
        relay_command(home, "--no-start"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, env={**os.environ, **relay_env()},
    )


def modern_call(request_id: int, name: str, **meta: Any) -> bytes:
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
               "params": {"name": name, "arguments": {}, "_meta": {**MODERN_META, **meta}}}
    return json.dumps(message).encode() + b"\n"


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
async def test_a_killed_stdio_relay_cancels_its_calls_at_the_app(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with running_daemon(home, http_port=None) as info, trio.open_nursery() as nursery:
        app = await ScriptedApp(info.port, info.token).start(nursery)
        relay = await open_relay(home)
        assert relay.stdin is not None
        await relay.stdin.send_all(modern_call(1, "Demo__slow") + modern_call(2, "Demo__slow"))
        await app.until(lambda: len(app.invocations) == 2)
        relay.kill()  # the agent's side vanishes without a word
        await app.until(lambda: len(app.cancels) == 2)
        assert {c.correlation_id for c in app.cancels} == {i.correlation_id for i in app.invocations}
        await relay.wait()
        with trio.fail_after(10):
            await info.core.changed.wait_until(lambda: not len(info.core.calls) and not info.core.agent_sessions)
        await app.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the relay notices a closed stdout pipe by poll(2)")
async def test_an_agent_that_closes_both_pipes_cancels_its_calls_at_the_app(tmp_path: Path) -> None:
    """The agent process is gone (stdin at EOF, nobody reading stdout): nobody can use the answer."""
    home = tmp_path / "home"
    async with running_daemon(home, http_port=None) as info, trio.open_nursery() as nursery:
        app = await ScriptedApp(info.port, info.token).start(nursery)
        relay = await open_relay(home)
        assert relay.stdin is not None and relay.stdout is not None
        await relay.stdin.send_all(modern_call(1, "Demo__slow", **{"toolbridge/timeoutMs": 120_000}))
        await app.until(lambda: len(app.invocations) == 1)
        await relay.stdout.aclose()
        await relay.stdin.aclose()
        await app.until(lambda: len(app.cancels) == 1, timeout=20)
        with trio.fail_after(20):
            assert await relay.wait() == 0
        await app.close()


async def test_a_half_closed_agent_still_gets_its_answer(tmp_path: Path) -> None:
    """stdin at EOF but stdout still read: "no more requests", not "cancel" (the answer comes)."""
    home = tmp_path / "home"
    async with running_daemon(home, http_port=None) as info, trio.open_nursery() as nursery:
        app = await ScriptedApp(info.port, info.token).start(nursery)
        relay = await open_relay(home)
        assert relay.stdin is not None and relay.stdout is not None
        await relay.stdin.send_all(modern_call(1, "Demo__hang"))  # times out after 300 ms at the app's request
        await relay.stdin.aclose()
        data = b""
        with trio.fail_after(20):
            while b"\n" not in data:
                data += await relay.stdout.receive_some(65536)
        answer = json.loads(data.split(b"\n")[0])
        assert answer["id"] == 1 and answer["result"]["isError"] is True
        assert "timed out" in answer["result"]["content"][0]["text"]
        await app.until(lambda: len(app.cancels) == 1)  # the deadline's cancel, not a disconnect
        with trio.fail_after(20):
            assert await relay.wait() == 0
        await app.close()


async def test_a_modern_http_client_dropping_its_stream_cancels_the_call(tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "home") as info, trio.open_nursery() as nursery:
        app = await ScriptedApp(info.port, info.token).start(nursery)
        body = json.loads(modern_call(5, "Demo__slow"))
        headers = {"authorization": f"Bearer {info.token}", "accept": "application/json, text/event-stream",
                   "content-type": "application/json", "mcp-protocol-version": "2026-07-28",
                   "mcp-method": "tools/call", "mcp-name": "Demo__slow"}
        async with httpx2.AsyncClient(timeout=30) as http, trio.open_nursery() as client:

            async def post() -> None:
                await http.post(mcp_url(info), json=body, headers=headers)
                raise AssertionError("the call should not have been answered")  # pragma: no cover

            client.start_soon(post)
            await app.until(lambda: len(app.invocations) == 1)
            client.cancel_scope.cancel()  # the client goes away before any byte of the response
        await app.until(lambda: len(app.cancels) == 1)
        assert app.cancels[0].correlation_id == app.invocations[0].correlation_id
        with trio.fail_after(10):
            await info.core.changed.wait_until(lambda: not len(info.core.calls))
        await app.close()


async def test_a_raw_agent_link_dropped_mid_call_cancels_at_the_app(daemon: DaemonInfo) -> None:
    async with trio.open_nursery() as nursery:
        app = await ScriptedApp(daemon.port, daemon.token).start(nursery)
        agent = await RawAgent.connect(nursery, daemon.port, daemon.token)
        ok = await agent.call("Demo__text", {})
        assert result_text(ok) == "just text" and error_kind(ok) is None
        await agent.send(modern_call(99, "Demo__slow"))
        await app.until(lambda: any(i.tool == "slow" for i in app.invocations))
        await agent.aclose()
        await app.until(lambda: len(app.cancels) == 1)
        with trio.fail_after(10):
            await daemon.core.changed.wait_until(lambda: not daemon.core.agent_sessions and not len(daemon.core.calls))
        await app.close()


# --- a quick reconnect racing the old link's grace period ------------------------------------------


async def test_reregistering_before_the_old_links_grace_begins_is_harmless(tmp_path: Path) -> None:
    """Regression: the old link's grace task asserted it had a deadline, and a new registration
    of the same instance landing between the old link's close and that task (a fast reconnect)
    took the deadline away — the AssertionError then ended the whole daemon."""
    from broker.config.settings import Settings
    from broker.daemon.broker_core import BrokerCore
    from broker.daemon.links import _grace

    core = BrokerCore(Settings(home=tmp_path), "token")
    async with trio.open_nursery() as nursery:
        for round_ in range(50):
            a_broker, a_app = trio.testing.memory_stream_pair()
            nursery.start_soon(core.handle_connection, a_broker)
            first = RawApp(a_app)
            assert (await first.register("token", instanceId="same"))["type"] == "registered"
            b_broker, b_app = trio.testing.memory_stream_pair()
            await first.aclose()  # the old link ends ...
            nursery.start_soon(core.handle_connection, b_broker)  # ... and the app is back at once
            second = RawApp(b_app)
            assert (await second.register("token", instanceId="same"))["type"] == "registered", round_
            await second.aclose()
        # The grace task of a link whose instance was already taken over does nothing:
        instance = core.registry.instances()[0]
        instance.grace_deadline = None
        await _grace(core.registry, instance)
        nursery.cancel_scope.cancel()


async def test_a_legacy_http_session_deleted_mid_call_cancels_it(tmp_path: Path) -> None:
    """2025-11-25 and older: a dropped POST is not a cancel (that era's rule); ending the session is."""
    async with running_daemon(tmp_path / "home") as info, trio.open_nursery() as nursery:
        app = await ScriptedApp(info.port, info.token).start(nursery)
        headers = {"authorization": f"Bearer {info.token}", "accept": "application/json, text/event-stream",
                   "content-type": "application/json"}
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "legacy"}}}
        async with httpx2.AsyncClient(timeout=30) as http, trio.open_nursery() as client:
            started = await http.post(mcp_url(info), json=init, headers=headers)
            session = {**headers, "mcp-session-id": started.headers["mcp-session-id"]}
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "Demo__slow", "arguments": {}}}
            client.start_soon(lambda: http.post(mcp_url(info), json=call, headers=session))
            await app.until(lambda: len(app.invocations) == 1)
            assert (await http.delete(mcp_url(info), headers=session)).status_code == 200
            await app.until(lambda: len(app.cancels) == 1)
            client.cancel_scope.cancel()
        with trio.fail_after(10):
            await info.core.changed.wait_until(lambda: not len(info.core.calls))
        await app.close()
