"""Deadlines, grace periods, heartbeats and admission, on trio's virtual clock.

Broker and app are joined by in-memory streams so ``autojump_clock`` can run a 30 s deadline
in microseconds; the app side is the raw protocol (``RawApp``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from broker.config.settings import Settings
from broker.daemon.broker_core import BrokerCore
from broker.core.router import CallOutcome
from rawapp import ECHO_TOOL, RawApp

TOKEN = "test-token"


def make_core(tmp_path: Path, **overrides: Any) -> BrokerCore:
    return BrokerCore(Settings(home=tmp_path, **overrides), TOKEN)


class Harness:
    def __init__(self, core: BrokerCore, nursery: trio.Nursery) -> None:
        self.core = core
        self.nursery = nursery
        self.outcomes: dict[str, CallOutcome] = {}
        self._done: dict[str, trio.Event] = {}

    def _event(self, key: str) -> trio.Event:
        return self._done.setdefault(key, trio.Event())

    async def app(self, *, lockstep: bool = False, register: bool = True, **fields: Any) -> RawApp:
        pair = trio.testing.lockstep_stream_pair if lockstep else trio.testing.memory_stream_pair
        broker_end, app_end = pair()
        self.nursery.start_soon(self.core.handle_connection, broker_end)
        app = RawApp(app_end)
        if register:
            reply = await app.register(TOKEN, **fields)
            assert reply["type"] == "registered", reply
        return app

    def call(self, key: str, name: str = "WatchTower__Echo", args: dict[str, Any] | None = None, **kw: Any) -> None:
        async def run() -> None:
            self.outcomes[key] = await self.core.router.call_tool(name, args or {}, **kw)
            self._event(key).set()

        self.nursery.start_soon(run)

    async def outcome(self, key: str) -> CallOutcome:
        await self._event(key).wait()
        return self.outcomes[key]


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with trio.open_nursery() as nursery:
        # Heartbeats are tested on their own; here RawApp does not answer pings.
        h = Harness(make_core(tmp_path, max_queue=2, heartbeat_interval=1000, heartbeat_timeout=5000), nursery)
        yield h
        nursery.cancel_scope.cancel()


async def test_default_deadline_times_out_and_cancels_at_the_app(harness: Harness, autojump_clock: Any) -> None:
    app = await harness.app()
    start = trio.current_time()
    harness.call("slow")
    invocation = await app.recv_type("toolInvocation")
    assert invocation["timeoutMs"] == 30_000
    outcome = await harness.outcome("slow")
    elapsed = trio.current_time() - start
    assert outcome.kind == "timeout"
    assert "timed out after 30 s" in outcome.message
    assert 30 <= elapsed <= 30.6  # the deadline plus the small margin for the app's own error
    cancel = await app.recv_type("toolCancel")
    assert cancel["correlationId"] == invocation["correlationId"]
    assert len(harness.core.calls) == 0


async def test_tool_and_call_timeouts(harness: Harness, autojump_clock: Any) -> None:
    app = await harness.app(tools=[{**ECHO_TOOL, "timeoutMs": 2000}])
    start = trio.current_time()
    harness.call("tool")
    assert (await app.recv_type("toolInvocation"))["timeoutMs"] == 2000
    assert (await harness.outcome("tool")).kind == "timeout"
    assert 2 <= trio.current_time() - start <= 2.3
    await app.recv_type("toolCancel")

    start = trio.current_time()
    harness.call("call", timeout=0.5)
    assert (await app.recv_type("toolInvocation"))["timeoutMs"] == 500
    outcome = await harness.outcome("call")
    assert outcome.kind == "timeout" and "0.5 s" in outcome.message
    assert trio.current_time() - start < 0.6


async def test_the_apps_own_timeout_message_wins(harness: Harness, autojump_clock: Any) -> None:
    app = await harness.app(tools=[{**ECHO_TOOL, "timeoutMs": 1000}])
    harness.call("c")
    inv = await app.recv_type("toolInvocation")
    await trio.sleep(inv["timeoutMs"] / 1000)  # the app gives up exactly at its deadline
    await app.send({"type": "toolResponse", "correlationId": inv["correlationId"],
                    "result": {"success": False, "error": "the dialog never opened"}})
    outcome = await harness.outcome("c")
    assert outcome.kind == "app_error" and outcome.message == "the dialog never opened"


async def test_call_waits_for_a_reconnect_within_grace(harness: Harness, autojump_clock: Any) -> None:
    app = await harness.app(instanceId="main")
    await app.aclose()
    await trio.sleep(1)
    harness.call("waits")
    await trio.sleep(2)  # still inside the 5 s grace: the call waits, tools stay listed
    assert "waits" not in harness.outcomes
    assert [t.agent_name for t in harness.core.router.list_tools()] == ["WatchTower__Echo"]
    back = await harness.app(instanceId="main")
    inv = await back.recv_type("toolInvocation")
    await back.send({"type": "toolResponse", "correlationId": inv["correlationId"], "result": {"data": "hi"}})
    outcome = await harness.outcome("waits")
    assert outcome.kind == "ok" and outcome.result is not None and outcome.result.data == "hi"


async def test_grace_runs_out_then_tools_go(harness: Harness, autojump_clock: Any) -> None:
    app = await harness.app(instanceId="main")
    version = harness.core.registry.version
    await app.aclose()
    await trio.sleep(0.1)
    start = trio.current_time()
    harness.call("lost")
    outcome = await harness.outcome("lost")
    assert outcome.kind == "app_disconnected" and "did not come back within 5 s" in outcome.message
    assert 4.8 <= trio.current_time() - start <= 5.1
    await trio.sleep(0.1)
    assert harness.core.router.list_tools() == []
    assert harness.core.registry.version > version
    after = await harness.core.router.call_tool("WatchTower__Echo", {})
    assert after.kind == "unknown_tool"


async def test_silent_app_is_dropped_but_busy_app_that_pongs_is_not(tmp_path: Path, autojump_clock: Any) -> None:
    async with trio.open_nursery() as nursery:
        await _heartbeats(Harness(make_core(tmp_path), nursery))
        nursery.cancel_scope.cancel()


async def _heartbeats(harness: Harness) -> None:
    silent = await harness.app(app_name="Silent")
    busy = await harness.app(app_name="Busy")
    harness.call("busy", "Busy__Echo", timeout=120)
    harness.call("silent", "Silent__Echo", timeout=120)
    await busy.recv_type("toolInvocation")

    async def answer_pings() -> None:  # the reader thread of a busy GUI app still pongs
        while True:
            message = await busy.recv(timeout=1000)
            if message["type"] == "ping":
                await busy.send({"type": "pong", "id": message["id"]})

    harness.nursery.start_soon(answer_pings)
    start = trio.current_time()
    outcome = await harness.outcome("silent")
    assert outcome.kind == "app_disconnected"
    assert 19 <= trio.current_time() - start <= 26  # heartbeat timeout 20 s, checked every 5 s
    await trio.sleep(60)
    assert "busy" not in harness.outcomes  # alive, waiting on its call
    del silent


async def test_an_app_dropped_for_silence_still_gets_its_grace_period(tmp_path: Path, autojump_clock: Any) -> None:
    """The heartbeat cancels the connection's scope; the grace period runs after it all the same:
    the tools stay listed for ``reconnect_grace``, then go."""
    async with trio.open_nursery() as nursery:
        harness = Harness(make_core(tmp_path), nursery)  # heartbeat 5 s, timeout 20 s, grace 5 s
        core = harness.core
        silent = await harness.app(app_name="Silent", instanceId="main")
        start = trio.current_time()
        with trio.fail_after(60):
            await core.changed.wait_until(lambda: core.registry.instances()[0].link is None)
        dropped = trio.current_time()
        assert 19 <= dropped - start <= 26
        assert [t.agent_name for t in core.router.list_tools()] == ["Silent__Echo"]
        with trio.fail_after(60):
            await core.changed.wait_until(lambda: not core.router.list_tools())
        assert 4.9 <= trio.current_time() - dropped <= 5.1
        del silent
        nursery.cancel_scope.cancel()


async def test_register_must_come_in_time(harness: Harness, autojump_clock: Any) -> None:
    """A connection that has begun its first line gets register_timeout (5 s) for all of it."""
    app = await harness.app(register=False)
    start = trio.current_time()
    await trio.sleep(0.5)
    await app.send(b'{"type": "register", ')
    error = await app.recv(timeout=60)
    assert error["code"] == "register_timeout" and error["fatal"] is True
    assert 5 <= trio.current_time() - start <= 5.1
    assert await app.closed()


async def test_a_connection_that_sends_nothing_is_let_go_after_first_byte_timeout(
        harness: Harness, autojump_clock: Any) -> None:
    """Idle connections may not hold a waiting slot for the whole register_timeout."""
    app = await harness.app(register=False)
    start = trio.current_time()
    error = await app.recv(timeout=60)
    assert error["code"] == "register_timeout" and error["fatal"] is True
    assert "nothing received within 1 s" in error["message"]
    assert 1 <= trio.current_time() - start <= 1.1
    assert await app.closed()


async def test_admission_fifo_and_busy_when_queue_full(harness: Harness, autojump_clock: Any) -> None:
    app = await harness.app(maxConcurrency=1)
    for key in ("a", "b", "c"):
        harness.call(key, args={"text": key})
        await trio.sleep(0.01)
    first = await app.recv_type("toolInvocation")
    assert first["parameters"] == {"text": "a"}
    harness.call("d", args={"text": "d"})  # 1 running + 2 queued (max_queue=2): full
    rejected = await harness.outcome("d")
    assert rejected.kind == "busy" and rejected.retry_after_ms and rejected.retry_after_ms >= 100
    assert "retry after" in rejected.message
    seen = [first["parameters"]["text"]]
    inv = first
    for _ in range(2):
        await app.send({"type": "toolResponse", "correlationId": inv["correlationId"], "result": {}})
        inv = await app.recv_type("toolInvocation")
        seen.append(inv["parameters"]["text"])
    assert seen == ["a", "b", "c"]
    await app.send({"type": "toolResponse", "correlationId": inv["correlationId"], "result": {}})
    assert [(await harness.outcome(k)).kind for k in "abc"] == ["ok"] * 3


async def test_app_that_stops_reading_is_disconnected(tmp_path: Path, autojump_clock: Any) -> None:
    async with trio.open_nursery() as nursery:
        h = Harness(make_core(tmp_path, write_timeout=3, outbound_queue=4, heartbeat_interval=1000), nursery)
        other = await h.app(app_name="Other")
        stuck = await h.app(lockstep=True, app_name="Stuck", maxConcurrency=100)
        for i in range(20):  # far more than the outbound queue holds: senders must wait
            h.call(f"s{i}", "Stuck__Echo", timeout=60)
        h.call("other", "Other__Echo")
        inv = await other.recv_type("toolInvocation")
        await other.send({"type": "toolResponse", "correlationId": inv["correlationId"], "result": {}})
        assert (await h.outcome("other")).kind == "ok"  # unaffected by its stuck neighbour
        outcomes = [await h.outcome(f"s{i}") for i in range(20)]
        assert {o.kind for o in outcomes} == {"app_disconnected"}
        assert trio.current_time() < 10
        assert len(h.core.calls) == 0
        del stuck
        nursery.cancel_scope.cancel()


async def test_shutdown_fails_calls_in_flight(harness: Harness, autojump_clock: Any) -> None:
    app = await harness.app()
    harness.call("pending")
    await app.recv_type("toolInvocation")
    assert harness.core.begin_shutdown() == 1
    outcome = await harness.outcome("pending")
    assert outcome.kind == "shutdown" and "shutting down" in outcome.message
    refused = await harness.core.router.call_tool("WatchTower__Echo", {})
    assert refused.kind == "shutdown"


async def test_cancel_while_queued_frees_the_slot(harness: Harness, autojump_clock: Any) -> None:
    app = await harness.app(maxConcurrency=1)
    harness.call("running")
    inv = await app.recv_type("toolInvocation")
    with trio.move_on_after(1):
        await harness.core.router.call_tool("WatchTower__Echo", {"text": "queued"})
    harness.call("next", args={"text": "next"})
    await app.send({"type": "toolResponse", "correlationId": inv["correlationId"], "result": {}})
    nxt = await app.recv_type("toolInvocation")
    assert nxt["parameters"] == {"text": "next"}  # the cancelled one never reached the app
    await app.send({"type": "toolResponse", "correlationId": nxt["correlationId"], "result": {}})
    assert (await harness.outcome("next")).kind == "ok"


async def test_cancellations_are_not_lost_to_a_full_queue(tmp_path: Path, autojump_clock: Any) -> None:
    """An app that reads slowly still hears of every call it was sent and that was cancelled."""
    async with trio.open_nursery() as nursery:
        h = Harness(make_core(tmp_path, write_timeout=600, outbound_queue=4, heartbeat_interval=1000), nursery)
        slow = await h.app(lockstep=True, app_name="Slow", maxConcurrency=100)
        for i in range(120):
            h.call(f"c{i}", "Slow__Echo", timeout=1)
        outcomes = [await h.outcome(f"c{i}") for i in range(120)]
        assert {o.kind for o in outcomes} == {"timeout"}
        # Now the app reads: every invocation that reached its queue is followed by its cancel.
        invoked: set[int] = set()
        cancelled: set[int] = set()
        with trio.move_on_after(5):
            while True:
                message = await slow.recv(timeout=1000)
                if message["type"] == "toolInvocation":
                    invoked.add(message["correlationId"])
                elif message["type"] == "toolCancel":
                    cancelled.add(message["correlationId"])
        # The queue was full when the deadlines passed, so every cancel took the urgent path:
        assert len(cancelled) > 4 and cancelled == invoked  # none lost, none for unsent calls
        assert len(invoked) < 120  # the rest never got into the queue: no cancel was sent for them
        nursery.cancel_scope.cancel()


async def _app_with_queued_calls(harness: Harness) -> tuple[RawApp, dict[str, Any]]:
    """An app (one slot) running call q0 with q1, q2 queued behind it (max_queue), long deadlines."""
    app = await harness.app(instanceId="main", maxConcurrency=1)
    for i in range(3):
        harness.call(f"q{i}", args={"text": f"q{i}"}, timeout=24 * 3600)
        await trio.testing.wait_all_tasks_blocked()  # in this order
    first = await app.recv_type("toolInvocation")
    assert first["parameters"] == {"text": "q0"}
    await trio.testing.wait_all_tasks_blocked()
    assert harness.core.registry.summary()[0]["queued"] == 2
    return app, first


async def test_calls_queued_behind_a_crashed_app_go_to_it_when_it_returns(
    harness: Harness, autojump_clock: Any
) -> None:
    """The slot freed by the lost call must not hand the next queued call to the dead link."""
    app, _ = await _app_with_queued_calls(harness)
    await app.aclose()
    assert (await harness.outcome("q0")).kind == "app_disconnected"
    await trio.sleep(1)  # inside the 5 s grace: the queued calls wait for the same instance
    assert not {"q1", "q2"} & harness.outcomes.keys()
    back = await harness.app(instanceId="main", maxConcurrency=1)
    for i in range(1, 3):
        inv = await back.recv_type("toolInvocation")
        assert inv["parameters"] == {"text": f"q{i}"}
        await back.send({"type": "toolResponse", "correlationId": inv["correlationId"], "result": {"data": i}})
        outcome = await harness.outcome(f"q{i}")
        assert outcome.kind == "ok" and outcome.result is not None and outcome.result.data == i
    summary = harness.core.registry.summary()[0]
    assert (summary["inFlight"], summary["queued"]) == (0, 0)
    assert len(harness.core.calls) == 0


async def test_calls_queued_behind_a_crashed_app_fail_when_grace_ends(
    harness: Harness, autojump_clock: Any
) -> None:
    app, _ = await _app_with_queued_calls(harness)
    crashed_at = trio.current_time()
    await app.aclose()
    outcomes = [await harness.outcome(f"q{i}") for i in range(3)]
    assert [o.kind for o in outcomes] == ["app_disconnected"] * 3
    assert all("did not come back within 5 s" in o.message for o in outcomes[1:])
    assert trio.current_time() - crashed_at <= 5.1  # at the end of grace, not at the 24 h deadline
    assert len(harness.core.calls) == 0
    # A new instance under the same name is not held up by a slot the lost calls kept.
    fresh = await harness.app(instanceId="main", maxConcurrency=1)
    harness.call("after", args={"text": "after"})
    inv = await fresh.recv_type("toolInvocation")
    assert inv["parameters"] == {"text": "after"}


@pytest.mark.parametrize("order", [["a.b", "a_b"], ["a_b", "a.b"]])
async def test_an_agent_facing_name_runs_the_same_tool_whatever_the_order(
    harness: Harness, autojump_clock: Any, order: list[str]
) -> None:
    """`a.b` and `a_b` sanitize alike; `Flip__a_b` must not switch tools when the order changes."""
    tools = [{**ECHO_TOOL, "name": name} for name in order]
    seen: list[tuple[str, str]] = []
    for tools_in_order in (tools, tools[::-1]):  # first registration, then a reconnect in the other order
        app = await harness.app(app_name="Flip", instanceId="main", tools=tools_in_order)
        harness.call(f"plain-{len(seen)}", "Flip__a_b")
        inv = await app.recv_type("toolInvocation")
        seen.append(("Flip__a_b", inv["tool"]))
        await app.send({"type": "toolResponse", "correlationId": inv["correlationId"], "result": {}})
        assert (await harness.outcome(f"plain-{len(seen) - 1}")).kind == "ok"
        await app.aclose()
    assert seen == [("Flip__a_b", "a_b")] * 2


async def test_a_stalled_daemon_does_not_drop_its_apps_for_its_own_silence(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """After the loop stalls past the heartbeat timeout, apps that kept answering stay linked."""
    async with trio.open_nursery() as nursery:
        harness = Harness(make_core(tmp_path), nursery)  # heartbeat every 5 s, timeout 20 s
        app = await harness.app()

        async def answer_pings() -> None:
            while True:
                message = await app.recv(timeout=1000)
                if message["type"] == "ping":
                    await app.send({"type": "pong", "id": message["id"]})

        nursery.start_soon(answer_pings)
        await trio.sleep(12)
        autojump_clock.jump(70)  # the loop blocked for 70 s: every timer is due at once
        await trio.sleep(60)
        [summary] = harness.core.registry.summary()
        assert summary["connected"], "the app was dropped for the daemon's own stall"
        assert len(harness.core.links) == 1
        nursery.cancel_scope.cancel()


async def test_the_watchdog_tells_a_blocked_loop_from_a_busy_machine(autojump_clock: trio.testing.MockClock) -> None:
    """A late wake-up counts as a stall only as far as the loop's thread was busy meanwhile."""
    from broker.daemon.watchdog import LoopWatchdog

    cpu = [0.0]  # the loop thread's CPU clock, driven by the test
    watchdog = LoopWatchdog(interval=0.05, warn_after=0.1, cpu_clock=lambda: cpu[0])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watchdog.run)
        await trio.sleep(1)
        assert watchdog.status()["stallsOver100Ms"] == 0 and watchdog.status()["maxStallMs"] == 0
        autojump_clock.jump(0.4)  # 400 ms late, the thread idle: the OS did not run us
        await trio.sleep(1)
        status = watchdog.status()
        assert status["watching"] and status["stallsOver100Ms"] == 0 and status["maxStallMs"] == 0
        assert 300 <= status["maxLateMs"] <= 400 and status["lastMinuteMaxLateMs"] == status["maxLateMs"]
        cpu[0] += 0.3  # 300 ms late, the thread busy all along: our own code blocked the loop
        autojump_clock.jump(0.3)
        await trio.sleep(1)
        status = watchdog.status()
        assert status["stallsOver100Ms"] == 1 and 250 <= status["maxStallMs"] <= 300
        assert status["lastMinuteMaxStallMs"] == status["maxStallMs"]
        await trio.sleep(61)
        status = watchdog.status()
        assert status["lastMinuteMaxStallMs"] == 0 and status["lastMinuteMaxLateMs"] == 0
        assert status["maxStallMs"] >= 250
        nursery.cancel_scope.cancel()


