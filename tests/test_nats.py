"""Federation over NATS (issue 22): daemons on a real nats-server cluster offer and call tools."""

from __future__ import annotations

import gc
import json
import os
import signal
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

pytest.importorskip("nats")

from app_client.protocol import ToolSpec  # noqa: E402
from broker.config.settings import Settings  # noqa: E402
from broker.errors import ConfigError, StartupError  # noqa: E402
from broker.federation.nats_catalog import Catalog, list_subject  # noqa: E402
from broker.federation.nats_link import check_broker_name, encode_announcement, nats_options  # noqa: E402
from faultkit import DaemonProcess  # noqa: E402
from fedkit import Daemon, start_daemon, tool_names, wait_until  # noqa: E402
from mcp_testkit import HTTPX_STREAM_WARNINGS, ScriptedApp, http_client, mcp_url  # noqa: E402
from natskit import INTERVAL, free_port, nats_client, nats_cluster, nats_of, start_broker  # noqa: E402

pytestmark = [pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS]

#: Fast announcements, so a silent broker is dropped within ~1 s in tests.


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


def announcement(broker: str, interval_ms: int, tools: list[ToolSpec], *, inline: bool = True) -> bytes:
    """What broker ``broker`` (id ``<broker>-id``) would announce with these tools."""
    return encode_announcement(Catalog.build(broker, tools, 1 << 20), f"{broker}-id", interval_ms, inline=inline)




@asynccontextmanager
async def agent(daemon: Daemon, mode: str = "auto") -> AsyncIterator[Client]:
    async with http_client(daemon.info) as http:
        async with Client(streamable_http_client(mcp_url(daemon.info), http_client=http), mode=mode) as client:
            yield client


