"""Calls over NATS that cannot be forged, and that end when their caller or owner is gone
(issue 27: ``broker/federation/nats_calls.py``). Real nats-server processes (``natskit``)."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import structlog
import trio

pytest.importorskip("nats")

from app_client.protocol import ToolProgress, ToolResponse, ToolResult, ToolSpec  # noqa: E402
from broker.federation.nats_catalog import Catalog  # noqa: E402
from broker.federation.nats_link import broker_permissions, encode_announcement, expiry_seconds  # noqa: E402
from faultkit import DaemonProcess  # noqa: E402
from fedkit import start_daemon, tool_names, wait_until  # noqa: E402
from mcp_testkit import ScriptedApp  # noqa: E402
from natskit import INTERVAL, nats_client, nats_cluster, nats_of  # noqa: E402

#: nats-py's NUID: 12 random characters, then a 10-digit base-62 sequence.
NUID_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def nuid_neighbours(token: str, count: int) -> list[str]:
    """The next ``count`` NUIDs after ``token`` for each step an attacker might guess."""
    prefix, digits = token[:12], token[12:22]
    seq = 0
    for char in digits:
        seq = seq * 62 + NUID_DIGITS.index(char)
    out = []
    for step in range(1, count + 1):
        value, text = seq + step, []
        for _ in range(10):
            text.append(NUID_DIGITS[value % 62])
            value //= 62
        out.append(prefix + "".join(reversed(text)))
    return out


def users_config(path: Path, names: list[str]) -> Path:
    """A nats-server configuration: one user per broker with exactly ``broker_permissions``,
    and ``watch``, an observer allowed everything (the test's eyes, not the attacker)."""
    users: list[dict[str, Any]] = [{"user": name, "password": f"pw-{name}", "permissions": broker_permissions(name)}
                                   for name in names]
    users.append({"user": "watch", "password": "pw-watch"})
    path.write_text(json.dumps({"authorization": {"users": users}}))
    return path


@asynccontextmanager
async def brokers_a_and_b(nursery: trio.Nursery, tmp_path: Path, a_url: str, b_url: str, *,
                          b_announce_interval: float = INTERVAL, **a_settings: Any) -> AsyncIterator[tuple[Any, Any, ScriptedApp]]:
    """Daemons A and B in this process, B's scripted app connected, A seeing B's tools: (A, B,
    B's app). ``a_settings`` are A's; both shut down at the end."""
    a = await start_daemon(nursery, tmp_path / "A", nats_url=a_url, broker_name="A",
                           nats_announce_interval=INTERVAL, **a_settings)
    b = await start_daemon(nursery, tmp_path / "B", nats_url=b_url, broker_name="B",
                           nats_announce_interval=b_announce_interval)
    app_b = await ScriptedApp(b.port, b.token).start(nursery)
    await wait_until(a.core, lambda: "B__Demo__slow" in tool_names(a.core))
    yield a, b, app_b
    await app_b.close()
    for daemon in (a, b):
        daemon.shutdown.set()


def call_in_background(nursery: trio.Nursery, daemon: Any, tool: str, *, timeout: float = 60
                       ) -> tuple[list[Any], trio.Event]:
    """Start ``daemon``'s call of ``tool``: (its outcome, once the event is set; the event)."""
    outcomes: list[Any] = []
    ended = trio.Event()

    async def call() -> None:
        outcomes.append(await daemon.core.router.call_tool(tool, {}, timeout=timeout))
        ended.set()

    nursery.start_soon(call)
    return outcomes, ended


# --- item 1: forged results and progress --------------------------------------------------


async def test_a_broker_with_its_documented_permissions_cannot_forge_results_or_progress(tmp_path: Path) -> None:
    config = users_config(tmp_path / "nats.conf", ["A", "B", "E"])
    async with nats_cluster(1, config) as nodes, trio.open_nursery() as nursery:
        port = nodes[0].port

        def url(user: str) -> str:
            return f"nats://{user}:pw-{user}@127.0.0.1:{port}"

        a = await start_daemon(nursery, tmp_path / "A", nats_url=url("A"), broker_name="A",
                               nats_announce_interval=INTERVAL)
        b = await start_daemon(nursery, tmp_path / "B", nats_url=url("B"), broker_name="B",
                               nats_announce_interval=INTERVAL)
        app_b = await ScriptedApp(b.port, b.token).start(nursery)
        async with nats_client(url("E"), inbox_prefix="_INBOX.E") as (e_aio, e_nc, e_errors), \
                nats_client(url("watch")) as (w_aio, w_nc, _):
            # E is a broker like the others: it offers a tool, so A's calls to it show E what
            # A's reply and progress subjects look like.
            seen_by_e: list[Any] = []

            async def e_serves(msg: Any) -> None:
                seen_by_e.append(msg)
                await msg.respond(b'{"data": "peeked"}')

            await e_aio.run(e_nc.subscribe("toolbridge.call.E.>", cb=e_serves))
            spy = encode_announcement(Catalog.build("E", [ToolSpec("Spy__peek", "Peeks", {"type": "object"})], 1 << 20),
                                      "E-id", 60_000, inline=True)
            await e_aio.run(e_nc.publish("toolbridge.tools.E", spy))
            await e_aio.run(e_nc.flush())
            # The observer sees A's call to B (E may not: it cannot subscribe there).
            to_b: list[Any] = []
            watched = trio.Event()
            token = trio.lowlevel.current_trio_token()

            async def watch(msg: Any) -> None:  # on the client's thread
                to_b.append(msg)
                token.run_sync_soon(watched.set)

            await w_aio.run(w_nc.subscribe("toolbridge.call.B.>", cb=watch))
            await w_aio.run(w_nc.flush())
            await wait_until(a.core, lambda: {"E__Spy__peek", "B__Demo__slow"} <= tool_names(a.core))

            progress_seen: list[tuple[float, float | None, str | None]] = []

            def on_progress(progress: float, total: float | None, message: str | None) -> None:
                progress_seen.append((progress, total, message))

            peeked = await a.core.router.call_tool("E__Spy__peek", {}, on_progress=on_progress)
            assert peeked.result is not None and peeked.result.data == "peeked"
            [e_call] = seen_by_e

            outcomes: list[Any] = []
            answered = trio.Event()

            async def call_b() -> None:
                outcomes.append(await a.core.router.call_tool("B__Demo__slow", {}, on_progress=on_progress,
                                                              timeout=30))
                answered.set()

            nursery.start_soon(call_b)
            await app_b.until(lambda: any(i.tool == "slow" for i in app_b.invocations))
            with trio.fail_after(10):
                await watched.wait()
            [call] = to_b
            invocation = next(i for i in app_b.invocations if i.tool == "slow")

            # E attacks with everything it could know, and more: the exact reply subject and
            # progress subject of A's call to B (as if it had guessed them), and a spray of
            # the subjects that follow the ones it saw in its own call from A.
            forged_result = b'{"data": "forged"}'
            forged_progress = json.dumps([99, 100, "forged"]).encode()
            targets = [call.reply]
            if (call.headers or {}).get("Toolbridge-Progress", "").startswith("_INBOX."):
                targets.append(call.headers["Toolbridge-Progress"])
            for subject in (e_call.reply, (e_call.headers or {}).get("Toolbridge-Progress", "")):
                parts = subject.split(".")
                if len(parts) >= 3 and len(parts[2]) == 22:  # a nats-py NUID inbox: spray its neighbours
                    stem = ".".join(parts[:2])
                    targets += [f"{stem}.{n}" for n in nuid_neighbours(parts[2], 1500)]

            async def spray() -> None:
                await e_nc.publish(call.reply, forged_result)
                for subject in targets:
                    await e_nc.publish(subject, forged_progress, headers={"Toolbridge-Kind": "progress"})
                    await e_nc.publish(subject, forged_progress)
                await e_nc.flush()

            await e_aio.run(spray())
            # Only now does B's app answer; the forgeries reached the server before it.
            await app_b.send(ToolProgress(invocation.correlation_id, 1, 2, "real step"))
            await app_b.send(ToolResponse(invocation.correlation_id, ToolResult(data="real")))
            with trio.fail_after(10):
                await answered.wait()
            [outcome] = outcomes
            assert outcome.result is not None and outcome.result.data == "real", outcome
            assert progress_seen == [(1, 2, "real step")]
            # The server itself refused E's messages: it may publish on no inbox of another broker.
            assert any("permissions violation" in error.lower() for error in e_errors), e_errors
            # The reply subject carries 128 random bits, unrelated to any other call's.
            reply_token = call.reply.rsplit(".", 1)[-1]
            assert call.reply.startswith("_INBOX.A.r.") and len(reply_token) == 32
            assert e_call.reply.rsplit(".", 1)[-1] != reply_token
        await app_b.close()
        for daemon in (a, b):
            daemon.shutdown.set()


# --- item 4: this broker's own NATS link is down -------------------------------------------


async def test_calls_fail_at_once_when_this_brokers_nats_link_is_down(tmp_path: Path) -> None:
    async with nats_cluster(1) as nodes, trio.open_nursery() as nursery:
        # B announces rarely: A keeps its tools for minutes after losing touch.
        async with brokers_a_and_b(nursery, tmp_path, nodes[0].url, nodes[0].url,
                                   b_announce_interval=60) as (a, b, app_b):
            in_flight, ended = call_in_background(nursery, a, "B__Demo__slow")
            await app_b.until(lambda: len(app_b.invocations) == 1)
            nodes[0].kill()  # the only node: A reconnects in vain
            with trio.fail_after(10):  # not the call's 60 s
                await ended.wait()
            [lost] = in_flight
            assert lost.kind == "app_disconnected" and "connection was lost" in lost.message, lost
            await wait_until(a.core, lambda: not nats_of(a).connected)
            assert "B__Demo__echo" in tool_names(a.core)
            with trio.fail_after(10):
                down = await a.core.router.call_tool("B__Demo__echo", {"text": "x"}, timeout=60)
            assert down.kind == "app_disconnected" and "NATS connection is down" in down.message, down


async def test_a_broker_cut_off_drops_nobody_for_the_silence_it_could_not_hear(tmp_path: Path) -> None:
    """While A's own link is down it hears nobody: B's silence then is no sign that B is gone,
    so A keeps B's tools past B's window, and gives B its whole window again once it is back
    (CI once saw B withdrawn during a node failover that outlasted 3.5 intervals of 0.3 s)."""
    with structlog.testing.capture_logs() as logs:
        async with nats_cluster(1) as nodes, trio.open_nursery() as nursery:
            url = nodes[0].url
            async with brokers_a_and_b(nursery, tmp_path, url, url) as (a, b, _):
                # The only node dies: both brokers are cut off and retry.
                nodes[0].kill()
                await wait_until(a.core, lambda: not nats_of(a).connected)
                heard, window = nats_of(a).remotes["B"].last_heard, expiry_seconds(INTERVAL)
                # Past B's window and two of A's checks (one each announce interval here).
                await wait_until(a.core, lambda: trio.current_time() > heard + window + 2 * INTERVAL,
                                 timeout=window + 5)
                assert "B__Demo__echo" in tool_names(a.core) and not nats_of(a).connected
                async with nats_cluster(1, ports=[nodes[0].port]):  # the node is back
                    await wait_until(a.core, lambda: nats_of(a).connected and nats_of(b).connected, timeout=15)
                    echoed = await a.core.router.call_tool("B__Demo__echo", {"text": "x"})
                    assert echoed.result is not None and echoed.result.data == {"echo": {"text": "x"}}, echoed
                    assert [entry for entry in logs if entry["event"] == "nats_broker_gone"] == []


# --- item 5: the owner was killed during the call -------------------------------------------


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
async def test_a_call_in_flight_to_a_killed_broker_ends_without_waiting_for_its_silence_timeout(
        tmp_path: Path) -> None:
    async with nats_cluster(2) as nodes, trio.open_nursery() as nursery:
        a = await start_daemon(nursery, tmp_path / "A", nats_url=nodes[0].url, broker_name="A",
                               nats_announce_interval=INTERVAL)
        (tmp_path / "C").mkdir()
        # Dropped after 35 s of silence, far past the 15 s the call may take below; and an
        # announcement lost on its way (NATS delivers at most once) is repeated within 10 s,
        # inside the 20 s this test waits for C's tools (once, A heard nothing from C in 20 s).
        (tmp_path / "C" / "config.toml").write_text("nats_announce_interval = 10\n")
        c = await DaemonProcess(tmp_path / "C", 0, "--no-http", "--nats", nodes[1].url, "--broker-name", "C").start()
        try:
            app_c = await ScriptedApp(c.port, c.token).start(nursery)
            await wait_until(a.core, lambda: "C__Demo__slow" in tool_names(a.core), timeout=20)
            outcomes, ended = call_in_background(nursery, a, "C__Demo__slow", timeout=120)
            await app_c.until(lambda: len(app_c.invocations) == 1)
            c.kill()  # SIGKILL: no goodbye, no answer
            with trio.fail_after(15):
                await ended.wait()
            [outcome] = outcomes
            assert outcome.kind == "app_disconnected" and "stopped answering" in outcome.message, outcome
            await app_c.close()
        finally:
            c.stop()
        a.shutdown.set()


# --- item 3: calls must not run after their caller gave up ----------------------------------


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="SIGSTOP stalls the owner")
async def test_a_stalled_owner_does_not_run_calls_its_caller_gave_up_on(tmp_path: Path) -> None:
    async with nats_cluster(1) as nodes, trio.open_nursery() as nursery:
        a = await start_daemon(nursery, tmp_path / "A", nats_url=nodes[0].url, broker_name="A",
                               nats_announce_interval=INTERVAL)
        (tmp_path / "B").mkdir()
        (tmp_path / "B" / "config.toml").write_text("nats_announce_interval = 60\n")
        b = await DaemonProcess(tmp_path / "B", 0, "--no-http", "--nats", nodes[0].url, "--broker-name", "B").start()
        try:
            app_b = await ScriptedApp(b.port, b.token).start(nursery)
            await wait_until(a.core, lambda: "B__Demo__echo" in tool_names(a.core), timeout=20)
            ok = await a.core.router.call_tool("B__Demo__echo", {"text": "before"})
            assert ok.result is not None and app_b.invocations[-1].parameters == {"text": "before"}
            assert b.process is not None
            b.process.send_signal(signal.SIGSTOP)  # B stalls (a 20 s stall in the issue)
            try:
                gave_up = await a.core.router.call_tool("B__Demo__echo", {"text": "stale"}, timeout=1.5)
                assert gave_up.kind in ("timeout", "app_disconnected"), gave_up
            finally:
                b.process.send_signal(signal.SIGCONT)
            # B catches up with what was sent meanwhile: the stale call, then its cancel.
            after = await a.core.router.call_tool("B__Demo__echo", {"text": "after"}, timeout=20)
            assert after.result is not None, after
            assert [i.parameters for i in app_b.invocations if i.tool == "echo"] == [{"text": "before"},
                                                                                   {"text": "after"}]
            await app_b.close()
        finally:
            b.stop()
        a.shutdown.set()


