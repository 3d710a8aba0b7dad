"""Scenario 1 — relay over stdio: toolbridge against the one-hop limit and the SDK's MCPServer.

Usage: ``python bench/relay_stdio.py --calls 20000 --concurrency 1,32 --repeats 3 [--json]``

One daemon (temporary home, port 0) with two apps connected: (a) ``echo_app.py`` built on
``app_client`` (max_concurrency 64) and (b) ``raw_echo_app.py``, a plain-socket app. The load
generator (``mcp_load.py``) speaks MCP JSON-RPC to a fresh ``toolbridge stdio`` subprocess per
run: ``initialize`` (2025-11-25), then ``tools/call`` of the echo tool with up to N in flight.
Side by side, in the same repeat: (c) ``one_hop_server.py``, a minimal stdio MCP server that
answers the call itself, and (d) ``sdk_server.py stdio``, the official SDK's ``MCPServer``.

Each repeat runs every target at every concurrency in turn; the table shows medians over the
repeats, and the ratios are computed inside each repeat and then their median taken.
Every run is bounded by ``--calls`` and by ``--max-seconds`` for issuing calls.

``--breakdown`` then splits each toolbridge row's measured daemon CPU per call into what one
call's own stages cost (``pipeline.py``'s part 1, the daemon's real objects timed one stage at
a time in this process: resolve, validate, guards, the audit line with the call-log record, the
call-log row's encoding in its thread, the wire and MCP codecs; not the metrics observer,
which runs only with the HTTP port on, off in this bench) and the remainder: the event loop's
wake-ups, the socket reads and writes, the framing, and the session's and router's
bookkeeping between the stages.
"""

from __future__ import annotations

import argparse
from typing import Any

import trio

import _harness as h
from mcp_load import run_stdio_load

TARGETS = {
    "app_client": "(a) toolbridge + app_client app",
    "raw_app": "(b) toolbridge + raw-socket app",
    "one_hop": "(c) one-hop stdio server",
    "sdk": "(d) SDK MCPServer (stdio)",
}
KEYS = ("calls_per_s", "p50_ms", "p99_ms", "calls", "errors", "tool_errors")


def target_argv(name: str, daemon: h.Daemon) -> tuple[list[str], str]:
    if name == "app_client":
        return daemon.stdio_argv(), "BenchApp__echo"
    if name == "raw_app":
        return daemon.stdio_argv(), "RawApp__echo"
    if name == "one_hop":
        return [h.PYTHON, str(h.BENCH_DIR / "one_hop_server.py")], "echo"
    return [h.PYTHON, str(h.BENCH_DIR / "sdk_server.py"), "stdio"], "echo"


def ratios(runs: dict[tuple[str, int], list[dict[str, Any]]], targets: list[str], levels: list[int],
           repeats: int) -> dict[str, dict[str, float]]:
    """Per toolbridge target and concurrency: median over repeats of the same-repeat ratios."""
    found: dict[str, dict[str, float]] = {}
    for mine in ("app_client", "raw_app"):
        for other in ("one_hop", "sdk"):
            if mine not in targets or other not in targets:
                continue
            for level in levels:
                through, p50 = [], []
                for i in range(repeats):
                    a, b = runs[(mine, level)][i], runs[(other, level)][i]
                    through.append(a["calls_per_s"] / b["calls_per_s"])
                    p50.append(a["p50_ms"] / b["p50_ms"])
                found[f"{mine}/{other}@{level}"] = {
                    "throughput_ratio": h.median(through), "p50_ratio": h.median(p50),
                }
    return found


#: pipeline.py's stages that a stdio call through the daemon pays, in the order it meets them.
STAGES = ("mcp_parse_request", "resolve", "validate", "guards", "wire_encode_invocation", "wire_decode_response",
          "mcp_encode_result", "audit_without_call_log", "call_log_row_encode")