async def test_an_agent_on_a_calls_apps_on_b_and_c_across_a_three_node_cluster(tmp_path: Path) -> None:
    async with nats_cluster(3) as nodes, trio.open_nursery() as nursery:
        a = await start_broker(nursery, tmp_path, "A", nodes[0], http_port=0)
        b = await start_broker(nursery, tmp_path, "B", nodes[1])
        c = await start_broker(nursery, tmp_path, "C", nodes[2])
        app_b = await ScriptedApp(b.port, b.token).start(nursery)
        app_c = await ScriptedApp(c.port, c.token, app_name="Other").start(nursery)
        await wait_until(a.core, lambda: {"B__Demo__echo", "C__Other__echo"} <= tool_names(a.core))
        assert a.core.status()["nats"] == {"url": nodes[0].url, "name": "A", "connected": True, "reconnects": 0,
                                           "brokers": ["B", "C"], "lastError": None}
        # Only each broker's own tools travel: B sees C's, but does not offer them again.
        await wait_until(b.core, lambda: "C__Other__echo" in tool_names(b.core))
        await wait_until(a.core, lambda: nats_of(a).remotes["B"].digest != "")
        assert not any(name.startswith("B__C__") for name in tool_names(a.core))
        assert not any(name.startswith("A__") for name in tool_names(b.core))  # A has no apps
        # ... and refuses a call for a tool it only learned over NATS (no relaying round a loop).
        relayed = await nats_of(a)._aio.run(nats_of(a)._nc.request("toolbridge.call.B.C__Other__echo", b"{}"))  # type: ignore[union-attr]
        assert b"unknown tool" in relayed.data and not app_c.invocations

        async with agent(a) as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            assert {"B__Demo__echo", "B__Demo__slow", "C__Other__echo"} <= listed

            ok = await client.call_tool("B__Demo__echo", {"text": "hi"})
            assert (ok.is_error, ok.structured_content) == (False, {"echo": {"text": "hi"}})
            assert app_b.invocations[-1].tool == "echo" and app_b.invocations[-1].parameters == {"text": "hi"}
            ok_c = await client.call_tool("C__Other__echo", {"text": "there"})
            assert ok_c.structured_content == {"echo": {"text": "there"}}

            failed = await client.call_tool("B__Demo__fail", {})
            assert failed.is_error and "disk is full" in text_of(failed)

            seen: list[tuple[float, float | None, str | None]] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                seen.append((progress, total, message))

            done = await client.call_tool("B__Demo__progress", {}, progress_callback=on_progress)
            assert text_of(done) == "done"
            assert seen == [(1, 2, "step 1"), (2, 2, "step 2")]
            assert app_b.invocations[-1].progress is True

            invalid = await client.call_tool("B__Demo__echo", {"text": 5})  # A's pipeline checks it
            assert invalid.is_error and "text" in text_of(invalid)

            # The deadline travels in a header and shrinks at B; B's timeout (the nearest) wins.
            timed_out = await client.call_tool("B__Demo__slow", {}, meta={"toolbridge/timeoutMs": 2500})
            assert timed_out.is_error
            assert text_of(timed_out).startswith("at broker 'B': Demo__slow timed out after"), text_of(timed_out)
            assert (timed_out.meta or {}).get("toolbridge/errorKind") == "timeout"
            slow = next(i for i in app_b.invocations if i.tool == "slow")
            assert slow.timeout_ms is not None and slow.timeout_ms <= 2000
            await app_b.until(lambda: len(app_b.cancels) == 1)

        # Cancellation: the agent gives up on A; B cancels its call; the app is told.
        async with agent(a, mode="legacy") as client:
            async with trio.open_nursery() as calls:
                scope = trio.CancelScope()

                async def call() -> None:
                    with scope:
                        await client.call_tool("B__Demo__slow", {})

                calls.start_soon(call)
                await app_b.until(lambda: sum(i.tool == "slow" for i in app_b.invocations) == 2)
                scope.cancel()
            await app_b.until(lambda: len(app_b.cancels) == 2)
        await wait_until(b.core, lambda: len(b.core.calls) == 0)
        await wait_until(a.core, lambda: len(a.core.calls) == 0)

        # Daemon C stops: its tools leave A's list; B's stay.
        c.kill()
        await wait_until(a.core, lambda: not any(n.startswith("C__") for n in tool_names(a.core)))
        assert "B__Demo__echo" in tool_names(a.core)
        assert sorted(nats_of(a).remotes) == ["B"]
        for app in (app_b, app_c):
            await app.close()
        for daemon in (a, b):
            await daemon.stop()
        # Both call logs have each call: A's under the remote name, B's as a call from A over NATS.
        rows_a = call_log(a, "B__Demo__")
        rows_b = call_log(b, "Demo__")
        assert ("B__Demo__echo", "B", "ok") in {(tool, app, kind) for tool, app, kind, *_ in rows_a}
        assert ("B__Demo__slow", "B", "timeout") in {(tool, app, kind) for tool, app, kind, *_ in rows_a}
        # B names the caller by the inbox its answer went to, which only A may read; A could
        # not prove it sent the call, hence "(unverified)" (issue 27 item 7).
        caller = "A (unverified)"
        assert {("Demo__echo", "nats", caller, "ok"), ("Demo__slow", "nats", caller, "timeout"),
                ("Demo__slow", "nats", caller, "cancelled")} <= {(tool, agent, session, kind)
                                                              for tool, _, kind, agent, session in rows_b}


def call_log(daemon: Daemon, prefix: str) -> list[tuple[str, str, str, str, str]]:
    with closing(sqlite3.connect(daemon.home / "calls.sqlite3")) as db:
        return db.execute("SELECT tool, app, error_kind, agent, session FROM calls WHERE tool LIKE ?",
                          (prefix + "%",)).fetchall()


