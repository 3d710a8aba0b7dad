"""Scenario 4 — pipeline cost: each router stage per call, and relay throughput with the call log on/off.

Usage: ``python bench/pipeline.py --iterations 20000 --repeats 7 --calls 10000 [--json]
[--metrics on|off] [--no-relay]``

Part 1, in this process, with the daemon's real objects (``BrokerCore``, its registry, router,
call log, and logging configured as ``toolbridge serve`` does, writing JSON lines to a file):
the median over ``--repeats`` of the time per operation of each stage of one call —
resolve (registry lookup), validate (the compiled input schema), guards (path traversal),
audit (the log line plus the call-log record), the call-log writer's row (encode + SQLite
insert, done in its own thread), the wire codec (encode ``toolInvocation``, decode
``toolResponse``) and the MCP codec (parse the ``tools/call`` line, build and encode the
result). Then a whole ``router.call_tool`` to an app on an in-memory stream (no sockets),
one at a time and 32 at once.

Part 2, real processes: two daemons side by side, one with ``TOOLBRIDGE_CALL_LOG=false``,
each with the raw-socket echo app; the stdio load generator alternates between them in each
repeat (concurrency 1 and 32) and the ratio on/off is taken inside each repeat.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import trio
import trio.testing

import _harness as h
from mcp_load import run_stdio_load

ARGS = {"path": "docs/report.txt", "text": "hello world", "count": 3}
SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "text": {"type": "string"}, "count": {"type": "integer"}},
    "required": ["path", "text"],
    "additionalProperties": False,
}


def per_op(fn: Any, iterations: int, repeats: int) -> float:
    """Median over ``repeats`` of the mean microseconds per call of ``fn()``."""
    samples = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter_ns()
        for _ in range(iterations):
            fn()
        samples.append((time.perf_counter_ns() - start) / iterations / 1000)
    return statistics.median(samples)


def configure_daemon_logging(log_path: Path) -> Any:
    """Logging exactly as the daemon sets it up, but into ``log_path`` instead of stderr."""
    from broker.config.logsetup import configure_logging

    log_file = open(log_path, "a")
    saved = sys.stderr
    sys.stderr = log_file
    try:
        configure_logging("json", batched=True)  # as `toolbridge serve` (flushed per 256 KiB here)
    finally:
        sys.stderr = saved
    return log_file


async def fake_app(stream: trio.abc.Stream, token: str) -> None:
    """An app on an in-memory stream: registers one tool, answers every invocation at once."""
    import msgspec

    encode = msgspec.json.Encoder().encode
    register = {"type": "register", "appName": "Bench", "token": token, "maxConcurrency": 64,
                "tools": [{"name": "write", "description": "Write text", "inputSchema": SCHEMA}]}
    await stream.send_all(encode(register) + b"\n")
    buffer = b""
    while True:
        data = await stream.receive_some(65536)
        if not data:
            return
        buffer += data
        *lines, buffer = buffer.split(b"\n")
        out = []
        for line in lines:
            message = msgspec.json.decode(line)
            if message.get("type") == "toolInvocation":
                out.append(encode({"type": "toolResponse", "correlationId": message["correlationId"],
                                   "result": {"success": True, "data": {"written": 11}}}) + b"\n")
            elif message.get("type") == "ping":
                out.append(encode({"type": "pong", "id": message.get("id")}) + b"\n")
        if out:
            await stream.send_all(b"".join(out))


async def in_process(args: argparse.Namespace, home: Path) -> dict[str, Any]:
    from app_client.wire import ToolInvocation, ToolResult, decode_message, encode_message
    from broker.core.calllog import make_row, open_call_log
    from broker.config.settings import Settings
    from broker.daemon.broker_core import BrokerCore
    from broker.core.guards import find_path_traversal
    from broker.config.home import ensure_home, load_or_create_token
    from broker.mcp import jsonrpc
    from broker.mcp.results import call_result
    from broker.core.router import CallerInfo, CallOutcome

    # The stage timings below block the event loop for many seconds: no heartbeats meanwhile.
    settings = Settings(home=home, port=0, http_port=None, heartbeat_interval=3600, heartbeat_timeout=7200)
    ensure_home(home)
    log_file = configure_daemon_logging(home / "daemon.log")
    token = load_or_create_token(home)
    it, reps = args.iterations, args.repeats
    stages: dict[str, float] = {}
    async with open_call_log(settings) as call_log, trio.open_nursery() as nursery:
        core = BrokerCore(settings, token, call_log)
        app_side, broker_side = trio.testing.memory_stream_pair()
        nursery.start_soon(core.handle_connection, broker_side)
        nursery.start_soon(fake_app, app_side, token)
        with trio.fail_after(10):
            while core.registry.lookup("Bench__write") is None:
                await trio.sleep(0.01)
        router = core.router
        tool = router.registry.lookup("Bench__write")
        assert tool is not None
        caller = CallerInfo("bench", "1", "s-1", "stdio")
        ok = CallOutcome("ok", result=ToolResult(data={"written": 11}), correlation_id=1)
        stages["resolve"] = per_op(lambda: router.registry.lookup("Bench__write"), it, reps)
        stages["validate"] = per_op(lambda: tool.validate(ARGS), it, reps)
        stages["guards"] = per_op(lambda: find_path_traversal(ARGS), it, reps)
        stages["audit"] = per_op(
            lambda: router._audit("Bench__write", tool, caller, time.perf_counter(), ok, ARGS), it, reps)
        router._call_log = None
        stages["audit_without_call_log"] = per_op(
            lambda: router._audit("Bench__write", tool, caller, time.perf_counter(), ok, ARGS), it, reps)
        router._call_log = call_log
        pending = (time.time(), "Bench__write", "Bench", "#1", "bench/1", "s-1", ARGS, ok, 0.1)
        stages["call_log_row_encode"] = per_op(lambda: make_row(pending), it, reps)  # type: ignore[arg-type]
        invocation = ToolInvocation(correlation_id=123, tool="write", parameters=ARGS, timeout_ms=30000)
        response = b'{"type":"toolResponse","correlationId":123,"result":{"success":true,"data":{"written":11}}}'
        stages["wire_encode_invocation"] = per_op(lambda: encode_message(invocation), it, reps)
        stages["wire_decode_response"] = per_op(lambda: decode_message(response), it, reps)
        request = (b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"Bench__write",'
                   b'"arguments":{"path":"docs/report.txt","text":"hello world","count":3}}}')
        stages["mcp_parse_request"] = per_op(lambda: jsonrpc.parse_message(request), it, reps)
        stages["mcp_encode_result"] = per_op(
            lambda: jsonrpc.encode_result(7, call_result(ok, "Bench__write")), it, reps)
        stages["pipeline_stages_total"] = sum(
            stages[k] for k in ("resolve", "validate", "guards", "audit"))
        if args.metrics == "on":
            # The status page's and /metrics' observer (broker.mcp.monitor), which a daemon with
            # its HTTP port on runs at every call's end; the whole calls below include it too.
            from broker.mcp.monitor import Monitor
            from broker.mcp.server import McpServer

            monitor = Monitor(McpServer.of(core))
            stages["metrics_observer"] = per_op(
                lambda: monitor.call_ended("Bench__write", tool, caller, 0.1, ok), it, reps)
            # Without the call log, beside audit_without_call_log: the call-log writer thread,
            # still busy with the rows of the stages above, would take the GIL and blur the delta.
            router._call_log = None
            stages["audit_without_call_log_with_metrics"] = per_op(
                lambda: router._audit("Bench__write", tool, caller, time.perf_counter(), ok, ARGS), it, reps)
            router._call_log = call_log

        # Whole calls through the router to the in-memory app.
        async def sequential(n: int) -> float:
            start = time.perf_counter_ns()
            for _ in range(n):
                outcome = await router.call_tool("Bench__write", dict(ARGS), caller=caller)
                assert outcome.kind == "ok", outcome
            return (time.perf_counter_ns() - start) / n / 1000

        async def concurrent(n: int, width: int) -> float:
            per_task = n // width
            start = time.perf_counter_ns()
            async with trio.open_nursery() as inner:
                for _ in range(width):
                    async def worker() -> None:
                        for _ in range(per_task):
                            outcome = await router.call_tool("Bench__write", dict(ARGS), caller=caller)
                            assert outcome.kind == "ok", outcome
                    inner.start_soon(worker)
            return (time.perf_counter_ns() - start) / (per_task * width) / 1000

        calls = max(32, args.calls // 4)
        await sequential(min(200, calls))
        whole = {
            "call_tool_sequential_us": statistics.median([await sequential(calls) for _ in range(3)]),
            "call_tool_concurrent32_us": statistics.median([await concurrent(calls, 32) for _ in range(3)]),
        }
        nursery.cancel_scope.cancel()
    log_file.close()
    return {"stages_us": stages, "whole_call_us": whole}


def relay_call_log(args: argparse.Namespace, home: Path) -> dict[str, Any]:
    levels = h.parse_list(args.concurrency)
    variants = {"call_log_on": "true", "call_log_off": "false"}
    runs: dict[str, list[dict[str, Any]]] = {f"{v}@{c}": [] for v in variants for c in levels}
    with h.Daemon(home / "on", env={"TOOLBRIDGE_CALL_LOG": "true"}) as on, \
            h.Daemon(home / "off", env={"TOOLBRIDGE_CALL_LOG": "false"}) as off:
        daemons = {"call_log_on": on, "call_log_off": off}
        with h.started([h.PYTHON, str(h.BENCH_DIR / "raw_echo_app.py"), "--home", str(on.home)], log=home / "a1.log"), \
                h.started([h.PYTHON, str(h.BENCH_DIR / "raw_echo_app.py"), "--home", str(off.home)], log=home / "a2.log"):
            on.wait_tools(1)
            off.wait_tools(1)

            async def measure() -> None:
                for _ in range(args.repeats_relay):
                    for level in levels:
                        for variant, daemon in daemons.items():
                            runs[f"{variant}@{level}"].append(await run_stdio_load(
                                daemon.stdio_argv(), tool="RawApp__echo", arguments={"text": "hello"},
                                expect_text="hello", calls=args.calls, concurrency=level, warmup=args.warmup,
                                max_seconds=args.max_seconds, env=daemon.env, cwd=h.BENCH_DIR,
                                stderr=home / "relay.log"))

            trio.run(measure)
    keys = ("calls_per_s", "p50_ms", "p99_ms", "calls", "errors")
    summary = {k: h.median_of_runs(v, keys) for k, v in runs.items()}
    ratio = {
        f"on/off@{c}": h.median([a["calls_per_s"] / b["calls_per_s"]
                                 for a, b in zip(runs[f"call_log_on@{c}"], runs[f"call_log_off@{c}"])])
        for c in levels
    }
    return {"summary": summary, "throughput_ratio": ratio, "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20000, help="operations per timing sample")
    parser.add_argument("--repeats", type=int, default=7, help="timing samples per stage (median)")
    parser.add_argument("--calls", type=int, default=10000, help="calls per relay run")
    parser.add_argument("--concurrency", default="1,32")
    parser.add_argument("--repeats-relay", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--max-seconds", type=float, default=20.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--metrics", choices=["on", "off"], default="on",
                        help="part 1 with the metrics/status-page observer installed (as with HTTP on) or not")
    parser.add_argument("--no-relay", action="store_true", help="part 1 only")
    args = parser.parse_args()
    with h.temp_home() as home:
        part1 = trio.run(in_process, args, home / "inproc")
        part2 = relay_call_log(args, home) if not args.no_relay else {"summary": {}, "throughput_ratio": {}}
    result = {"scenario": "pipeline", "machine": h.machine(), "params": vars(args), **part1, "relay": part2}
    rows = [[k, v] for k, v in part1["stages_us"].items()] + [[k, v] for k, v in part1["whole_call_us"].items()]
    relay_rows = [[k, v["calls_per_s"], v["p50_ms"], v["p99_ms"]] for k, v in part2["summary"].items()]
    text = "\n".join([
        f"pipeline cost — {h.machine()['cores']} cores, medians of {args.repeats} samples of {args.iterations}",
        "", h.table(["stage", "µs per call"], rows), "",
        f"relay (raw app, stdio) with the call log on and off, medians of {args.repeats_relay} runs", "",
        h.table(["variant", "calls/s", "p50 ms", "p99 ms"], relay_rows), "",
        h.table(["ratio", "throughput on/off"], [[k, v] for k, v in part2["throughput_ratio"].items()]),
    ])
    h.emit(result, args.json, text)


if __name__ == "__main__":
    main()