def breakdown(summary: dict[str, Any], targets: list[str], levels: list[int]) -> dict[str, float]:
    """One call's stages (``pipeline.in_process``) and, per toolbridge row, the daemon's measured
    CPU per call less their sum."""
    import argparse as _argparse

    import pipeline

    options = _argparse.Namespace(iterations=5000, repeats=3, calls=2000, metrics="on")
    with h.temp_home() as home:
        part = trio.run(pipeline.in_process, options, home / "inproc")
    stages = {name: part["stages_us"][name] for name in STAGES if name in part["stages_us"]}
    # The call-log record itself (queueing the row) is audit less audit_without_call_log.
    stages["call_log_record"] = max(0.0, part["stages_us"]["audit"] - part["stages_us"]["audit_without_call_log"])
    total = sum(stages.values())
    found = {**stages, "sum of the stages": total}
    for t in targets:
        if t not in ("app_client", "raw_app"):
            continue
        for c in levels:
            daemon = summary[f"{t}@{c}"]["cpu_us_per_call"].get("daemon")
            if daemon is not None:
                found[f"{t}@{c}: daemon CPU per call"] = daemon
                found[f"{t}@{c}: less the stages (loop, I/O, session, bookkeeping)"] = daemon - total
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--concurrency", default="1,32")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--max-seconds", type=float, default=20.0)
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--text", default="hello", help="the echo argument")
    parser.add_argument("--app-concurrency", type=int, default=64,
                        help="the app_client app's max_concurrency (1: a GUI app answering one call at a time)")
    parser.add_argument("--breakdown", action="store_true",
                        help="also time one call's stages in this process and print them against the daemon's CPU")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    levels = h.parse_list(args.concurrency)
    targets = h.parse_list(args.targets, str)
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {(t, c): [] for t in targets for c in levels}

    with h.temp_home() as home, h.Daemon(home / "home") as daemon:
        apps = [
            ([h.PYTHON, str(h.BENCH_DIR / "echo_app.py"), "--home", str(daemon.home),
              "--max-concurrency", str(args.app_concurrency)], "app_client"),
            ([h.PYTHON, str(h.BENCH_DIR / "raw_echo_app.py"), "--home", str(daemon.home)], "raw_app"),
        ]
        with h.started(apps[0][0], log=home / "echo_app.log") as app_a, \
                h.started(apps[1][0], log=home / "raw_app.log") as app_b:
            app_pids = {"app_client": app_a.pid, "raw_app": app_b.pid}
            daemon.wait_tools(2)
            memory_before = daemon.memory()

            async def measure() -> None:
                for _ in range(args.repeats):
                    for level in levels:
                        for name in targets:
                            argv, tool = target_argv(name, daemon)
                            watch = {"daemon": daemon.pid, "app": app_pids[name]} if name in app_pids else None
                            result = await run_stdio_load(
                                argv, tool=tool, arguments={"text": args.text}, expect_text=args.text,
                                calls=args.calls, concurrency=level, warmup=args.warmup,
                                max_seconds=args.max_seconds, env=daemon.env, cwd=h.BENCH_DIR,
                                stderr=home / f"{name}.stderr.log", watch_pids=watch,
                            )
                            runs[(name, level)].append(result)

            trio.run(measure)
            memory_after = daemon.memory()

    summary = {f"{t}@{c}": h.median_of_runs(runs[(t, c)], KEYS) for t in targets for c in levels}
    for t in targets:
        for c in levels:
            per_process = runs[(t, c)][0].get("cpu_us_per_call", {}) if runs[(t, c)] else {}
            summary[f"{t}@{c}"]["cpu_us_per_call"] = {
                name: h.median([r["cpu_us_per_call"][name] for r in runs[(t, c)]]) for name in per_process
            }
    result = {
        "scenario": "relay_stdio",
        "machine": h.machine(),
        "params": vars(args),
        "summary": summary,
        "ratios": ratios(runs, targets, levels, args.repeats),
        "daemon_memory": {"before": memory_before, "after": memory_after},
        "runs": {f"{t}@{c}": runs[(t, c)] for t in targets for c in levels},
    }
    rows = []
    for level in levels:
        for t in targets:
            s = summary[f"{t}@{level}"]
            cpu = s["cpu_us_per_call"]
            cpu_text = " ".join(f"{k.replace('load_generator', 'load').replace('server', 'stdio')} {h.fmt(v)}"
                                for k, v in cpu.items())
            rows.append([TARGETS[t], level, s["calls_per_s"], s["p50_ms"], s["p99_ms"], int(s["calls"]), cpu_text])
    text = [f"relay over stdio — {h.machine()['cores']} cores, medians of {args.repeats} runs", "",
            h.table(["target", "concurrency", "calls/s", "p50 ms", "p99 ms", "calls/run", "CPU µs per call"], rows), ""]
    rrows = [[k, v["throughput_ratio"], v["p50_ratio"]] for k, v in result["ratios"].items()]
    if rrows:
        text += [h.table(["toolbridge / reference @ concurrency", "throughput ratio", "p50 ratio"], rrows)]
    if args.breakdown:
        result["breakdown"] = breakdown(summary, targets, levels)
        text += ["", "one call's stages, timed alone in this process (pipeline.py part 1), against the daemon's CPU", "",
                 h.table(["part", "µs per call"], [[k, v] for k, v in result["breakdown"].items()])]
    h.emit(result, args.json, "\n".join(text))


if __name__ == "__main__":
    main()
