"""protocol.md decisions of issue 16, against the real daemon over real sockets (no app_client).

One test (or two) per decided item: version negotiation (1), a malformed toolProgress (2),
shutdown (4), the pairing of tool-update answers (7), goodbye (8). Item 3 (invalid_utf8) is in
test_protocol_raw.py's bad-line table and test_wire.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing

from broker.config.settings import Settings
from broker.core.router import CallOutcome
from broker.daemon.run import DaemonInfo, run_daemon
from rawapp import ECHO_TOOL, RawApp


async def start_call(
    nursery: trio.Nursery, info: DaemonInfo, name: str, box: list[CallOutcome], done: trio.Event
) -> None:
    async def agent() -> None:
        box.append(await info.core.router.call_tool(name, {}))
        done.set()

    nursery.start_soon(agent)


# --- item 1: version negotiation -------------------------------------------------------------


async def test_registered_states_the_negotiated_version(daemon: DaemonInfo) -> None:
    """registered.protocolVersion = min(the app's highest, the broker's): always sent."""
    for sent, answered in ((None, 1), (1, 1), (2, 2), (7, 2)):  # the broker's highest is 2 (resources)
        app = await RawApp.connect(daemon.port)
        extra: dict[str, Any] = {} if sent is None else {"protocolVersion": sent}
        registered = await app.register(daemon.token, instanceId=f"v{sent}", **extra)
        assert registered["type"] == "registered"
        assert registered["protocolVersion"] == answered, (sent, registered)
        await app.aclose()


async def test_a_version_below_the_lowest_is_fatal(daemon: DaemonInfo) -> None:
    app = await RawApp.connect(daemon.port)
    error = await app.register(daemon.token, protocolVersion=0)
    assert error["type"] == "error" and error["code"] == "unsupported_version" and error["fatal"] is True
    assert await app.closed()


# --- item 2: a malformed toolProgress --------------------------------------------------------


async def test_a_malformed_progress_is_a_non_fatal_error_and_the_call_goes_on(daemon: DaemonInfo) -> None:
    app = await RawApp.connect(daemon.port)
    await app.register(daemon.token)
    box: list[CallOutcome] = []
    done = trio.Event()
    async with trio.open_nursery() as nursery:
        await start_call(nursery, daemon, "WatchTower__Echo", box, done)
        cid = (await app.recv_type("toolInvocation"))["correlationId"]
        await app.send({"type": "toolProgress", "correlationId": cid, "progress": "x"})
        error = await app.recv_type("error")
        assert error["code"] == "invalid_message" and error["correlationId"] == cid
        assert error.get("fatal", False) is False
        assert not done.is_set()  # the call still runs ...
        await app.send({"type": "toolResponse", "correlationId": cid, "result": {"data": "fine"}})
        await done.wait()
    assert box[0].kind == "ok"  # ... and the app's answer is its outcome


async def test_a_malformed_response_still_fails_its_call_at_once(daemon: DaemonInfo) -> None:
    """Only progress is spared: a response that cannot be read is the call's end."""
    app = await RawApp.connect(daemon.port)
    await app.register(daemon.token)
    box: list[CallOutcome] = []
    done = trio.Event()
    async with trio.open_nursery() as nursery:
        await start_call(nursery, daemon, "WatchTower__Echo", box, done)
        cid = (await app.recv_type("toolInvocation"))["correlationId"]
        await app.send({"type": "toolResponse", "correlationId": cid, "result": 5})
        assert (await app.recv_type("error"))["code"] == "invalid_message"
        await done.wait()
    assert box[0].kind == "app_error"


# --- item 4: shutdown --------------------------------------------------------------------------


async def test_shutdown_cancels_each_call_in_flight_at_its_app_then_closes(tmp_path: Path) -> None:
    shutdown = trio.Event()
    async with trio.open_nursery() as nursery:
        info = await nursery.start(lambda task_status: run_daemon(
            Settings(home=tmp_path / "home", port=0, http_port=None), shutdown=shutdown, task_status=task_status))
        app = await RawApp.connect(info.port)
        await app.register(info.token)
        box: list[CallOutcome] = []
        done = trio.Event()
        await start_call(nursery, info, "WatchTower__Echo", box, done)
        cid = (await app.recv_type("toolInvocation"))["correlationId"]
        shutdown.set()
        cancel = await app.recv_type("toolCancel")
        assert cancel == {"type": "toolCancel", "correlationId": cid, "reason": "shutdown"}
        # Closed right after the cancel, not when the daemon's 1 s drain runs out.
        assert await app.closed(timeout=0.9)
        await done.wait()
        assert box[0].kind == "shutdown"
        await RawApp.close_all()