async def test_no_responders_fails_the_call_after_a_short_grace_and_withdraws_the_broker(tmp_path: Path) -> None:
    async with nats_cluster(1) as nodes, trio.open_nursery() as nursery:
        a = await start_broker(nursery, tmp_path, "A", nodes[0], http_port=0)
        # A "broker" that announces a tool and is gone: nobody listens on its call subject.
        ghost = announcement("ghost", 60_000, [ToolSpec("Demo__run", "Runs", {"type": "object"})])
        async with nats_client(nodes[0].url) as (aio, nc, _):
            await wait_until(a.core, lambda: nats_of(a).connected)
            # And one that announces once, fast, then falls silent (a crashed daemon).
            mute = announcement("mute", 400, [ToolSpec("Demo__run", "Runs", {"type": "object"})])
            await aio.run(nc.publish("toolbridge.tools.ghost", ghost))
            await aio.run(nc.publish("toolbridge.tools.mute", mute))
            await aio.run(nc.flush())
            await wait_until(a.core, lambda: "ghost__Demo__run" in tool_names(a.core))
            await wait_until(a.core, lambda: "mute__Demo__run" in tool_names(a.core))
        async with agent(a) as client:
            with trio.fail_after(5):  # the grace (1.6 s), not the 30 s default deadline
                result = await client.call_tool("ghost__Demo__run", {})
            assert result.is_error and "no responders" in text_of(result), text_of(result)
            assert (result.meta or {}).get("toolbridge/errorKind") == "app_disconnected"
            assert "ghost__Demo__run" not in {tool.name for tool in (await client.list_tools()).tools}
        assert len(a.core.calls) == 0
        # Silent for 3.5 of its intervals: dropped without any call.
        await wait_until(a.core, lambda: "mute__Demo__run" not in tool_names(a.core), timeout=5)
        assert sorted(nats_of(a).remotes) == []
        a.shutdown.set()


async def test_a_call_that_finds_no_responders_is_made_again_while_its_broker_comes_back(tmp_path: Path) -> None:
    """NATS says "no responders" when nobody subscribes at that instant: nobody received the
    call, so it is published again for a short grace, as when its broker is moving between two
    nodes of the cluster; it reaches the broker once that is back, and its tools stay."""
    async with nats_cluster(1) as nodes, trio.open_nursery() as nursery:
        a = await start_broker(nursery, tmp_path, "A", nodes[0], http_port=0)
        late = announcement("late", 60_000, [ToolSpec("Demo__run", "Runs", {"type": "object"})])
        async with nats_client(nodes[0].url) as (aio, nc, _):
            await wait_until(a.core, lambda: nats_of(a).connected)
            await aio.run(nc.publish("toolbridge.tools.late", late))
            await aio.run(nc.flush())
            await wait_until(a.core, lambda: "late__Demo__run" in tool_names(a.core))
            outcomes: list[Any] = []

            async def call() -> None:
                outcomes.append(await a.core.router.call_tool("late__Demo__run", {}, timeout=30))

            nursery.start_soon(call)
            # Nobody on the call's subject yet (the broker between two nodes)...
            await wait_until(a.core, lambda: any(entry.unheard for entry in nats_of(a)._outgoing.values()))
            received: list[bytes] = []

            async def answer(msg: Any) -> None:
                received.append(bytes(msg.data))
                await msg.respond(b'{"data": "ran once"}')

            async def subscribe() -> None:
                await nc.subscribe("toolbridge.call.late.>", cb=answer)
                await nc.flush()

            await aio.run(subscribe())  # ...and back: the call, published again, reaches it
            await wait_until(a.core, lambda: bool(outcomes))
        [outcome] = outcomes
        assert outcome.kind == "ok" and outcome.result is not None and outcome.result.data == "ran once", outcome
        assert len(received) == 1  # received once: a "no responders" call had reached nobody
        assert "late__Demo__run" in tool_names(a.core)  # never withdrawn
        a.shutdown.set()


