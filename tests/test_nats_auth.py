"""NATS federation (issue 22) with a real operator (JWT + NKey credentials made in-test) and
across a leaf node (a desktop's own nats-server dialling out to the cluster)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

pytest.importorskip("nats")
pytest.importorskip("nkeys")

from broker.federation.nats_link import broker_permissions  # noqa: E402
from fedkit import tool_names, wait_until  # noqa: E402
from mcp_testkit import ScriptedApp  # noqa: E402
from natsauth import Operator  # noqa: E402
from natskit import free_port, nats_cluster, nats_of, start_broker  # noqa: E402





async def test_brokers_join_with_operator_issued_jwt_credentials_and_others_are_refused(tmp_path: Path) -> None:
    operator = Operator()
    config = tmp_path / "nats.conf"
    config.write_text(operator.server_config())
    creds_a = operator.user(tmp_path / "a.creds", "A", broker_permissions("A"))
    creds_b = operator.user(tmp_path / "b.creds", "B", broker_permissions("B"))
    # Signed by an account this server does not know: refused.
    stranger = Operator().user(tmp_path / "c.creds", "C", broker_permissions("C"))
    async with nats_cluster(1, config) as nodes, trio.open_nursery() as nursery:
        url = nodes[0].url
        a = await start_broker(nursery, tmp_path, "A", url, nats_credentials=str(creds_a))
        b = await start_broker(nursery, tmp_path, "B", url, nats_credentials=str(creds_b))
        c = await start_broker(nursery, tmp_path, "C", url, nats_credentials=str(stranger))
        app_b = await ScriptedApp(b.port, b.token).start(nursery)
        await wait_until(a.core, lambda: "B__Demo__echo" in tool_names(a.core))
        outcome = await a.core.router.call_tool("B__Demo__echo", {"text": "signed"})
        assert outcome.result is not None and outcome.result.data == {"echo": {"text": "signed"}}
        seen: list[tuple[float, float | None, str | None]] = []
        done = await a.core.router.call_tool("B__Demo__progress", {},
                                             on_progress=lambda p, t, m: seen.append((p, t, m)))
        assert done.result is not None and seen == [(1, 2, "step 1"), (2, 2, "step 2")]
        # The permissions in the JWTs are enough for all of it.
        assert nats_of(a).last_error is None and nats_of(b).last_error is None
        await wait_until(c.core, lambda: "Authorization" in (nats_of(c).last_error or ""))
        assert not nats_of(c).connected and "C" not in nats_of(a).remotes
        await app_b.close()
        for daemon in (a, b, c):
            daemon.shutdown.set()


async def test_a_call_crosses_a_leaf_node_to_a_desktop_behind_it(tmp_path: Path) -> None:
    leaf_port = free_port()
    hub_config = tmp_path / "hub.conf"
    hub_config.write_text(json.dumps({"leafnodes": {"listen": f"127.0.0.1:{leaf_port}"}}))
    desk_config = tmp_path / "desk.conf"
    # The desktop's server dials out to the hub; nothing listens on the desktop but loopback.
    desk_config.write_text(json.dumps({"leafnodes": {"remotes": [{"url": f"nats-leaf://127.0.0.1:{leaf_port}"}]}}))
    async with nats_cluster(1, hub_config) as hub, nats_cluster(1, desk_config) as desk, \
            trio.open_nursery() as nursery:
        with trio.fail_after(20):
            await hub[0].leafed.wait()
            await desk[0].leafed.wait()
        a = await start_broker(nursery, tmp_path, "ci", hub[0].url)
        b = await start_broker(nursery, tmp_path, "desk", desk[0].url)
        app_b = await ScriptedApp(b.port, b.token).start(nursery)
        await wait_until(a.core, lambda: "desk__Demo__echo" in tool_names(a.core), timeout=20)
        outcome = await a.core.router.call_tool("desk__Demo__echo", {"text": "through the leaf"})
        assert outcome.result is not None and outcome.result.data == {"echo": {"text": "through the leaf"}}
        await app_b.close()
        # The desktop's daemon stops: its goodbye crosses the leaf too, and its tools leave.
        await b.stop()
        await wait_until(a.core, lambda: not any(n.startswith("desk__") for n in tool_names(a.core)))
        a.shutdown.set()
