"""Node loss on a real 3-node NATS cluster, in every way a broker logs in (issue 27 item 2).

A broker is given one seed (the node it is attached to) and learns the others from the
cluster; killing its node must move it to another one with the same credentials, with no call
failing and no tool leaving another broker's list.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import structlog
import trio

pytest.importorskip("nats")
pytest.importorskip("nkeys")

from broker.core.outcome import OutcomeKind  # noqa: E402
from fedkit import Daemon, tool_names, wait_until  # noqa: E402
from mcp_testkit import ScriptedApp  # noqa: E402
from natscluster import AUTH_MODES, cluster_auth  # noqa: E402
from natskit import Node, nats_cluster, nats_of, start_broker  # noqa: E402


class Caller:
    """An agent calling ``tool`` through ``daemon``, one call after another, as MCP clients do:
    a call refused with ``app_disconnected`` ("retry in a moment": this broker's own NATS link
    was down, or the request was lost with the owner's node) or ``unknown_tool`` is made again
    once the link is up and the tool listed, at most :data:`ATTEMPTS` times. A call that fails
    every attempt is a failed call."""

    def __init__(self, daemon: Daemon, tool: str) -> None:
        self.daemon, self.tool = daemon, tool
        self.ended = 0
        self.failed: list[tuple[OutcomeKind, str]] = []
        self.retried: list[str] = []
        self._made = trio.Event()

    async def run(self) -> None:
        n = 0
        while True:
            n += 1
            for attempt in range(ATTEMPTS):
                outcome = await self.daemon.core.router.call_tool(self.tool, {"text": f"call {n}"})
                if outcome.result is not None and outcome.result.data == {"echo": {"text": f"call {n}"}}:
                    break
                retry = (OutcomeKind.APP_DISCONNECTED, OutcomeKind.UNKNOWN_TOOL)
                if outcome.kind not in retry or attempt == ATTEMPTS - 1:
                    self.failed.append((outcome.kind, outcome.message or str(outcome.result)))
                    break
                self.retried.append(outcome.message)
                # Its link up again and the tool listed.
                await wait_until(self.daemon.core, lambda: nats_of(self.daemon).connected
                                 and self.tool in tool_names(self.daemon.core), timeout=15)
            self.ended += 1
            self._made.set()
            self._made = trio.Event()
            await trio.lowlevel.checkpoint()  # a call refused at once does not wait for anything

    async def more(self, count: int) -> None:
        """Wait until ``count`` more calls have ended."""
        target = self.ended + count
        with trio.fail_after(30):
            while self.ended < target:
                await self._made.wait()


#: Attempts of one call (the first and its retries).
ATTEMPTS = 3


def seed(node: Node, login: dict[str, str]) -> tuple[str, dict[str, str]]:
    """``node``'s URL and the other settings of ``login`` (``url_userinfo`` goes into the URL)."""
    settings = dict(login)
    return node.url.replace("nats://", "nats://" + settings.pop("url_userinfo", "")), settings


async def kill_and_fail_over(node: Node, daemon: Daemon) -> None:
    """Kill ``node`` and wait until ``daemon`` (attached to it) is connected to another one."""
    before = nats_of(daemon).reconnects
    node.kill()
    assert node.process is not None
    with trio.fail_after(10):
        await node.process.wait()
    await wait_until(daemon.core, lambda: nats_of(daemon).reconnects > before and nats_of(daemon).connected,
                     timeout=15)
    url = nats_of(daemon)._nc.connected_url
    assert url is not None and url.port != node.port


@pytest.mark.parametrize("mode", AUTH_MODES)
async def test_a_broker_whose_node_dies_fails_over_with_its_credentials_and_no_call_fails(
        tmp_path: Path, mode: str) -> None:
    auth = cluster_auth(mode, tmp_path, ["A", "B"])
    with structlog.testing.capture_logs() as logs:
        async with nats_cluster(3, auth.config) as nodes, trio.open_nursery() as nursery:
            # Each broker knows only its own node: the others it learns from the cluster.
            (url_a, login_a), (url_b, login_b) = seed(nodes[0], auth.logins["A"]), seed(nodes[1], auth.logins["B"])
            a = await start_broker(nursery, tmp_path, "A", url_a, **login_a)
            b = await start_broker(nursery, tmp_path, "B", url_b, **login_b)
            app_b = await ScriptedApp(b.port, b.token).start(nursery)
            await wait_until(a.core, lambda: "B__Demo__echo" in tool_names(a.core), timeout=15)
            await wait_until(b.core, lambda: len(nats_of(b)._nc.servers) == 3)  # it learned the other nodes
            caller = Caller(a, "B__Demo__echo")
            async with trio.open_nursery() as calls:
                calls.start_soon(caller.run)
                await caller.more(20)
                # The node the app's broker is attached to dies: B moves to another node.
                await kill_and_fail_over(nodes[1], b)
                await caller.more(20)
                # Then the caller's node: A moves to the last one.
                await kill_and_fail_over(nodes[0], a)
                await caller.more(20)
                calls.cancel_scope.cancel()
            assert caller.failed == []
            # Only the calls caught by a node's death were made again: one in flight at the
            # owner's node, and those refused while the caller's own link moved to another node.
            assert not [why for why in caller.retried
                        if not any(known in why for known in ("connection", "sign of life", "no responders", "unknown"))]
            assert "B__Demo__echo" in tool_names(a.core) and "B" in nats_of(a).remotes
            # B is never withdrawn: a call that lands in the instant B moves between nodes finds
            # no responders and is published again until B is back (the grace, nats_calls),
            # instead of withdrawing B's tools until its next announcement as it did before.
            gone = [entry["reason"] for entry in logs if entry["event"] == "nats_broker_gone"]
            assert gone == [], gone
            status = str(a.core.status()["nats"]) + str(b.core.status()["nats"])
            await app_b.close()
            for daemon in (a, b):
                daemon.shutdown.set()
    for secret in auth.secrets:
        assert secret not in status and secret not in repr(logs)


async def test_a_broker_that_announces_often_is_not_dropped_while_it_moves_to_another_node(tmp_path: Path) -> None:
    """Moving to another node takes nats-py's wait before it tries the dead node again (0.5 s)
    and a connection: B, announcing every 0.05 s, is silent for many more than 3.5 of its
    intervals then, and is kept because no broker is dropped sooner than a failover takes."""
    often = 0.05  # A checks as often as it announces
    with structlog.testing.capture_logs() as logs:
        async with nats_cluster(2) as nodes, trio.open_nursery() as nursery:
            a = await start_broker(nursery, tmp_path, "A", nodes[0], nats_announce_interval=often)
            b = await start_broker(nursery, tmp_path, "B", nodes[1], nats_announce_interval=often)
            app_b = await ScriptedApp(b.port, b.token).start(nursery)
            await wait_until(a.core, lambda: "B__Demo__echo" in tool_names(a.core), timeout=15)
            await wait_until(b.core, lambda: len(nats_of(b)._nc.servers) == 2)  # it learned the other node
            await kill_and_fail_over(nodes[1], b)
            moved = trio.current_time()
            # B's announcements from its new node reach A.
            await wait_until(a.core, lambda: "B" in nats_of(a).remotes and nats_of(a).remotes["B"].last_heard > moved)
            assert [entry["reason"] for entry in logs if entry["event"] == "nats_broker_gone"] == []
            assert "B__Demo__echo" in tool_names(a.core)
            await app_b.close()
            for daemon in (a, b):
                daemon.shutdown.set()
