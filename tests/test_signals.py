"""broker.core.signals.Changed, and the core pulsing it where tests wait on the core's state."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from broker.config.settings import Settings
from broker.core.signals import Changed
from broker.daemon.broker_core import BrokerCore
from rawapp import RawApp

TOKEN = "signals-token"


async def test_pulse_without_waiters_allocates_nothing() -> None:
    changed = Changed()
    changed.pulse()
    assert changed._event is None  # the hot path: nothing made, nothing kept


async def test_wait_until_rechecks_after_each_pulse_and_not_before() -> None:
    changed = Changed()
    value = 0
    checks = 0

    def reached() -> bool:
        nonlocal checks
        checks += 1
        return value >= 3

    async with trio.open_nursery() as nursery:
        done = trio.Event()

        async def waiter() -> None:
            await changed.wait_until(reached)
            done.set()

        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert checks == 1
        for expected in (1, 2):
            value += 1
            changed.pulse()
            await trio.testing.wait_all_tasks_blocked()
            assert not done.is_set() and checks == 1 + expected
        value += 1
        await trio.testing.wait_all_tasks_blocked()
        assert not done.is_set()  # no pulse, no re-check: a missing pulse is a bug the test sees
        changed.pulse()
        with trio.fail_after(1):
            await done.wait()
    assert changed._event is None


async def test_the_core_pulses_on_unlink_and_at_a_calls_end(tmp_path: Path) -> None:
    core = BrokerCore(Settings(home=tmp_path, heartbeat_interval=1000, heartbeat_timeout=5000), TOKEN)
    async with trio.open_nursery() as nursery:
        broker_end, app_end = trio.testing.memory_stream_pair()
        nursery.start_soon(core.handle_connection, broker_end)
        app = RawApp(app_end)
        assert (await app.register(TOKEN))["type"] == "registered"
        [instance] = core.registry.instances()

        async def one_call() -> None:
            await core.router.call_tool("WatchTower__Echo", {}, timeout=60)

        nursery.start_soon(one_call)
        invocation = await app.recv_type("toolInvocation")
        with trio.fail_after(5):
            await core.changed.wait_until(lambda: instance.admission.active == 1)
        assert len(core.calls) == 1
        await app.send({"type": "toolResponse", "correlationId": invocation["correlationId"],
                        "result": {"data": "x"}})
        with trio.fail_after(5):
            await core.changed.wait_until(lambda: len(core.calls) == 0)
        await app.aclose()
        with trio.fail_after(5):
            await core.changed.wait_until(lambda: instance.link is None)
        nursery.cancel_scope.cancel()
