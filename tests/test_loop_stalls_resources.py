"""The resource surface's worst inputs against a real daemon process (issue 27, items 12-13).

Each test starts ``toolbridge serve``, has raw apps and a raw agent send what stalled the loop in
the adversarial run, and reads the loop-stall watchdog's figure (``toolbridge status``:
``eventLoop``), which must stay under 100 ms, as ``test_loop_stalls`` does for tools.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio

from broker.cli.daemon_client import admin_request
from faultkit import DaemonProcess, RawAgent
from rawapp import RawApp

pytestmark = pytest.mark.skipif(os.name != "posix", reason="reads the daemon's log and status as a process")

CAL_TEMPLATE = "cal://{year}-{month}-{day}"
#: A near miss of CAL_TEMPLATE: a backtracking regex tries every way to split the dashes.
NEAR_MISS = "cal://" + "-" * 1000 + "/"


async def _daemon(tmp_path: Path) -> DaemonProcess:
    home = tmp_path / "home"
    home.mkdir()
    # The raw apps do not answer pings: keep them registered for the whole test.
    (home / "config.toml").write_text("heartbeat_timeout = 600.0\n")
    return await DaemonProcess(home, 0, "--no-http").start()


async def _register(daemon: DaemonProcess, name: str, **extra: Any) -> RawApp:
    app = await RawApp.connect(daemon.port)
    reply = await app.register(daemon.token, app_name=name, protocolVersion=2, timeout=60, **extra)
    assert reply["type"] == "registered", reply
    return app


async def _loop(daemon: DaemonProcess) -> dict[str, Any]:
    status = await admin_request(daemon.home, "status")
    loop: dict[str, Any] = status["eventLoop"]
    print(loop, [line[:300] for line in daemon.log().splitlines() if "event_loop_stalled" in line][:5])
    return loop


async def test_near_miss_uris_and_many_long_templates_do_not_stall_the_loop(tmp_path: Path) -> None:
    daemon = await _daemon(tmp_path)
    try:
        async with trio.open_nursery() as nursery:
            cal = await _register(daemon, "Cal", resourceTemplates=[{"uriTemplate": CAL_TEMPLATE, "name": "day"}])
            # 1,000 templates of ~2 KB each (the most an app may declare), each of 400 variables.
            many = [{"uriTemplate": f"t{i}://" + "{v}-" * 400 + "x" * (2040 - 1600 - len(str(i))), "name": f"t{i}"}
                    for i in range(1000)]
            await _register(daemon, "Many", resourceTemplates=many)
            # 1,000 templates whose literal makes str.find slowest (~0.2 ms each on a 2.5 KB URI):
            # linear each, but together a stall unless matching takes turns with the loop.
            worst = [{"uriTemplate": "w://{v}" + "a" * (400 + i % 200) + "b" + "a" * (599 - i % 200) + "{w}z",
                      "name": f"w{i}"} for i in range(1000)]
            await _register(daemon, "Worst", resourceTemplates=worst)
            agent = await RawAgent.connect(nursery, daemon.port, daemon.token)
            answers = []
            for uri in (NEAR_MISS, NEAR_MISS[:600] + "/", "cal://2024-01-02"):
                rid = await agent.request("resources/read", {"uri": f"toolbridge://Cal/{uri}"})
                if uri == "cal://2024-01-02":  # a match goes to the app: answer it
                    read = await cal.recv_type("resourceRead")
                    assert read["uri"] == uri
                    await cal.send({"type": "resourceResponse", "correlationId": read["correlationId"],
                                    "contents": [{"uri": uri, "text": "a day"}]})
                answers.append(await agent.response(rid))
            # An app's own update of a near miss (matched before anyone is told).
            await cal.send({"type": "resourceUpdated", "uri": NEAR_MISS})
            # A near miss of every one of the 1,000 long templates.
            rid = await agent.request("resources/read", {"uri": "toolbridge://Many/t999://" + "-" * 8000})
            answers.append(await agent.response(rid))
            rid = await agent.request("resources/read", {"uri": "toolbridge://Worst/w://" + "a" * 2490 + "z"})
            answers.append(await agent.response(rid))
            loop = await _loop(daemon)
            await agent.aclose()
            await RawApp.close_all()
            nursery.cancel_scope.cancel()
    finally:
        daemon.stop()
    assert [("error" in answer) for answer in answers] == [True, True, False, True, True], answers
    assert answers[2]["result"]["contents"][0]["text"] == "a day"
    assert loop["watching"] and loop["maxStallMs"] < 100, loop


async def test_an_over_long_uri_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    daemon = await _daemon(tmp_path)
    try:
        async with trio.open_nursery() as nursery:
            cal = await _register(daemon, "Cal", resourceTemplates=[{"uriTemplate": CAL_TEMPLATE, "name": "day"}])
            agent = await RawAgent.connect(nursery, daemon.port, daemon.token)
            rid = await agent.request("resources/read", {"uri": "toolbridge://Cal/cal://2024-01-" + "9" * 9000})
            refused = await agent.response(rid)
            await cal.send({"type": "resourceUpdated", "uri": "cal://2024-01-" + "9" * 9000})
            told = await cal.recv_type("error")
            await agent.aclose()
            await RawApp.close_all()
            nursery.cancel_scope.cancel()
    finally:
        daemon.stop()
    assert refused["error"]["code"] == -32602, refused
    assert "at most 8192" in refused["error"]["message"], refused
    assert told["code"] == "invalid_message" and "at most 8192" in told["message"], told


async def _pages(agent: RawAgent, method: str, key: str) -> list[str]:
    """Every page of ``method``, following nextCursor; the entries' keys in order."""
    seen: list[str] = []
    cursor = None
    while True:
        rid = await agent.request(method, {} if cursor is None else {"cursor": cursor})
        result = (await agent.response(rid))["result"]
        seen += [entry[key] for entry in result[method.split("/")[0]]]
        cursor = result.get("nextCursor")
        if cursor is None:
            return seen


