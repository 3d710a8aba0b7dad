"""Garbage-collection pauses with many tools registered (issue 27, item 13d).

Usage: ``python bench/gc_pauses.py --apps 19 --tools 1000 --calls 3000 --freeze-ms off,20 [--json]``

For each ``--freeze-ms`` value (``off``: the daemon without ``broker.daemon.gc_policy``; a number:
freeze after a full pass longer than that many ms), a daemon process (``bench_daemon.py``) gets
``--apps`` raw apps of ``--tools`` tools each, registered one after another, then ``--calls``
tools/calls one at a time over an ``agentConnect`` link, spread over the apps. Reported, from
inside the daemon (``bench.gc``): every collector pass's count and longest duration per
generation, the objects tracked and frozen at the end; and the loop watchdog's longest stall
and lateness (``toolbridge status``: ``eventLoop.maxStallMs``, ``maxLateMs``: a pass run by a
worker thread, e.g. while schemas compile, holds the loop as long but shows as lateness, since
the loop's thread used no CPU meanwhile), registration and call times.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import trio

import _harness as h


def tool(index: int) -> dict[str, Any]:
    """An ordinary tool: six typed, described properties."""
    properties = {f"arg{k}": {"type": "string" if k % 2 else "integer", "description": f"argument {k} of t{index}"}
                  for k in range(6)}
    return {"name": f"t{index:04d}", "description": f"tool {index}: does one thing",
            "inputSchema": {"type": "object", "properties": properties, "required": ["arg0"]}}


async def _lines(stream: trio.SocketStream, buffer: bytearray) -> list[dict[str, Any]]:
    while b"\n" not in buffer:
        chunk = await stream.receive_some(1 << 16)
        if not chunk:
            raise EOFError("the daemon closed the connection")
        buffer += chunk
    *complete, rest = bytes(buffer).split(b"\n")
    buffer[:] = rest
    return [json.loads(line) for line in complete if line]


async def app(port: int, token: str, index: int, tools: int, registered: trio.Event) -> None:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    register = {"type": "register", "appName": f"Big{index:02d}", "token": token,
                "tools": [tool(i) for i in range(tools)], "maxConcurrency": 16}
    await stream.send_all(json.dumps(register).encode() + b"\n")
    buffer = bytearray()
    async with stream:
        while True:
            for message in await _lines(stream, buffer):
                kind = message.get("type")
                if kind == "registered":
                    registered.set()
                elif kind == "ping":
                    await stream.send_all(json.dumps({"type": "pong", "id": message.get("id")}).encode() + b"\n")
                elif kind == "toolInvocation":
                    answer = {"type": "toolResponse", "correlationId": message["correlationId"],
                              "result": {"success": True, "data": "ok"}}
                    await stream.send_all(json.dumps(answer).encode() + b"\n")
                elif kind == "error":
                    raise RuntimeError(f"app {index}: {message}")


async def run_once(args: argparse.Namespace, freeze: str) -> dict[str, Any]:
    with h.temp_home() as home:
        (home / "config.toml").write_text("heartbeat_timeout = 600.0\n")
        with h.Daemon(home, env={"BENCH_GC_FREEZE_MS": freeze}) as daemon:
            async with trio.open_nursery() as nursery:
                started = time.perf_counter()
                for index in range(args.apps):
                    registered = trio.Event()
                    nursery.start_soon(app, daemon.port, daemon.token, index, args.tools, registered)
                    with trio.fail_after(args.timeout):
                        await registered.wait()
                register_s = time.perf_counter() - started
                stream = await trio.open_tcp_stream("127.0.0.1", daemon.port)
                await stream.send_all(json.dumps({"type": "agentConnect", "token": daemon.token}).encode() + b"\n")
                buffer = bytearray()
                await _lines(stream, buffer)
                started = time.perf_counter()
                for n in range(args.calls):
                    request = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
                        "name": f"Big{n % args.apps:02d}__t{n % args.tools:04d}", "arguments": {"arg0": n}}}
                    await stream.send_all(json.dumps(request).encode() + b"\n")
                    with trio.fail_after(args.timeout):
                        while not any(m.get("id") == n for m in await _lines(stream, buffer)):
                            pass
                calls_s = time.perf_counter() - started
                await stream.aclose()
                gc_stats = await trio.to_thread.run_sync(daemon.admin, "bench.gc")
                loop = (await trio.to_thread.run_sync(daemon.admin, "status"))["eventLoop"]
                nursery.cancel_scope.cancel()
    return {"freeze_ms": freeze, "register_s": round(register_s, 2), "calls_per_s": round(args.calls / calls_s),
            "max_stall_ms": loop["maxStallMs"], "max_late_ms": loop["maxLateMs"], **gc_stats}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", type=int, default=19)
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--freeze-ms", default="off,20", help="comma-separated: off or a number of ms")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs = [trio.run(run_once, args, freeze.strip()) for freeze in args.freeze_ms.split(",") if freeze.strip()]
    rows = [[r["freeze_ms"], r["gen2"]["passes"], r["gen2"]["max_ms"], r["gen2"]["p50_ms"], r["gen1"]["max_ms"],
             r["max_stall_ms"], r["max_late_ms"], r["tracked"], r["frozen"], r["register_s"], r["calls_per_s"]]
            for r in runs]
    h.emit({"scenario": "gc_pauses", "machine": h.machine(), "runs": runs}, args.json, h.table(
        ["freeze after", "full passes", "longest full ms", "median full ms", "longest gen1 ms", "loop max stall ms",
         "loop max late ms", "tracked at end", "frozen at end", "register s", "calls/s"], rows))


if __name__ == "__main__":
    main()
