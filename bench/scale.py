"""Scenario 3 — scale: 1,000 apps x 10 tools, tools/list latency, daemon memory, 10,000 calls in flight.

Usage: ``python bench/scale.py --apps 1000 --tools 10 --in-flight 10000 [--json]``

The daemon is a real process (temporary home, port 0, no HTTP). This process (trio) opens
``--apps`` raw protocol connections at once, each registering ``--tools`` tools
(maxConcurrency 16), and measures the time until the last ``registered`` arrived. Then, over
one ``agentConnect`` connection (the daemon side of ``toolbridge stdio``): ``tools/list``
latency — the first list after the registrations (the daemon builds its list then) and the
median of ``--list-repeats`` later ones, each the whole list followed through every page —
and the same through a real ``toolbridge stdio`` process. Daemon memory (``VmRSS`` after a
``gc.collect()`` in the daemon; Linux) is read idle, with the apps registered, and with
``--in-flight`` calls pending: the calls are sent at once, spread evenly over the apps, and the
apps hold them unanswered until every one has arrived; memory per pending call is the RSS
difference divided by the number of calls. Then the apps answer them all and the agent counts
the results.

Every wait is bounded (``--timeout``). The load process raises its open-file limit (the
daemon inherits it).
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

import msgspec
import trio

import _harness as h
from mcp_load import LineChannel, RpcClient, close_stdio, open_stdio

_encode = msgspec.json.Encoder().encode


class AppMessage(msgspec.Struct):
    type: str
    correlationId: int | None = None
    id: int | None = None


_decode_app = msgspec.json.Decoder(AppMessage).decode


class Apps:
    def __init__(self, count: int, tools: int, token: str, port: int) -> None:
        self.count = count
        self.tools = tools
        self.token = token
        self.port = port
        self.registered_at: list[float] = []
        self.all_registered = trio.Event()
        self.invocations = 0
        self.release = trio.Event()
        self.errors: list[str] = []
        #: Connections refused because too many were waiting to register (then retried).
        self.retries = 0

    def tool_specs(self) -> list[dict[str, Any]]:
        schema = {"type": "object", "properties": {"text": {"type": "string"}, "n": {"type": "integer"}}}
        return [{"name": f"tool{j}", "description": f"Scale test tool number {j}; returns its arguments.",
                 "inputSchema": schema, "timeoutMs": 600_000} for j in range(self.tools)]

    async def connect(self, register: bytes) -> tuple[trio.SocketStream, LineChannel]:
        """Connect and register; retry (as app_client does) while the daemon is at its cap of
        connections waiting to register (``max_unregistered_connections``, 128 by default)."""
        delay = 0.01
        while True:
            stream = await trio.open_tcp_stream("127.0.0.1", self.port)
            await stream.send_all(register)
            channel = LineChannel(stream, stream)
            first = await channel.lines(timeout=60)
            if b"too_many_connections" not in first[0]:
                channel.unread(first)
                return stream, channel
            self.retries += 1
            await stream.aclose()
            await trio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 1.0)

    async def run_app(self, index: int, start: float) -> None:
        lock = trio.Lock()
        held: list[int] = []
        register = {"type": "register", "appName": f"Scale{index:04d}", "token": self.token,
                    "tools": self.tool_specs(), "maxConcurrency": 16, "instanceId": "scale"}
        stream, channel = await self.connect(_encode(register) + b"\n")

        async def answer_when_released() -> None:
            await self.release.wait()
            async with lock:
                out = [_encode({"type": "toolResponse", "correlationId": cid,
                                "result": {"success": True, "data": "done"}}) + b"\n" for cid in held]
                held.clear()
                if out:
                    await stream.send_all(b"".join(out))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(answer_when_released)
            try:
                while True:
                    for line in await channel.lines(timeout=3600):
                        message = _decode_app(line)
                        if message.type == "registered":
                            self.registered_at.append(time.perf_counter() - start)
                            if len(self.registered_at) == self.count:
                                self.all_registered.set()
                        elif message.type == "toolInvocation":
                            assert message.correlationId is not None
                            if self.release.is_set():
                                async with lock:
                                    await stream.send_all(_encode({
                                        "type": "toolResponse", "correlationId": message.correlationId,
                                        "result": {"success": True, "data": "done"}}) + b"\n")
                            else:
                                held.append(message.correlationId)
                            self.invocations += 1
                        elif message.type == "ping":
                            async with lock:
                                await stream.send_all(_encode({"type": "pong", "id": message.id}) + b"\n")
                        elif message.type == "error":
                            self.errors.append(line.decode()[:300])
            except (EOFError, trio.BrokenResourceError, trio.ClosedResourceError):
                pass


async def agent_connection(port: int, token: str) -> tuple[trio.SocketStream, RpcClient]:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    await stream.send_all(_encode({"type": "agentConnect", "token": token}) + b"\n")
    channel = LineChannel(stream, stream)
    hello = (await channel.lines(10))[0]
    if b"agentConnected" not in hello:
        raise RuntimeError(f"agentConnect refused: {hello[:200]!r}")
    rpc = RpcClient(channel)
    await rpc.initialize()
    return stream, rpc


class ListPage(msgspec.Struct):
    """A tools/list result, its entries left undecoded: the timing is the daemon's, not the
    load generator's JSON decoding (which took longer than the daemon for 10,000 tools)."""

    tools: list[msgspec.Raw]
    nextCursor: str | None = None