async def test_a_tool_list_fetch_that_finds_no_responders_is_made_again_while_its_broker_comes_back(
        tmp_path: Path) -> None:
    """The same for a tool list: a broker announced only by its digest is asked for its list,
    and a "no responders" then (the broker between two nodes, or the request sent by nats-py
    as this broker's own link came back, before the other's) is asked again for the grace
    instead of dropping the broker (CI once saw B drop A so after a node restart)."""
    tools = [ToolSpec("Demo__run", "Runs", {"type": "object"})]
    catalog = Catalog.build("late", tools, 1 << 20)
    async with nats_cluster(1) as nodes, trio.open_nursery() as nursery:
        a = await start_broker(nursery, tmp_path, "A", nodes[0], http_port=0)
        async with nats_client(nodes[0].url) as (aio, nc, _):
            await wait_until(a.core, lambda: nats_of(a).connected)
            await aio.run(nc.publish("toolbridge.tools.late", announcement("late", 60_000, tools, inline=False)))
            # A broker that never answers is dropped after the grace, not its 210 s of silence.
            await aio.run(nc.publish("toolbridge.tools.gone", announcement("gone", 60_000, tools, inline=False)))
            await aio.run(nc.flush())
            # Nobody answers for its list yet...
            remotes = nats_of(a).remotes
            await wait_until(a.core, lambda: all(name in remotes and remotes[name].list_unheard
                                                 for name in ("late", "gone")))

            async def answer(msg: Any) -> None:
                await msg.respond(catalog.page(json.loads(msg.data)["page"], 1 << 20))

            async def subscribe() -> None:
                await nc.subscribe(list_subject("late"), cb=answer)
                await nc.flush()

            await aio.run(subscribe())  # ...and then it does: asked again, its tools are listed
            await wait_until(a.core, lambda: "late__Demo__run" in tool_names(a.core))
            await wait_until(a.core, lambda: "gone" not in nats_of(a).remotes, timeout=5)
        assert "late" in nats_of(a).remotes
        a.shutdown.set()


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
async def test_a_sigkilled_daemon_fails_calls_soon_and_its_tools_leave(tmp_path: Path) -> None:
    async with nats_cluster(2) as nodes, trio.open_nursery() as nursery:
        a = await start_broker(nursery, tmp_path, "A", nodes[0], http_port=0)
        c = await DaemonProcess(tmp_path / "C", 0, "--no-http", "--nats", nodes[1].url, "--broker-name", "C").start()
        try:
            app_c = await ScriptedApp(c.port, c.token).start(nursery)
            await wait_until(a.core, lambda: "C__Demo__echo" in tool_names(a.core), timeout=20)
            async with agent(a) as client:
                ok = await client.call_tool("C__Demo__echo", {"text": "hi"})
                assert ok.structured_content == {"echo": {"text": "hi"}}
                closed = nodes[1].clients_closed
                c.kill()  # SIGKILL: no goodbye; the NATS server notices the closed socket
                # (In the moment before C's node has seen the socket close and told the cluster, a
                # request could still be routed to C's node and wait for its deadline.)
                await nodes[1].wait_clients_closed(closed + 1)
                with trio.fail_after(5):  # after the no-responders grace (1.6 s), not the 30 s deadline
                    failed = await client.call_tool("C__Demo__echo", {"text": "hi"})
                assert failed.is_error and (failed.meta or {}).get("toolbridge/errorKind") == "app_disconnected"
                assert "no responders" in text_of(failed), text_of(failed)
                assert not any(t.name.startswith("C__") for t in (await client.list_tools()).tools)
            await app_c.close()
        finally:
            c.stop()
        a.shutdown.set()


async def test_a_broker_whose_nats_node_dies_reconnects_to_another_and_calls_resume(tmp_path: Path) -> None:
    async with nats_cluster(2) as nodes, trio.open_nursery() as nursery:
        a = await start_broker(nursery, tmp_path, "A", nodes[0], http_port=0)
        b = await start_broker(nursery, tmp_path, "B", nodes[1])
        app_b = await ScriptedApp(b.port, b.token).start(nursery)
        await wait_until(a.core, lambda: "B__Demo__echo" in tool_names(a.core))
        nodes[1].kill()
        # B learnt the other node from the cluster and moves there; A sees its tools again.
        await wait_until(b.core, lambda: nats_of(b).reconnects == 1, timeout=15)
        assert str(nats_of(b)._nc.connected_url.port) == str(nodes[0].port)
        async with agent(a) as client:
            with trio.fail_after(10):
                while True:
                    result = await client.call_tool("B__Demo__echo", {"text": "back"})
                    if not result.is_error:
                        break
                    # Calls made while B was away fail at once (no responders), never hang.
                    await wait_until(a.core, lambda: "B__Demo__echo" in tool_names(a.core))
            assert result.structured_content == {"echo": {"text": "back"}}
        await app_b.close()
        for daemon in (a, b):
            daemon.shutdown.set()