async def test_paging_through_63000_prompts_and_resources_does_not_stall_the_loop(tmp_path: Path) -> None:
    """prompts/list over 63,000 prompts took ~1.1 s of loop per page (every entry made and the
    whole list sorted for each page), resources/list ~0.23 s."""
    daemon = await _daemon(tmp_path)
    try:
        async with trio.open_nursery() as nursery:
            for a in range(63):  # the most apps one token may register (64), 1,000 of each per app
                prompts = [{"name": f"prompt_{i:04d}", "description": "d" * 60,
                            "arguments": [{"name": "topic", "required": True}]} for i in range(1000)]
                resources = [{"uri": f"notes://{a}/{i:04d}", "name": f"n{i}", "description": "d" * 60}
                             for i in range(1000)]
                await _register(daemon, f"App{a:02d}", prompts=prompts, resources=resources)
            agent = await RawAgent.connect(nursery, daemon.port, daemon.token)
            prompt_names = await _pages(agent, "prompts/list", "name")
            resource_uris = await _pages(agent, "resources/list", "uri")
            again = await _pages(agent, "prompts/list", "name")
            loop = await _loop(daemon)
            await agent.aclose()
            await RawApp.close_all()
            nursery.cancel_scope.cancel()
    finally:
        daemon.stop()
    assert len(prompt_names) == 63_000 and prompt_names == sorted(prompt_names) == again
    assert len(resource_uris) == 63_000 and resource_uris == sorted(resource_uris)
    assert loop["watching"] and loop["maxStallMs"] < 100, loop


def _tool(index: int) -> dict[str, Any]:
    """An ordinary tool: a few typed, described properties (what makes a registry's objects)."""
    properties = {f"arg{k}": {"type": "string" if k % 2 else "integer", "description": f"argument {k} of t{index}"}
                  for k in range(6)}
    return {"name": f"t{index:04d}", "description": f"tool {index}: does one thing",
            "inputSchema": {"type": "object", "properties": properties, "required": ["arg0"]}}


async def test_garbage_collection_over_19000_tools_does_not_stall_the_loop(tmp_path: Path) -> None:
    """With 19,000 tools registered, full garbage-collection passes took 64-158 ms of loop each
    (every tracked object visited); registration bursts and the calls after must stay under 100 ms."""
    daemon = await _daemon(tmp_path)
    try:
        async with trio.open_nursery() as nursery:
            apps = [await _register(daemon, f"Big{a:02d}", tools=[_tool(i) for i in range(1000)]) for a in range(19)]
            agent = await RawAgent.connect(nursery, daemon.port, daemon.token)

            async def answer(app: RawApp) -> None:
                while True:
                    message = await app.recv(timeout=120)
                    if message["type"] == "ping":
                        await app.send({"type": "pong", "id": message.get("id")})
                    elif message["type"] == "toolInvocation":
                        await app.send({"type": "toolResponse", "correlationId": message["correlationId"],
                                        "result": {"success": True, "data": "ok"}})

            results = []
            async with trio.open_nursery() as answering:
                for app in apps:
                    answering.start_soon(answer, app)
                for n in range(600):  # calls allocate: young collections, and now and then a full one
                    response = await agent.call(f"Big{n % 19:02d}__t{n:04d}", {"arg0": n}, timeout=60)
                    results.append(not response.get("result", {}).get("isError"))
                answering.cancel_scope.cancel()
            loop = await _loop(daemon)
            await agent.aclose()
            await RawApp.close_all()
            nursery.cancel_scope.cancel()
    finally:
        daemon.stop()
    assert all(results) and len(results) == 600
    assert loop["watching"] and loop["maxStallMs"] < 100, loop