# --- item 7: pairing tool updates ------------------------------------------------------------


async def test_tool_update_answers_come_in_request_order_without_ids(daemon: DaemonInfo) -> None:
    app = await RawApp.connect(daemon.port)
    await app.register(daemon.token)
    await app.send({"type": "addTools", "tools": [{"name": "Undo"}]})
    await app.send({"type": "addTools", "tools": [{"name": "bad name!"}]})
    await app.send({"type": "removeTools", "names": ["Undo"]})
    first = await app.recv_type("toolsUpdated")
    assert set(first["toolNames"]) == {"Echo", "Undo"}
    second = await app.recv_type("error")
    assert second["code"] == "invalid_tool" and "correlationId" not in second and not second.get("fatal")
    third = await app.recv_type("toolsUpdated")
    assert set(third["toolNames"]) == {"Echo"}


# --- item 8: goodbye ---------------------------------------------------------------------------


async def test_goodbye_releases_the_names_at_once_and_fails_calls_in_flight(daemon: DaemonInfo) -> None:
    app = await RawApp.connect(daemon.port)
    await app.register(daemon.token, instanceId="process-1")
    box: list[CallOutcome] = []
    done = trio.Event()
    async with trio.open_nursery() as nursery:
        await start_call(nursery, daemon, "WatchTower__Echo", box, done)
        await app.recv_type("toolInvocation")
        await app.send({"type": "goodbye"})
        assert await app.closed()  # nothing answered: the broker just closes
        await done.wait()
    assert box[0].kind == "app_disconnected"
    assert [t.agent_name for t in daemon.core.router.list_tools()] == []  # no grace period
    # A restarted app (a new per-process instanceId) gets the plain label back, not WatchTower_2.
    again = await RawApp.connect(daemon.port)
    registered = await again.register(daemon.token, instanceId="process-2")
    assert registered["appLabel"] == "WatchTower"
    assert registered["toolNames"] == {"Echo": "WatchTower__Echo"}


async def test_without_goodbye_the_names_wait_for_the_grace_period(daemon: DaemonInfo) -> None:
    """The contrast: a link that just closes keeps its names (a restart would be WatchTower_2)."""
    app = await RawApp.connect(daemon.port)
    await app.register(daemon.token, instanceId="process-1")
    await app.aclose()
    again = await RawApp.connect(daemon.port)
    registered = await again.register(daemon.token, instanceId="process-2")
    assert registered["appLabel"] == "WatchTower_2"
    assert ECHO_TOOL["name"] in registered["toolNames"]


async def test_app_client_says_goodbye_when_it_stops(daemon: DaemonInfo) -> None:
    """app_client sends goodbye on a clean close: the names go at once; goodbye=False keeps them."""
    from app_client import App

    def names() -> list[str]:
        return [t.agent_name for t in daemon.core.router.list_tools()]

    for goodbye, after in ((True, []), (False, ["Quitter__ping"])):
        app = App("Quitter", host="127.0.0.1", port=daemon.port, token=daemon.token, goodbye=goodbye)

        @app.tool
        def ping() -> str:
            return "pong"

        async with app.connected(timeout=10):
            assert names() == ["Quitter__ping"]
            tool = daemon.core.registry.lookup("Quitter__ping")
            assert tool is not None
            instance = tool.instance
        with trio.fail_after(5):  # the broker reads goodbye (or the close), then unlinks the app
            await daemon.core.registry.changed.wait_until(lambda: instance.link is None)
        # With goodbye the instance is gone at once; without, its grace period keeps the names.
        assert names() == after


# --- item 6: what pathGuard refuses ----------------------------------------------------------