async def timed_list(rpc: RpcClient) -> tuple[float, float, int, int]:
    """(whole list ms, first page ms, tools, pages)."""
    start = time.perf_counter()
    first = await rpc.request("tools/list", result_type=ListPage)
    first_ms = (time.perf_counter() - start) * 1000
    tools, pages = len(first.tools), 1
    cursor = first.nextCursor
    while cursor and pages < 10_000:
        page = await rpc.request("tools/list", {"cursor": cursor}, result_type=ListPage)
        tools += len(page.tools)
        pages += 1
        cursor = page.nextCursor
    return (time.perf_counter() - start) * 1000, first_ms, tools, pages


async def run(args: argparse.Namespace, daemon: h.Daemon) -> dict[str, Any]:
    result: dict[str, Any] = {}
    memory_idle = daemon.memory()
    apps = Apps(args.apps, args.tools, daemon.token, daemon.port)
    total_tools = args.apps * args.tools
    async with trio.open_nursery() as nursery:
        start = time.perf_counter()
        for i in range(args.apps):
            nursery.start_soon(apps.run_app, i, start)
        with trio.fail_after(args.timeout):
            await apps.all_registered.wait()
        registered = sorted(apps.registered_at)
        result["register"] = {
            "apps": args.apps, "tools": total_tools, "all_registered_s": registered[-1],
            "p50_app_s": h.percentile(registered, 0.5), "refused_and_retried": apps.retries,
        }
        with trio.fail_after(args.timeout):
            while (await trio.to_thread.run_sync(daemon.admin, "status"))["tools"] < total_tools:
                await trio.sleep(0.05)
        memory_registered = await trio.to_thread.run_sync(daemon.memory)

        # tools/list over the agent link (the daemon side of `toolbridge stdio`).
        stream, rpc = await agent_connection(daemon.port, daemon.token)
        with trio.fail_after(args.timeout):
            cold = await timed_list(rpc)
            warm = [await timed_list(rpc) for _ in range(args.list_repeats)]
        if cold[2] != total_tools:
            raise RuntimeError(f"tools/list returned {cold[2]} tools, expected {total_tools}")
        result["tools_list"] = {
            "tools": cold[2], "pages": cold[3],
            "first_list_ms": cold[0], "first_list_first_page_ms": cold[1],
            "whole_list_ms": h.median([w[0] for w in warm]), "first_page_ms": h.median([w[1] for w in warm]),
        }
        # The same through a real `toolbridge stdio` process.
        process, channel = await open_stdio(daemon.stdio_argv(), env=daemon.env)
        try:
            relay_rpc = RpcClient(channel)
            with trio.fail_after(args.timeout):
                await relay_rpc.initialize()
                await timed_list(relay_rpc)
                via_stdio = [await timed_list(relay_rpc) for _ in range(max(1, args.list_repeats // 2))]
            result["tools_list"]["whole_list_via_stdio_ms"] = h.median([w[0] for w in via_stdio])
            result["tools_list"]["first_page_via_stdio_ms"] = h.median([w[1] for w in via_stdio])
        finally:
            await close_stdio(process)

        # N calls in flight at once, held by the apps.
        memory_before = await trio.to_thread.run_sync(daemon.memory)
        lines = []
        for k in range(args.in_flight):
            app, tool = k % args.apps, (k // args.apps) % args.tools
            lines.append(_encode({"jsonrpc": "2.0", "id": k + 1, "method": "tools/call",
                                  "params": {"name": f"Scale{app:04d}__tool{tool}", "arguments": {"text": "x", "n": k}}}))
        sent_at = time.perf_counter()
        await rpc.channel.send(b"\n".join(lines) + b"\n")
        with trio.fail_after(args.timeout):
            while apps.invocations < args.in_flight:
                await trio.sleep(0.01)
        all_at_apps_s = time.perf_counter() - sent_at
        memory_pending = await trio.to_thread.run_sync(daemon.memory)
        if memory_pending["calls_in_flight"] != args.in_flight:
            raise RuntimeError(f"{memory_pending['calls_in_flight']} calls in flight, expected {args.in_flight}")
        released_at = time.perf_counter()
        apps.release.set()
        ok = failed = 0
        with trio.fail_after(args.timeout):
            while ok + failed < args.in_flight:
                for line in await rpc.channel.lines(args.timeout):
                    reply = msgspec.json.decode(line)
                    if "id" not in reply or reply.get("method"):
                        continue
                    if "result" in reply and not reply["result"].get("isError"):
                        ok += 1
                    else:
                        failed += 1
        resolved_s = time.perf_counter() - released_at
        memory_after = await trio.to_thread.run_sync(daemon.memory)
        rss = [m.get("rss_kib") for m in (memory_before, memory_pending)]
        per_call = (rss[1] - rss[0]) * 1024 / args.in_flight if None not in rss else float("nan")
        blocks = (memory_pending["allocated_blocks"] - memory_before["allocated_blocks"]) / args.in_flight
        result["in_flight"] = {
            "calls": args.in_flight, "all_at_apps_s": all_at_apps_s, "resolved": ok, "failed": failed,
            "resolve_all_s": resolved_s, "bytes_per_pending_call": per_call,
            "python_blocks_per_pending_call": blocks,
        }
        result["daemon_memory_kib"] = {
            "idle": memory_idle.get("rss_kib"), "apps_registered": memory_registered.get("rss_kib"),
            "before_calls": memory_before.get("rss_kib"), "calls_pending": memory_pending.get("rss_kib"),
            "after_calls": memory_after.get("rss_kib"), "peak": memory_after.get("hwm_kib"),
        }
        if "top" in memory_pending:
            result["tracemalloc_top_pending"] = memory_pending["top"]
        result["app_errors"] = apps.errors[:5]
        await stream.aclose()
        nursery.cancel_scope.cancel()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", type=int, default=1000)
    parser.add_argument("--tools", type=int, default=10)
    parser.add_argument("--in-flight", type=int, default=10000)
    parser.add_argument("--list-repeats", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3, help="whole runs (fresh daemon each); medians")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--tracemalloc", action="store_true", help="trace the daemon's allocations (slow)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    nofile = h.raise_nofile(args.apps * 2 + 1024)
    runs = []
    for _ in range(args.repeats):
        with h.temp_home() as home:
            # All apps share the bench's one token: lift the per-token cap on app instances
            # (``max_apps_per_token``, 64 by default since issue 14) above the app count.
            env = {"TOOLBRIDGE_MAX_APPS_PER_TOKEN": str(args.apps + 1)}
            if args.tracemalloc:
                env["BENCH_TRACEMALLOC"] = "1"
            with h.Daemon(home / "home", env=env) as daemon:
                runs.append(trio.run(run, args, daemon))

    def med(section: str, key: str) -> float:
        return h.median([r[section][key] for r in runs])

    summary = {
        "all_registered_s": med("register", "all_registered_s"),
        "tools_list_whole_ms": med("tools_list", "whole_list_ms"),
        "tools_list_first_page_ms": med("tools_list", "first_page_ms"),
        "tools_list_first_after_change_ms": med("tools_list", "first_list_ms"),
        "tools_list_whole_via_stdio_ms": med("tools_list", "whole_list_via_stdio_ms"),
        "tools_list_pages": med("tools_list", "pages"),
        "bytes_per_pending_call": med("in_flight", "bytes_per_pending_call"),
        "python_blocks_per_pending_call": med("in_flight", "python_blocks_per_pending_call"),
        "calls_resolved": min(r["in_flight"]["resolved"] for r in runs),
        "calls_failed": max(r["in_flight"]["failed"] for r in runs),
        "resolve_all_s": med("in_flight", "resolve_all_s"),
        "daemon_rss_idle_kib": med("daemon_memory_kib", "idle"),
        "daemon_rss_apps_registered_kib": med("daemon_memory_kib", "apps_registered"),
        "daemon_rss_calls_pending_kib": med("daemon_memory_kib", "calls_pending"),
        "daemon_peak_kib": med("daemon_memory_kib", "peak"),
    }
    result = {"scenario": "scale", "machine": h.machine(), "params": vars(args), "nofile": nofile,
              "summary": summary, "runs": runs}
    text = "\n".join([
        f"scale — {h.machine()['cores']} cores, {args.apps} apps x {args.tools} tools, "
        f"{args.in_flight} calls in flight, medians of {args.repeats} runs", "",
        h.table(["measure", "value"], [[k, v] for k, v in summary.items()]),
    ])
    h.emit(result, args.json, text)


if __name__ == "__main__":
    main()