async def test_an_owner_never_starts_a_call_cancelled_early_past_its_deadline_or_answered_off_inbox(
        tmp_path: Path) -> None:
    import time

    async with nats_cluster(1) as nodes, trio.open_nursery() as nursery:
        b = await start_daemon(nursery, tmp_path / "B", nats_url=nodes[0].url, broker_name="B",
                               nats_announce_interval=INTERVAL)
        app_b = await ScriptedApp(b.port, b.token).start(nursery)
        await wait_until(b.core, lambda: nats_of(b).connected)
        async with nats_client(nodes[0].url) as (aio, nc, _):

            async def send_all() -> bytes:
                # In this order, from one client, so B gets them in this order.
                await nc.publish("toolbridge.cancel.B", b"", headers={"Toolbridge-Call-Id": "early-1"})
                await nc.publish("toolbridge.call.B.Demo__echo", b'{"text": "cancelled first"}',
                                 reply=nc.new_inbox(), headers={"Toolbridge-Call-Id": "early-1"})
                # A reply subject that is not an inbox: B would say goodbye for itself.
                await nc.publish("toolbridge.call.B.Demo__echo", b'{"text": "answer on bye"}',
                                 reply="toolbridge.bye.B", headers={"Toolbridge-Call-Id": "evil-1"})
                past = str(round((time.time() - 5) * 1000))
                late = await nc.request("toolbridge.call.B.Demo__echo", b'{"text": "too late"}', timeout=10,
                                        headers={"Toolbridge-Call-Id": "late-1", "Toolbridge-Timeout-Ms": "30000",
                                                 "Toolbridge-Deadline": past})
                after = await nc.request("toolbridge.call.B.Demo__echo", b'{"text": "after"}', timeout=10)
                return bytes(late.data) + b"\n" + bytes(after.data)

            late, after = (await aio.run(send_all())).split(b"\n")
        assert json.loads(late)["errorKind"] == "timeout" and b"deadline passed" in late, late
        assert json.loads(after)["data"] == {"echo": {"text": "after"}}
        assert [i.parameters for i in app_b.invocations] == [{"text": "after"}]
        await app_b.close()
        b.shutdown.set()