async def test_path_guard_refuses_exactly_dot_dot_segments(daemon: DaemonInfo) -> None:
    """The strings protocol.md lists: refused with the guard on, delivered with pathGuard false."""
    app = await RawApp.connect(daemon.port)
    await app.register(daemon.token, tools=[ECHO_TOOL, {**ECHO_TOOL, "name": "Free", "pathGuard": False}])
    refused = ["..", "../x", "a/../b", "a\\..", "%2e%2e%2fx", "\uff0e\uff0e/x", "a\u2215..\u2215b"]
    passed = ["a..b", "...", "..x", "see ../docs"]
    for text in refused:
        outcome = await daemon.core.router.call_tool("WatchTower__Echo", {"text": text})
        assert outcome.kind == "guard_rejected", text
    async with trio.open_nursery() as nursery:

        async def answer() -> None:
            while True:
                inv = await app.recv_type("toolInvocation")
                await app.send({"type": "toolResponse", "correlationId": inv["correlationId"],
                                "result": {"data": inv["parameters"]["text"]}})

        nursery.start_soon(answer)
        for text in passed:
            assert (await daemon.core.router.call_tool("WatchTower__Echo", {"text": text})).kind == "ok", text
        for text in refused:
            assert (await daemon.core.router.call_tool("WatchTower__Free", {"text": text})).kind == "ok", text
        nursery.cancel_scope.cancel()


# --- item 9: retry rules: no runtime.json, no default port ------------------------------------


async def test_without_runtime_json_the_app_waits_and_never_tries_a_default_port(
    tmp_path: Path, monkeypatch: Any, autojump_clock: trio.testing.MockClock
) -> None:
    """The token is at hand (file and variable) but the daemon is down: nothing is dialled."""
    from app_client import App, ConnectionState
    from app_client.discovery import DaemonAddress

    for name in ("TOOLBRIDGE_PORT", "TOOLBRIDGE_HOST", "TOOLBRIDGE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TOOLBRIDGE_TOKEN", "secret-token")
    (tmp_path / "token").write_text("secret-token\n", encoding="utf-8")
    dialled: list[DaemonAddress] = []

    async def connector(address: DaemonAddress) -> trio.abc.Stream:
        dialled.append(address)
        raise OSError("refused")

    app = App("Waiting", home=tmp_path, connector=connector)
    with trio.move_on_after(60):  # a minute of retries (virtual time)
        await app.run()
    assert dialled == []
    assert app.state is ConnectionState.DISCONNECTED
    assert app.last_error is not None and "runtime.json" in app.last_error


# --- the same rules in the sans-IO machine (app_client.protocol), synchronously ----------------


def _app_machine() -> Any:
    from app_client.protocol import AppConnection, Register

    machine = AppConnection()
    machine.start(Register(app_name="Demo", token="t"))
    return machine


def test_machine_a_registered_above_our_version_is_a_rejection() -> None:
    from app_client.protocol import FATAL_REGISTRATION_CODES, Phase, Registered, Rejected

    machine = _app_machine()
    event = machine.receive_message(Registered("a", "i", "Demo", {}, 5000, protocol_version=3))
    assert isinstance(event, Rejected) and event.error.code == "unsupported_version"
    assert event.error.code in FATAL_REGISTRATION_CODES and machine.phase is Phase.CLOSED
    accepted = _app_machine().receive_message(Registered("a", "i", "Demo", {}, 5000, protocol_version=1))
    assert isinstance(accepted, Registered)
    old_broker = _app_machine().receive_message(Registered("a", "i", "Demo", {}, 5000))
    assert isinstance(old_broker, Registered)  # no version: a broker from before negotiation


def test_machine_goodbye_goes_only_once_registered() -> None:
    import pytest

    from app_client.protocol import Goodbye, LocalProtocolError, Registered

    machine = _app_machine()
    with pytest.raises(LocalProtocolError):
        machine.send(Goodbye())
    machine.receive_message(Registered("a", "i", "Demo", {}, 5000))
    assert machine.send(Goodbye()) == b'{"type":"goodbye"}\n'


def test_retry_rules_in_the_machine_match_protocol_md() -> None:
    """The do-not-retry list of protocol.md ("Retrying a registration") is the library's."""
    import re

    from app_client.protocol import FATAL_REGISTRATION_CODES

    text = (Path(__file__).resolve().parent.parent / "protocol.md").read_text(encoding="utf-8")
    section = text[text.index("- **Do not retry**"):text.index("- **Retry with backoff**")]
    codes = section[section.index("and stop):"):]
    assert set(re.findall(r"`([a-z0-9_]+)`", codes)) == set(FATAL_REGISTRATION_CODES)
