"""The uplink on the wire (against a scripted parent), loops and depth, names, configuration."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from app_client.wire import ToolSpec
from broker.core import names
from broker.config.settings import Settings
from broker.daemon.run import run_daemon
from broker.errors import ConfigError, StartupError
from broker.federation.rules import MAX_HOPS
from broker.federation.uplink import Uplink, hop_budget, parse_address, uplink_options
from fedkit import start_daemon, tool_names, wait_until
from mcp_testkit import ScriptedApp
from rawapp import ECHO_TOOL, RawApp


class ScriptedParent:
    """A broker's app port played by the test: it reads what the uplink sends and answers."""

    def __init__(self) -> None:
        self.connections: trio.MemorySendChannel[RawApp]
        self._send, self.accepted = trio.open_memory_channel[RawApp](10)

    async def serve(self, nursery: trio.Nursery) -> int:
        async def handler(stream: trio.SocketStream) -> None:
            await self._send.send(RawApp(stream))
            await trio.sleep_forever()

        listeners = await nursery.start(trio.serve_tcp, handler, 0)
        return int(listeners[0].socket.getsockname()[1])

    async def next(self) -> RawApp:
        with trio.fail_after(10):
            return await self.accepted.receive()


def registered(register: dict[str, Any], chain: list[str]) -> dict[str, Any]:
    return {
        "type": "registered", "appId": "app-1", "instanceId": register["instanceId"], "appLabel": register["appName"],
        "toolNames": {t["name"]: f"{register['appName']}__{t['name']}" for t in register.get("tools", [])},
        "heartbeatIntervalMs": 60000, "chain": chain,
    }