async def test_an_owner_cancels_the_call_of_a_caller_that_is_gone(tmp_path: Path) -> None:
    async with nats_cluster(2) as nodes, trio.open_nursery() as nursery:
        b = await start_daemon(nursery, tmp_path / "B", nats_url=nodes[0].url, broker_name="B",
                               nats_announce_interval=INTERVAL)
        app_b = await ScriptedApp(b.port, b.token).start(nursery)
        await wait_until(b.core, lambda: nats_of(b).connected)
        kinds: list[str] = []
        alive = trio.Event()
        token = trio.lowlevel.current_trio_token()
        # A caller on the other node of the cluster, as a broker calls: it listens on its
        # reply subject, and B sends it keep-alives there while it runs the call.
        async with nats_client(nodes[1].url, inbox_prefix="_INBOX.X") as (aio, nc, _):

            async def on_reply(msg: Any) -> None:  # on the client's thread
                kinds.append((msg.headers or {}).get("Toolbridge-Kind", "result"))
                token.run_sync_soon(alive.set)

            reply = "_INBOX.X.r.0123456789abcdef0123456789abcdef"
            announced = trio.Event()

            async def on_announce(msg: Any) -> None:  # on the client's thread
                token.run_sync_soon(announced.set)

            async def listen() -> None:
                await nc.subscribe(reply, cb=on_reply)
                await nc.subscribe("toolbridge.tools.B", cb=on_announce)
                await nc.flush()

            async def call() -> None:
                await nc.publish("toolbridge.call.B.Demo__slow", b"{}", reply=reply,
                                 headers={"Toolbridge-Call-Id": "gone-1", "Toolbridge-Timeout-Ms": "60000"})
                await nc.flush()

            await aio.run(listen())
            # B's announcement reaching this node comes down the same route, after B's call
            # subscription: this node knows where to send the call (else it drops it, unheard).
            with trio.fail_after(10):
                await announced.wait()
            await aio.run(call())
            await app_b.until(lambda: len(app_b.invocations) == 1)
            with trio.fail_after(10):
                await alive.wait()
            assert kinds[0] == "alive"
        # The caller is gone (its connection closed) without a cancel: B notices at its next
        # keep-alive (nobody listens on the reply subject any more) and tells its app.
        await app_b.until(lambda: len(app_b.cancels) == 1)
        await wait_until(b.core, lambda: len(b.core.calls) == 0)
        await app_b.close()
        b.shutdown.set()