USERS = 'authorization {{ users = [ {{user: "a", password: "pa"}}{b} ] }}\n'


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="nats-server reloads its configuration on SIGHUP")
async def test_revoking_a_brokers_nats_user_cuts_it_off(tmp_path: Path) -> None:
    config = tmp_path / "nats.conf"
    config.write_text(USERS.format(b=', {user: "b", password: "pb"}'))
    async with nats_cluster(1, config) as nodes, trio.open_nursery() as nursery:
        port = nodes[0].port
        a = await start_daemon(nursery, tmp_path / "A", nats_url=f"nats://a:pa@127.0.0.1:{port}", broker_name="A",
                               nats_announce_interval=INTERVAL, http_port=0)
        b = await start_daemon(nursery, tmp_path / "B", nats_url=f"nats://b:pb@127.0.0.1:{port}", broker_name="B",
                               nats_announce_interval=INTERVAL)
        app_b = await ScriptedApp(b.port, b.token).start(nursery)
        await wait_until(a.core, lambda: "B__Demo__echo" in tool_names(a.core))
        assert "pb" not in str(nats_of(b).status())  # the password is not shown
        # The operator removes B's user and reloads: the server drops B's connection and refuses it.
        config.write_text(USERS.format(b=""))
        assert nodes[0].process is not None
        nodes[0].process.send_signal(signal.SIGHUP)
        with trio.fail_after(10):
            await nodes[0].reloaded.wait()
        await wait_until(b.core, lambda: not nats_of(b).connected)
        # B's tools leave A's list (B can no longer announce), and calls to them fail soon.
        async with agent(a) as client:
            with trio.fail_after(5):
                result = await client.call_tool("B__Demo__echo", {"text": "x"})
            assert result.is_error
        await wait_until(a.core, lambda: "B__Demo__echo" not in tool_names(a.core))
        assert nats_of(a).connected and not nats_of(b).connected
        # B keeps trying (its user may come back); each refused attempt's socket is closed, not
        # left for the garbage collector (nats-py leaves it open: nats_link.close_failed_attempt).
        # The server logs each refused login's close: a few more attempts, then a collection, in
        # which a socket left open would be an unclosed-resource warning, an error here.
        refused = nodes[0].clients_closed
        await nodes[0].wait_clients_closed(refused + 3)
        gc.collect()
        await app_b.close()
        for daemon in (a, b):
            daemon.shutdown.set()


async def test_busy_at_the_owner_reaches_the_caller_with_its_kind_and_retry_after(tmp_path: Path) -> None:
    async with nats_cluster(1) as nodes, trio.open_nursery() as nursery:
        a = await start_broker(nursery, tmp_path, "A", nodes[0])
        b = await start_broker(nursery, tmp_path, "B", nodes[0], max_queue=0)
        app_b = await ScriptedApp(b.port, b.token).start(nursery)  # 8 calls at once
        await wait_until(a.core, lambda: "B__Demo__slow" in tool_names(a.core))
        async with trio.open_nursery() as calls:
            for _ in range(8):
                calls.start_soon(a.core.router.call_tool, "B__Demo__slow", {})
            await app_b.until(lambda: len(app_b.invocations) == 8)
            busy = await a.core.router.call_tool("B__Demo__echo", {"text": "x"})
            calls.cancel_scope.cancel()
        assert busy.kind == "busy" and busy.retry_after_ms is not None and busy.retry_after_ms > 0
        assert busy.message.startswith("at broker 'B': the app Demo is busy"), busy.message
        await app_b.until(lambda: len(app_b.cancels) == 8)  # the callers gave up: the app was told
        await app_b.close()
        for daemon in (a, b):
            daemon.shutdown.set()