def _slow_to_guard(size: int) -> str:
    """The path guard's worst case: each ``%uFF05`` layer folds into the next escape (~3 µs a char)."""
    return "%uFF05" + "uFF05" * ((size - 16) // 5) + "u002e./x"


@pytest.fixture
async def checking_harness(tmp_path: Path) -> AsyncIterator[Harness]:
    """A harness whose router checks large arguments off the loop, as the daemon's does."""
    async with trio.open_nursery() as nursery:
        h = Harness(make_core(tmp_path, heartbeat_interval=1000, heartbeat_timeout=5000), nursery)
        await nursery.start(_serve_checks, h.core)
        yield h
        nursery.cancel_scope.cancel()


async def _serve_checks(core: BrokerCore, *, task_status: trio.TaskStatus[None]) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(core.router.serve_checks)
        await trio.testing.wait_all_tasks_blocked()
        task_status.started()


async def test_large_arguments_are_checked_off_the_loop_while_other_calls_go_on(checking_harness: Harness) -> None:
    harness = checking_harness
    app = await harness.app(maxConcurrency=4)
    harness.call("heavy", args={"text": _slow_to_guard(400_000)})  # ~1 s of guard work
    harness.call("light", args={"text": "hi"})
    inv = await app.recv_type("toolInvocation")
    assert inv["parameters"] == {"text": "hi"}  # answered while the heavy one is being checked
    await app.send({"type": "toolResponse", "correlationId": inv["correlationId"], "result": {}})
    assert (await harness.outcome("light")).kind == "ok"
    assert "heavy" not in harness.outcomes
    heavy = await harness.outcome("heavy")
    assert heavy.kind == "guard_rejected" and "$.text" in heavy.message


async def test_large_arguments_checked_off_the_loop_get_the_same_answers(checking_harness: Harness) -> None:
    harness = checking_harness
    app = await harness.app(tools=[{**ECHO_TOOL, "inputSchema": {
        "type": "object", "properties": {"text": {"type": "string"}, "n": {"type": "integer"}}}}])
    big = "x" * 100_000
    harness.call("invalid", args={"text": big, "n": "seven"})
    assert (await harness.outcome("invalid")).kind == "invalid_arguments"
    harness.call("traversal", args={"text": big + "/../etc"})
    assert (await harness.outcome("traversal")).kind == "guard_rejected"
    harness.call("clean", args={"text": big, "n": 7})
    inv = await app.recv_type("toolInvocation")
    assert inv["parameters"] == {"text": big, "n": 7}
    await app.send({"type": "toolResponse", "correlationId": inv["correlationId"], "result": {}})
    assert (await harness.outcome("clean")).kind == "ok"


async def test_a_call_being_checked_can_be_cancelled_or_time_out(checking_harness: Harness) -> None:
    harness = checking_harness
    app = await harness.app(maxConcurrency=4)
    with trio.move_on_after(0.05):
        await harness.core.router.call_tool("WatchTower__Echo", {"text": _slow_to_guard(400_000)})
    harness.call("late", args={"text": _slow_to_guard(400_000)}, timeout=0.05)
    assert (await harness.outcome("late")).kind == "timeout"
    harness.call("after", args={"text": "after"})
    inv = await app.recv_type("toolInvocation")  # neither of the two reached the app
    assert inv["parameters"] == {"text": "after"}
    await app.send({"type": "toolResponse", "correlationId": inv["correlationId"], "result": {}})
    assert (await harness.outcome("after")).kind == "ok"
    assert len(harness.core.calls) == 0


async def test_calls_of_a_tool_with_a_slow_pattern_are_checked_off_the_loop(checking_harness: Harness) -> None:
    """A pattern RE2 cannot run may take the fallback's whole budget (100 ms): never on the loop."""
    harness = checking_harness
    slow_pattern = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(?=a)(a|aa)+$"}}}
    app = await harness.app(maxConcurrency=4, tools=[ECHO_TOOL, {**ECHO_TOOL, "name": "Match", "inputSchema": slow_pattern}])
    assert harness.core.registry.lookup("WatchTower__Match").validate.may_be_slow  # type: ignore[union-attr]
    assert not harness.core.registry.lookup("WatchTower__Echo").validate.may_be_slow  # type: ignore[union-attr]
    harness.call("slow", "WatchTower__Match", args={"s": "a" * 40 + "!"})
    harness.call("light", args={"text": "hi"})
    inv = await app.recv_type("toolInvocation")
    assert inv["parameters"] == {"text": "hi"}
    await app.send({"type": "toolResponse", "correlationId": inv["correlationId"], "result": {}})
    assert (await harness.outcome("light")).kind == "ok"
    assert "slow" not in harness.outcomes  # still being checked, off the loop
    slow = await harness.outcome("slow")
    assert slow.kind == "invalid_arguments" and "took too long" in slow.message