async def test_an_owner_that_loses_its_nats_link_cancels_the_calls_it_can_no_longer_answer(
        tmp_path: Path) -> None:
    async with nats_cluster(2) as nodes, trio.open_nursery() as nursery:
        async with brokers_a_and_b(nursery, tmp_path, nodes[0].url, nodes[1].url) as (a, b, app_b):
            outcomes, ended = call_in_background(nursery, a, "B__Demo__slow")
            await app_b.until(lambda: len(app_b.invocations) == 1)
            nodes[1].kill()  # B's node: B moves to node 0, but its answer could not reach A
            await app_b.until(lambda: len(app_b.cancels) == 1)
            with trio.fail_after(10):
                await ended.wait()
            assert outcomes[0].kind == "app_disconnected", outcomes[0]


async def test_calls_to_a_dropped_broker_are_cancelled_there(tmp_path: Path) -> None:
    async with nats_cluster(1) as nodes, trio.open_nursery() as nursery:
        async with brokers_a_and_b(nursery, tmp_path, nodes[0].url, nodes[0].url) as (a, b, app_b):
            outcomes, ended = call_in_background(nursery, a, "B__Demo__slow")
            await app_b.until(lambda: len(app_b.invocations) == 1)
            nats_of(a)._drop_remote("B", "it stopped announcing its tools")  # as A's expiry does
            with trio.fail_after(10):
                await ended.wait()
            assert outcomes[0].kind == "app_disconnected"
            await app_b.until(lambda: len(app_b.cancels) == 1)  # B was told, and told its app


# --- item 7: remote results are bounded like an app's line ----------------------------------


async def test_a_remote_result_over_max_line_bytes_is_refused(tmp_path: Path) -> None:
    async with nats_cluster(1) as nodes, trio.open_nursery() as nursery:
        async with brokers_a_and_b(nursery, tmp_path, nodes[0].url, nodes[0].url,
                                   max_line_bytes=64 * 1024) as (a, b, app_b):
            small = await a.core.router.call_tool("B__Demo__echo", {"text": "x" * 1000})
            assert small.result is not None and small.result.success
            # B's own limit (16 MiB) lets the answer through; A's does not.
            big = await a.core.router.call_tool("B__Demo__echo", {"text": "x" * 100_000})
            assert big.kind == "app_error" and "max_line_bytes" in big.message, big
