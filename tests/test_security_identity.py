"""Identity between apps: what a second registration under a name already in use gets, what it
does not get (another app's calls, answers or names), and what happens when the first app goes.

Summary (SECURITY.md says the same): every holder of the token may register any app name.
A name in use is never taken over: a second instance is labelled ``<App>_2`` and gets its own
tool names. The first app's names stay reserved while it is connected and for the reconnect
grace period after it leaves; calls made meanwhile wait for *that* instance (same ``appName``
and ``instanceId``) and fail if it does not come back — they never go to another app. When
the grace period is over the names are free again, and the next registration of that app
name gets them. ``instanceId`` is an identity, not a secret: re-registering with it replaces
the live link (protocol.md); the ids the broker assigns (``#1``...) cannot be named by apps.

Also covered elsewhere: ``test_protocol_raw.py::test_second_instance_gets_distinct_names_and_same_id_replaces``,
``test_protocol_raw.py::test_response_for_another_apps_call_is_refused`` and
``test_reliability_links.py::test_an_app_cannot_answer_or_fail_another_apps_call``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from app_client import App
from broker.config.settings import Settings
from broker.daemon.broker_core import BrokerCore
from broker.core.router import CallOutcome
from rawapp import ECHO_TOOL, RawApp

TOKEN = "identity-token"
GRACE = 5.0


class Broker:
    def __init__(self, core: BrokerCore, nursery: trio.Nursery) -> None:
        self.core = core
        self.nursery = nursery
        self.outcomes: dict[str, CallOutcome] = {}
        self._done: dict[str, trio.Event] = {}

    def _event(self, key: str) -> trio.Event:
        return self._done.setdefault(key, trio.Event())

    async def app(self, name: str = "WatchTower", **fields: Any) -> tuple[RawApp, dict[str, Any]]:
        broker_end, app_end = trio.testing.memory_stream_pair()
        self.nursery.start_soon(self.core.handle_connection, broker_end)
        app = RawApp(app_end)
        return app, await app.register(TOKEN, app_name=name, tools=[ECHO_TOOL], **fields)

    def call(self, key: str, name: str, **kw: Any) -> None:
        async def run() -> None:
            self.outcomes[key] = await self.core.router.call_tool(name, {"text": key}, **kw)
            self._event(key).set()

        self.nursery.start_soon(run)

    async def outcome(self, key: str) -> CallOutcome:
        await self._event(key).wait()
        return self.outcomes[key]

    async def gone(self, app: RawApp, label: str = "WatchTower") -> None:
        """Close ``app`` and wait until the broker has noticed (its instance is in grace)."""
        await app.aclose()
        await self.core.changed.wait_until(
            lambda: not any(i.label == label and i.link is not None for i in self.core.registry.instances()))

    def names(self) -> list[str]:
        return [t.agent_name for t in self.core.router.list_tools()]


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    settings = Settings(home=tmp_path, reconnect_grace=GRACE, heartbeat_interval=1000, heartbeat_timeout=5000)
    async with trio.open_nursery() as nursery:
        yield Broker(BrokerCore(settings, TOKEN), nursery)
        nursery.cancel_scope.cancel()


async def answer(app: RawApp) -> dict[str, Any]:
    invocation = await app.recv_type("toolInvocation")
    await app.send({"type": "toolResponse", "correlationId": invocation["correlationId"],
                    "result": {"data": invocation["parameters"]["text"]}})
    return invocation


async def test_a_second_app_under_the_same_name_cannot_take_the_first_ones_names_or_calls(
        broker: Broker, autojump_clock: Any) -> None:
    first, r1 = await broker.app()
    impostor, r2 = await broker.app()  # same appName, no instanceId
    assert (r1["appLabel"], r2["appLabel"]) == ("WatchTower", "WatchTower_2")
    assert r2["toolNames"] == {"Echo": "WatchTower_2__Echo"}
    assert broker.names() == ["WatchTower_2__Echo", "WatchTower__Echo"]

    broker.call("to-first", "WatchTower__Echo")
    await answer(first)
    assert (await broker.outcome("to-first")).result.data == "to-first"  # type: ignore[union-attr]

    # The first app goes away: its names stay reserved for it during the grace period, and a
    # call made meanwhile waits for *it* — the impostor never sees it.
    await broker.gone(first)
    broker.call("waiting", "WatchTower__Echo", timeout=60)
    third, r3 = await broker.app()  # one more app under the name, during the grace period
    assert r3["appLabel"] == "WatchTower_3"
    await trio.sleep(GRACE + 1)
    waited = await broker.outcome("waiting")
    assert waited.kind == "app_disconnected" and "did not come back" in waited.message
    await impostor.send({"type": "ping", "id": 1})
    assert (await impostor.recv())["type"] == "pong"  # nothing but the pong reached the impostor

    # After the grace period the name is free: the next registration under it gets it; the
    # other instances keep their own names.
    assert broker.names() == ["WatchTower_2__Echo", "WatchTower_3__Echo"]
    newcomer, r4 = await broker.app()
    assert r4["appLabel"] == "WatchTower" and r4["appId"] != r1["appId"]
    broker.call("to-newcomer", "WatchTower__Echo")
    await answer(newcomer)
    assert (await broker.outcome("to-newcomer")).kind == "ok"


async def test_the_first_app_coming_back_in_time_gets_its_calls(broker: Broker, autojump_clock: Any) -> None:
    first, r1 = await broker.app(instanceId="doc-1")
    impostor, _ = await broker.app(instanceId="doc-2")
    await broker.gone(first)
    broker.call("waiting", "WatchTower__Echo", timeout=60)
    await trio.sleep(GRACE / 2)
    back, r3 = await broker.app(instanceId="doc-1")
    assert (r3["appLabel"], r3["appId"]) == (r1["appLabel"], r1["appId"])
    await answer(back)
    assert (await broker.outcome("waiting")).kind == "ok"
    await impostor.send({"type": "ping", "id": 2})
    assert (await impostor.recv())["type"] == "pong"


async def test_the_broker_assigned_instance_ids_cannot_be_named(broker: Broker) -> None:
    """Regression: an app sending ``instanceId: "#1"`` replaced the live link of whichever app
    had been given ``#1`` (apps that send no id get ``#1``, ``#2``, ...)."""
    anonymous, r1 = await broker.app("Notes")
    assert r1["instanceId"].startswith("#")
    spoofer, reply = await broker.app("Notes", instanceId=r1["instanceId"])
    assert (reply["type"], reply["code"], reply["fatal"]) == ("error", "invalid_register", True)
    await anonymous.send({"type": "ping", "id": 3})
    assert (await anonymous.recv())["type"] == "pong"  # still connected, not "replaced"
    assert [i["instance"] for i in broker.core.registry.summary()] == [r1["instanceId"]]
    with pytest.raises(ValueError, match="#"):
        App("Notes", instance_id="#1")


async def test_look_alike_names_get_distinct_labels(broker: Broker) -> None:
    _, a = await broker.app("Watch Tower")
    _, b = await broker.app("Watch_Tower")
    _, c = await broker.app("Watch.Tower")
    assert [a["appLabel"], b["appLabel"], c["appLabel"]] == ["Watch_Tower", "Watch_Tower_2", "Watch_Tower_3"]
    assert len(set(broker.names())) == 3
