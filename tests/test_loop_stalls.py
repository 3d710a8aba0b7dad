"""The worst inputs of the adversarial run, all at once, against a real daemon process.

While a probe app (app_client, its own process) answers an agent's calls one after another,
hostile peers send: a call whose argument makes a schema ``pattern`` backtrack exponentially,
an ``addTools`` of 50 schemas of ~200 KiB, a 3.8 MB argument full of ``%`` and ``.`` for the
path guard, and a flood of 500 connections without a token. The daemon's loop-stall watchdog
(``toolbridge status``: ``eventLoop``) must see no stall over 100 ms, every probe call must
succeed, and the probe app must never be disconnected.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio

from broker.cli.daemon_client import admin_request
from faultkit import DaemonProcess, ProcessApp, RawAgent, error_kind
from rawapp import RawApp

pytestmark = pytest.mark.skipif(os.name != "posix", reason="holds 500 sockets; POSIX descriptor limits")

REDOS_TOOL = {
    "name": "match",
    "inputSchema": {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}},
}
GUARDED_TOOL = {"name": "store", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}


def big_schema(index: int, size: int = 200 * 1024) -> dict[str, Any]:
    """A valid schema of about ``size`` bytes that takes the slow path (metaschema check): 500
    properties (~80 ms of checking each; more only makes the test slower) and long descriptions."""
    properties = {f"p{index}_{i}": {"type": "string", "minLength": 1, "maxLength": 99} for i in range(500)}
    filler = max(0, size - len(json.dumps(properties)) - 100)
    return {"type": "object", "description": "d" * filler, "properties": properties}


async def _probe(agent: RawAgent, stop: trio.Event, results: list[str], done: trio.Event) -> None:
    n = 0
    try:
        while not stop.is_set():
            n += 1
            response = await agent.call("Probe__echo", {"text": f"probe-{n}"}, timeout=30)
            result = response.get("result", {})
            ok = not result.get("isError") and f"probe-{n}" in json.dumps(result)
            results.append("ok" if ok else json.dumps(response)[:300])
    finally:
        done.set()


async def _redos(port: int, token: str, agent: RawAgent) -> list[str]:
    evil = await RawApp.connect(port)
    reply = await evil.register(token, app_name="Evil", tools=[REDOS_TOOL])
    assert reply["type"] == "registered", reply
    kinds = []
    for _ in range(5):
        response = await agent.call("Evil__match", {"s": "a" * 28 + "!"}, timeout=120)
        kinds.append(error_kind(response) or json.dumps(response)[:200])
    return kinds


async def _huge_schemas(port: int, token: str) -> dict[str, Any]:
    heavy = await RawApp.connect(port)
    reply = await heavy.register(token, app_name="Heavy", tools=[GUARDED_TOOL])
    assert reply["type"] == "registered", reply
    tools = [{"name": f"big{i}", "inputSchema": big_schema(i)} for i in range(50)]
    await heavy.send({"type": "addTools", "tools": tools})
    return await heavy.recv_type("toolsUpdated", timeout=120)


async def _huge_argument(agent: RawAgent) -> dict[str, Any]:
    # Prose, then the guard's worst case: each %uFF05 layer folds into the next escape, and the
    # last one decodes to '.', making '/../x'.
    text = "see 50% off... at a%20b.c " * (3_800_000 // 26) + "/%uFF05" + "uFF05" * 20_000 + "u002e./x"
    return await agent.call("Heavy__store", {"text": text}, timeout=120)


async def _flood(port: int, done: trio.Event) -> None:
    streams = []
    try:
        for _ in range(500):
            try:
                streams.append(await trio.open_tcp_stream("127.0.0.1", port))
            except OSError:
                break
        await done.wait()
    finally:
        with trio.CancelScope(shield=True):
            for stream in streams:
                await trio.aclose_forcefully(stream)


async def test_hostile_inputs_do_not_stall_the_loop_or_disconnect_anyone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # The hostile raw apps do not answer pings: keep them registered for the whole test.
    (home / "config.toml").write_text("heartbeat_timeout = 600.0\n")
    daemon = await DaemonProcess(home, 0, "--no-http").start()
    agents: list[RawAgent] = []
    try:
        async with trio.open_nursery() as nursery:
            probe = await ProcessApp(home, "Probe").start(nursery)
            try:
                prober = await RawAgent.connect(nursery, daemon.port, daemon.token)
                agent = await RawAgent.connect(nursery, daemon.port, daemon.token)  # the hostile one
                agents += [prober, agent]
                stop = trio.Event()
                probe_results: list[str] = []
                probe_done = trio.Event()
                nursery.start_soon(_probe, prober, stop, probe_results, probe_done)
                nursery.start_soon(_flood, daemon.port, stop)
                redos_kinds = await _redos(daemon.port, daemon.token, agent)
                updated = await _huge_schemas(daemon.port, daemon.token)
                guarded = await _huge_argument(agent)
                stop.set()
                await probe_done.wait()  # its last call answered: the links may close now
                status = await admin_request(home, "status")
            finally:
                with trio.CancelScope(shield=True):
                    await probe.stop()
                    for each in agents:
                        await each.aclose()
                    await RawApp.close_all()
            nursery.cancel_scope.cancel()
    finally:
        daemon.stop()
    assert redos_kinds == ["invalid_arguments"] * 5
    assert len(updated["toolNames"]) == 51
    assert error_kind(guarded) == "guard_rejected", guarded
    assert probe_results and set(probe_results) == {"ok"}, probe_results[:5]
    assert not probe.seen("disconnected"), "the probe app was disconnected"
    [probe_app] = [a for a in status["apps"] if a["app"] == "Probe"]
    assert probe_app["connected"]
    loop = status["eventLoop"]
    print(loop, _stalls_in_context(daemon.log()))  # shown when the test fails: what stalled the loop
    assert loop["watching"] and loop["maxStallMs"] < 100, loop


def _stalls_in_context(log: str) -> str:
    """Each stall the watchdog logged, with the two log lines before it (what was going on)."""
    lines = log.splitlines()
    shown = []
    for i, line in enumerate(lines):
        if "event_loop_stalled" in line:
            shown += [text[:300] for text in lines[max(0, i - 2): i + 1]] + ["--"]
    return "\n".join(shown)