async def test_what_an_uplink_sends_and_how_it_answers(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        parent = ScriptedParent()
        port = await parent.serve(nursery)
        desk = await start_daemon(nursery, tmp_path / "desk", uplink=f"127.0.0.1:{port}", uplink_name="desk",
                                  uplink_token="parent-secret", reconnect_grace=0.2)
        broker_id = desk.core.broker_id
        assert (tmp_path / "desk" / "broker-id").read_text().strip() == broker_id
        first = await parent.next()
        register = await first.recv()
        assert register["type"] == "register"
        assert (register["appName"], register["token"]) == ("desk", "parent-secret")
        assert register["instanceId"] == f"broker-{broker_id}"  # stable: a restarted child is the same instance
        assert register["via"] == [broker_id]
        assert register["maxConcurrency"] > 1
        assert register.get("tools", []) == []
        await first.send(registered(register, ["parent-id"]))
        await wait_until(desk.core, lambda: desk.core.upstream == ("parent-id",))

        # An app joins the child: its tools go up in one addTools, under the child's names.
        app = await ScriptedApp(desk.port, desk.token).start(nursery)
        added = await first.recv_type("addTools")
        tools = {t["name"]: t for t in added["tools"]}
        assert set(tools) == {f"Demo__{spec.name}" for spec in app.tools}
        assert tools["Demo__hang"]["timeoutMs"] == 300  # the tool's own default deadline travels
        assert tools["Demo__echo"]["via"] == [broker_id]
        assert tools["Demo__echo"]["inputSchema"]["properties"]["text"]["type"] == "string"
        await first.send({"type": "toolsUpdated", "toolNames": {}})

        # The parent "restarts": the child reconnects and registers everything at once.
        await first.aclose()
        link = await parent.next()
        register = await link.recv()
        assert register["instanceId"] == f"broker-{broker_id}"
        assert {t["name"] for t in register["tools"]} == set(tools)
        assert all(t["via"] == [broker_id] for t in register["tools"])
        await link.send(registered(register, ["parent-id"]))

        # A call relayed through the child's pipeline, the budget shrunk by one hop margin.
        await link.send({"type": "toolInvocation", "correlationId": 7, "tool": "Demo__echo",
                         "parameters": {"text": "hi"}, "timeoutMs": 5000})
        answer = await link.recv_type("toolResponse")
        assert answer == {"type": "toolResponse", "correlationId": 7, "result": {"data": {"echo": {"text": "hi"}}}}
        assert app.invocations[-1].timeout_ms is not None and app.invocations[-1].timeout_ms <= 4000

        # Progress goes up when asked for.
        await link.send({"type": "toolInvocation", "correlationId": 8, "tool": "Demo__progress",
                         "parameters": {}, "timeoutMs": 5000, "progress": True})
        progress = [await link.recv_type("toolProgress"), await link.recv_type("toolProgress")]
        assert [(p["progress"], p["message"]) for p in progress] == [(1, "step 1"), (2, "step 2")]
        assert (await link.recv_type("toolResponse"))["result"] == {"data": "done"}

        # A name the child does not have: the error says which hop lacks it.
        await link.send({"type": "toolInvocation", "correlationId": 9, "tool": "Gone__echo", "timeoutMs": 5000})
        missing = await link.recv_type("toolResponse")
        assert missing["result"]["success"] is False
        assert missing["result"]["error"].startswith("at hop 'desk': unknown tool 'Gone__echo'")

        # toolCancel from the parent cancels the call at the app.
        await link.send({"type": "toolInvocation", "correlationId": 10, "tool": "Demo__slow", "timeoutMs": 30000})
        await app.until(lambda: any(i.tool == "slow" for i in app.invocations))
        await link.send({"type": "toolCancel", "correlationId": 10, "reason": "cancelled"})
        await app.until(lambda: len(app.cancels) == 1)

        # An app that joins is added with addTools (coalesced), one that leaves removed.
        other = await ScriptedApp(desk.port, desk.token, "Other", tools=[ToolSpec("ping")]).start(nursery)
        added = await link.recv_type("addTools")
        assert [t["name"] for t in added["tools"]] == ["Other__ping"]
        await link.send({"type": "toolsUpdated", "toolNames": {}})
        await other.close()
        with trio.fail_after(10):  # after the child's grace period
            removed = await link.recv_type("removeTools")
        assert removed["names"] == ["Other__ping"]
        await link.send({"type": "toolsUpdated", "toolNames": {}})
        await app.close()
        desk.shutdown.set()
        nursery.cancel_scope.cancel()


async def test_a_parent_below_us_is_refused(tmp_path: Path) -> None:
    """The child checks the parent's chain: uplinking into a broker below would make a loop."""
    async with trio.open_nursery() as nursery:
        parent = ScriptedParent()
        port = await parent.serve(nursery)
        desk = await start_daemon(nursery, tmp_path / "desk", uplink=f"127.0.0.1:{port}", uplink_name="desk",
                                  uplink_token="x")
        link = await parent.next()
        register = await link.recv()
        await link.send(registered(register, ["other", desk.core.broker_id]))
        assert await link.closed()
        uplink = desk.core.uplink
        with trio.fail_after(10):
            await uplink.changed.wait_until(lambda: "loop" in (uplink.app.last_error or ""))
        assert desk.core.upstream == ()
        desk.shutdown.set()
        nursery.cancel_scope.cancel()


async def test_loops_are_refused(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        a = await start_daemon(nursery, tmp_path / "a")
        b = await start_daemon(nursery, tmp_path / "b", uplink=a.address, uplink_name="b", uplink_token=a.token)
        app = await ScriptedApp(b.port, b.token).start(nursery)
        await wait_until(a.core, lambda: "b__Demo__echo" in tool_names(a.core))

        # a now tries to uplink into b, which is below it.
        loop = Uplink(a.core.router, a.core.registry, a.core.federation, a.core.settings,
                      host="127.0.0.1", port=b.port, name="a", token=b.token)
        nursery.start_soon(loop.run)
        with trio.fail_after(10):
            await loop.changed.wait_until(lambda: "loop" in (loop.app.last_error or ""))
        assert "a__b__Demo__echo" not in tool_names(b.core)
        assert not any(name.startswith("a__") for name in tool_names(b.core))

        # A broker uplinking into itself.
        itself = Uplink(b.core.router, b.core.registry, b.core.federation, b.core.settings,
                        host="127.0.0.1", port=b.port, name="me", token=b.token)
        nursery.start_soon(itself.run)
        with trio.fail_after(10):
            await itself.changed.wait_until(lambda: "loop" in (itself.app.last_error or ""))
        await app.close()
        nursery.cancel_scope.cancel()


async def test_the_parent_checks_via_and_depth(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        daemon = await start_daemon(nursery, tmp_path / "home")
        own = daemon.core.broker_id

        looping = await RawApp.connect(daemon.port)
        reply = await looping.register(daemon.token, app_name="evil", via=["x", own])
        assert (reply["code"], reply["fatal"]) == ("loop_detected", True)

        deep_tool = {**ECHO_TOOL, "via": [f"b{i}" for i in range(MAX_HOPS + 1)]}
        deep = await RawApp.connect(daemon.port)
        reply = await deep.register(daemon.token, app_name="deep", via=["b0"], tools=[deep_tool])
        assert reply["code"] == "too_many_hops"

        ok = await RawApp.connect(daemon.port)
        reply = await ok.register(daemon.token, app_name="fine", via=["b0"],
                                  tools=[{**ECHO_TOOL, "via": [f"b{i}" for i in range(MAX_HOPS)]}])
        assert reply["type"] == "registered" and reply["chain"] == [own]
        # A tool added later that came round through this broker is refused; the link stays.
        await ok.send({"type": "addTools", "tools": [{**ECHO_TOOL, "name": "Back", "via": ["b0", own]}]})
        error = await ok.recv_type("error")
        assert (error["code"], error.get("fatal", False)) == ("loop_detected", False)
        assert "fine__Back" not in tool_names(daemon.core)

        bad = await RawApp.connect(daemon.port)
        reply = await bad.register(daemon.token, app_name="bad", via=["not an id!"])
        assert reply["code"] == "invalid_register"
        for conn in (looping, deep, ok, bad):
            await conn.aclose()
        daemon.shutdown.set()


def test_uplinked_names_stay_within_the_rules() -> None:
    taken: set[str] = set()
    tool = "VeryLongApplicationName__ExportTheCurrentDocumentAsPdf"
    first = names.make_agent_name("build-machine-in-the-cloud", tool, taken)
    assert names.is_valid_agent_name(first) and len(first) == names.MAX_NAME
    assert first == names.make_agent_name("build-machine-in-the-cloud", tool, set())  # stable
    assert names.make_agent_name("desk", "WatchTower__ClickElement", taken) == "desk__WatchTower__ClickElement"


def test_hop_budget() -> None:
    assert hop_budget(30.0) == 29.0
    assert hop_budget(1.0) == pytest.approx(0.8)
    assert 0 < hop_budget(0.0001) <= 0.001
    # Each hop's own wait (its budget plus the router's margin) ends before the parent's deadline.
    for budget in (0.05, 0.3, 1.0, 2.5, 10.0, 30.0, 600.0):
        child = hop_budget(budget)
        assert child + min(0.5, child * 0.1) < budget


def test_uplink_configuration(tmp_path: Path) -> None:
    assert parse_address("172.17.0.2:47700") == ("172.17.0.2", 47700)
    assert parse_address("[::1]:47700") == ("::1", 47700)
    for bad in ("host", "host:0", "host:x", ":47700"):
        with pytest.raises(ConfigError):
            parse_address(bad)
    with pytest.raises(ConfigError, match="needs the parent's token"):
        uplink_options(Settings(home=tmp_path, uplink="127.0.0.1:1"))
    with pytest.raises(ConfigError, match="uplink_name"):
        uplink_options(Settings(home=tmp_path, uplink="127.0.0.1:1", uplink_token="t", uplink_name="a__b"))
    with pytest.raises(StartupError, match="without TLS"):
        uplink_options(Settings(home=tmp_path, uplink="10.1.2.3:47700", uplink_token="t"))
    options = uplink_options(Settings(home=tmp_path, uplink="10.1.2.3:47700", uplink_token="t",
                                      allow_insecure_remote=True))
    assert options is not None and options["ssl_context"] is None
    token_file = tmp_path / "t"
    token_file.write_text(" secret\n")
    options = uplink_options(Settings(home=tmp_path, uplink="localhost:1", uplink_token_file=str(token_file),
                                      uplink_tls=True))
    assert options is not None and options["token"] == "secret" and options["ssl_context"] is not None
    assert options["name"]  # defaults to the host name


async def test_settings_from_the_config_file(tmp_path: Path) -> None:
    from broker.config.settings_file import load_settings

    (tmp_path / "config.toml").write_text('uplink = "127.0.0.1:47700"\nuplink_name = "desk"\nuplink_tls = true\n')
    settings = load_settings(None, tmp_path, environ={"TOOLBRIDGE_UPLINK_TOKEN": "s"})
    assert (settings.uplink, settings.uplink_name, settings.uplink_tls, settings.uplink_token) == (
        "127.0.0.1:47700", "desk", True, "s")
    runtime = tmp_path / "runtime.json"
    assert not runtime.exists() or json.loads(runtime.read_text())
    with pytest.raises(StartupError):
        await run_daemon(Settings(home=tmp_path, host="0.0.0.0", allow_remote=True, port=0, http_port=None))
