"""Faults with real processes: apps killed and restarted, the daemon killed and restarted.

Apps here are real subprocesses built on app_client (``tests/faultapp.py``); "killed" is
SIGKILL, so nothing says goodbye: the kernel closes the socket. Times are real (no virtual
clock): the bounds asserted are generous for a loaded 2-core CI machine, and the measured
values are printed (``pytest -s``) — see SECURITY.md and the issue report for typical numbers.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import Client, MCPError, StdioServerParameters

from broker.daemon.run import DaemonInfo
from broker.core.router import CallOutcome
from faultkit import DaemonProcess, ProcessApp
from mcp_testkit import relay_command, relay_env, running_daemon

pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGKILL and POSIX process control")


async def call(info: DaemonInfo, name: str, args: dict[str, Any], **kw: Any) -> CallOutcome:
    return await info.core.router.call_tool(name, args, **kw)


async def test_sigkilled_app_fails_its_calls_at_once_and_other_apps_go_on(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with running_daemon(home, http_port=None) as info, trio.open_nursery() as nursery:
        doomed = await ProcessApp(home, "Doomed").start(nursery)
        healthy = await ProcessApp(home, "Healthy").start(nursery)
        outcomes: dict[str, CallOutcome] = {}
        finished_at: dict[str, float] = {}
        doomed_done, healthy_done = trio.Event(), trio.Event()

        async def agent(key: str, name: str, args: dict[str, Any]) -> None:
            outcomes[key] = await call(info, name, args, timeout=300)
            finished_at[key] = trio.current_time()
            if key == "healthy":
                healthy_done.set()
            elif all(f"doomed{i}" in outcomes for i in range(3)):
                doomed_done.set()

        for i in range(3):
            nursery.start_soon(agent, f"doomed{i}", "Doomed__hang", {})
        nursery.start_soon(agent, "healthy", "Healthy__slow", {"seconds": 2.0})
        await doomed.wait_for("invoked", "hang", count=3)
        await healthy.wait_for("invoked", "slow")

        killed_at = trio.current_time()
        doomed.kill()
        with trio.fail_after(10):
            await doomed_done.wait()
        latency = max(finished_at[f"doomed{i}"] for i in range(3)) - killed_at
        print(f"\nSIGKILL -> all 3 pending calls failed in {latency * 1000:.1f} ms")
        for i in range(3):
            outcome = outcomes[f"doomed{i}"]
            assert outcome.kind == "app_disconnected", outcome
            assert "disconnected" in outcome.message
        assert latency < 1.0  # the promise is 200 ms; generous for a loaded CI machine

        # The other app's call in flight at the time, and new calls, are unaffected.
        with trio.fail_after(20):
            await healthy_done.wait()
        assert outcomes["healthy"].kind == "ok", outcomes["healthy"]
        assert outcomes["healthy"].result is not None and outcomes["healthy"].result.data == "slept 2.0"
        fresh = await call(info, "Healthy__echo", {"text": "still here"})
        assert fresh.kind == "ok" and fresh.result is not None and fresh.result.data == "still here"
        assert len(info.core.calls) == 0
        await doomed.stop()
        await healthy.stop()


async def test_an_app_restarting_within_grace_gets_the_waiting_calls(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with running_daemon(home, http_port=None, reconnect_grace=30.0) as info, trio.open_nursery() as nursery:
        first = await ProcessApp(home, "Phoenix", instance_id="phoenix-main").start(nursery)
        [before] = info.core.registry.summary()
        assert before["label"] == "Phoenix"
        first.kill()
        await first.stop()
        with trio.fail_after(10):
            await info.core.changed.wait_until(lambda: not info.core.registry.summary()[0]["connected"])

        outcomes: dict[int, CallOutcome] = {}
        all_answered = trio.Event()

        async def agent(i: int) -> None:
            outcomes[i] = await call(info, "Phoenix__echo", {"text": f"waited {i}"}, timeout=60)
            if len(outcomes) == 3:
                all_answered.set()

        for i in range(3):
            nursery.start_soon(agent, i)
        instance = info.core.registry.instances()[0]
        with trio.fail_after(10):  # the calls hold their slots, waiting for the app
            await info.core.changed.wait_until(lambda: instance.admission.active >= 3)
        assert outcomes == {}

        second = await ProcessApp(home, "Phoenix", instance_id="phoenix-main").start(nursery)
        await second.wait_for("invoked", "echo", count=3)
        with trio.fail_after(10):
            await all_answered.wait()
        for i in range(3):
            assert outcomes[i].kind == "ok", outcomes[i]
            assert outcomes[i].result is not None and outcomes[i].result.data == f"waited {i}"
        [after] = info.core.registry.summary()
        assert (after["label"], after["appId"], after["instance"]) == (before["label"], before["appId"], "phoenix-main")
        assert second.seen("registered") == [["registered", "Phoenix"]]
        assert len(info.core.calls) == 0
        await second.stop()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_daemon_killed_and_restarted_apps_come_back_and_the_agent_is_told(tmp_path: Path, mode: str) -> None:
    home = tmp_path / "home"
    daemon = await DaemonProcess(home, 0, "--no-http").start()
    command = relay_command(home, "--no-start")
    params = StdioServerParameters(command=command[0], args=command[1:], env=relay_env())
    try:
        async with trio.open_nursery() as nursery:
            app = await ProcessApp(home, "Survivor", backoff_cap=0.5).start(nursery)
            async with Client(params, mode=mode) as client:
                ok = await client.call_tool("Survivor__echo", {"text": "before"})
                assert not ok.is_error

                failures: list[MCPError] = []
                failed = trio.Event()

                async def hanging_call() -> None:
                    try:
                        await client.call_tool("Survivor__hang", {})
                    except MCPError as exc:
                        failures.append(exc)
                        failed.set()

                async with trio.open_nursery() as calls:
                    calls.start_soon(hanging_call)
                    await app.wait_for("invoked", "hang")
                    daemon.kill()
                    with trio.fail_after(10):
                        await failed.wait()
                assert failures[0].code == -32000
                assert "connection to the toolbridge daemon was lost" in failures[0].message
                await app.wait_for("disconnected")
                await app.wait_for("cancelled")  # the app stopped the orphaned call itself

                # While the daemon is down, every request gets an error at once, never silence.
                for _ in range(2):
                    with trio.fail_after(15), pytest.raises(MCPError) as down:
                        await client.call_tool("Survivor__echo", {"text": "down"})
                    assert down.value.code == -32000
                    assert "no toolbridge daemon is running" in down.value.message

                port = daemon.port
                daemon = await DaemonProcess(home, port, "--no-http").start()
                assert daemon.port == port
                await app.wait_for("registered", count=2)  # the app came back by itself
                with trio.fail_after(30):
                    result = await client.call_tool("Survivor__echo", {"text": "after"})
                assert not result.is_error
                assert result.structured_content is None or result.structured_content == {}
                assert any(getattr(b, "text", None) == "after" for b in result.content)
            await app.stop()
    finally:
        daemon.stop()