async def test_the_daemon_runs_while_nats_is_down_and_joins_when_it_comes(tmp_path: Path) -> None:
    port = free_port()
    async with trio.open_nursery() as nursery:
        a = await start_daemon(nursery, tmp_path / "A", nats_url=f"nats://127.0.0.1:{port}", broker_name="A",
                               nats_announce_interval=INTERVAL)
        app = await ScriptedApp(a.port, a.token).start(nursery)  # the daemon serves its apps meanwhile
        assert "Demo__echo" in tool_names(a.core) and not nats_of(a).connected
        async with nats_cluster(1, ports=[port]) as nodes:
            b = await start_broker(nursery, tmp_path, "B", nodes[0])
            await wait_until(b.core, lambda: "A__Demo__echo" in tool_names(b.core), timeout=15)
            assert nats_of(a).connected
            await app.close()
            for daemon in (a, b):
                await daemon.stop()


async def test_brokers_join_over_tls_verifying_the_server_against_the_ca(tmp_path: Path) -> None:
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1")
    server.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    config = tmp_path / "nats.conf"
    config.write_text(f'tls {{ cert_file: "{tmp_path / "server.pem"}", key_file: "{tmp_path / "server.pem"}" }}\n')
    async with nats_cluster(1, config) as nodes, trio.open_nursery() as nursery:
        url = f"tls://127.0.0.1:{nodes[0].port}"
        a = await start_daemon(nursery, tmp_path / "A", nats_url=url, broker_name="A", nats_tls_ca=str(tmp_path / "ca.pem"),
                               nats_announce_interval=INTERVAL)
        b = await start_daemon(nursery, tmp_path / "B", nats_url=url, broker_name="B", nats_tls_ca=str(tmp_path / "ca.pem"),
                               nats_announce_interval=INTERVAL)
        # Without the CA the server's certificate is not trusted: no connection, and status says why.
        c = await start_daemon(nursery, tmp_path / "C", nats_url=url, broker_name="C")
        app_b = await ScriptedApp(b.port, b.token).start(nursery)
        await wait_until(a.core, lambda: "B__Demo__echo" in tool_names(a.core))
        await wait_until(c.core, lambda: "CERTIFICATE_VERIFY_FAILED" in (nats_of(c).last_error or ""))
        assert not nats_of(c).connected and c.core.status()["nats"]["lastError"] == nats_of(c).last_error
        outcome = await a.core.router.call_tool("B__Demo__echo", {"text": "secure"})
        assert outcome.result is not None and outcome.result.data == {"echo": {"text": "secure"}}
        assert nats_of(a)._nc.connected_url.scheme == "tls"
        await app_b.close()
        for daemon in (a, b, c):
            daemon.shutdown.set()


def test_nats_options_are_checked_before_the_daemon_starts(tmp_path: Path) -> None:
    assert nats_options(Settings(home=tmp_path)) is None
    options = nats_options(Settings(home=tmp_path, nats_url="127.0.0.1:4222", broker_name="desk-1"))
    assert options is not None and options.url == "nats://127.0.0.1:4222" and options.name == "desk-1"
    with pytest.raises(ConfigError, match="broker_name"):
        check_broker_name("a.b")
    with pytest.raises(ConfigError, match="broker_name"):
        check_broker_name("a__b")
    with pytest.raises(ConfigError, match="nats_credentials"):
        nats_options(Settings(home=tmp_path, nats_url="nats://127.0.0.1:4222", nats_credentials=str(tmp_path / "x")))
    with pytest.raises(StartupError, match="without TLS"):
        nats_options(Settings(home=tmp_path, nats_url="nats://nats.example.com:4222"))
    secure = nats_options(Settings(home=tmp_path, nats_url="tls://nats.example.com:4222"))
    assert secure is not None and secure.ssl_context is not None
