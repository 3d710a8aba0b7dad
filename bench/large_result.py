"""Scenario 5 — large results: a 5 MiB PNG image result end to end, app -> daemon -> agent over stdio.

Usage: ``python bench/large_result.py --image-bytes 5242880 --calls 10 --repeats 3 [--in-flight 10] [--json]``

The raw-socket app (``raw_echo_app.py --image-bytes N``) answers the ``image`` tool with an MCP
image block holding a PNG of exactly N bytes (base64 in the JSON line, about 4/3 N). The load
generator calls it through a ``toolbridge stdio`` process — one at a time, or with
``--in-flight N`` keeping N calls in flight at once — and times each call, from writing the
request to having read the whole response line. Side by side, the same
image from the one-hop stdio server (no relay, no daemon). Daemon memory: ``VmHWM`` (peak
resident) and ``VmRSS`` read before the image calls and after them (Linux), after a
``gc.collect()`` in the daemon; ``peak_growth_per_image`` is how many images' worth of bytes
the peak rose by (issue 18's targets: <= 2 one at a time, <= 10 with 10 in flight).

Large results as links (``result_link_bytes``, 1 MiB by default) would answer a 5 MiB image
with a link: the daemon here runs with ``TOOLBRIDGE_RESULT_LINK_BYTES=0`` so the image itself
crosses (the passthrough is what is measured); ``--links`` keeps the default, so each call is
answered with a link (the result is stored, not sent). A daemon that does not know the setting
(an older tree, for "before" numbers) ignores it.
"""

from __future__ import annotations

import argparse
from typing import Any

import trio

import _harness as h
from mcp_load import run_stdio_load


async def measure(argv: list[str], tool: str, args: argparse.Namespace, daemon: h.Daemon | None,
                  log: Any) -> dict[str, Any]:
    result = await run_stdio_load(
        argv, tool=tool, arguments={}, expect_text=None, calls=args.calls, concurrency=args.in_flight,
        warmup=args.in_flight,
        max_seconds=args.max_seconds, env=daemon.env if daemon else None, cwd=h.BENCH_DIR, stderr=log,
        watch_pids={"daemon": daemon.pid} if daemon else None,
    )
    mib = args.image_bytes / (1 << 20)
    result["mib_per_s"] = mib / (result["p50_ms"] / 1000) if result["p50_ms"] > 0 else float("nan")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image-bytes", type=int, default=5 * 1024 * 1024)
    parser.add_argument("--calls", type=int, default=10, help="calls per run")
    parser.add_argument("--in-flight", type=int, default=1, help="calls in flight at once")
    parser.add_argument("--links", action="store_true", help="keep result links on (see the docstring)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, default=60.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs: dict[str, list[dict[str, Any]]] = {"toolbridge": [], "one_hop": []}
    env = {} if args.links else {"TOOLBRIDGE_RESULT_LINK_BYTES": "0"}
    with h.temp_home() as home, h.Daemon(home / "home", env=env) as daemon:
        app = [h.PYTHON, str(h.BENCH_DIR / "raw_echo_app.py"), "--home", str(daemon.home),
               "--image-bytes", str(args.image_bytes)]
        with h.started(app, log=home / "app.log"):
            daemon.wait_tools(2)
            memory_before = daemon.memory()
            one_hop = [h.PYTHON, str(h.BENCH_DIR / "one_hop_server.py"), "--image-bytes", str(args.image_bytes)]

            async def run_all() -> None:
                for _ in range(args.repeats):
                    runs["toolbridge"].append(await measure(daemon.stdio_argv(), "RawApp__image", args, daemon,
                                                            home / "relay.log"))
                    runs["one_hop"].append(await measure(one_hop, "image", args, None, home / "one_hop.log"))

            trio.run(run_all)
            memory_after = daemon.memory()
    keys = ("calls_per_s", "p50_ms", "p99_ms", "mean_ms", "mib_per_s", "calls", "errors", "tool_errors")
    summary = {name: h.median_of_runs(r, keys) for name, r in runs.items()}
    summary["toolbridge"]["daemon_cpu_ms_per_call"] = h.median(
        [r["cpu_us_per_call"]["daemon"] / 1000 for r in runs["toolbridge"]])
    ratio = h.median([a["p50_ms"] / b["p50_ms"] for a, b in zip(runs["toolbridge"], runs["one_hop"])])
    hwm = (memory_before.get("hwm_kib"), memory_after.get("hwm_kib"))
    memory = {
        "rss_before_kib": memory_before.get("rss_kib"), "rss_after_kib": memory_after.get("rss_kib"),
        "peak_before_kib": hwm[0], "peak_after_kib": hwm[1],
        "peak_growth_kib": (hwm[1] - hwm[0]) if None not in hwm else None,
        "peak_growth_per_image": ((hwm[1] - hwm[0]) * 1024 / args.image_bytes) if None not in hwm else None,
    }
    result = {"scenario": "large_result", "machine": h.machine(), "params": vars(args), "summary": summary,
              "p50_ratio_toolbridge_to_one_hop": ratio, "daemon_memory": memory, "runs": runs}
    rows = [[name, s["p50_ms"], s["p99_ms"], s["mib_per_s"]] for name, s in summary.items()]
    text = "\n".join([
        f"large result — {h.machine()['cores']} cores, PNG of {args.image_bytes} bytes, "
        f"{args.calls} calls x {args.repeats} runs, {args.in_flight} in flight (medians)", "",
        h.table(["path", "p50 ms", "p99 ms", "MiB/s (PNG bytes, p50)"], rows), "",
        f"toolbridge p50 / one-hop p50: {h.fmt(ratio)}", "",
        h.table(["daemon memory", "KiB"], [[k, v] for k, v in memory.items()]),
    ])
    h.emit(result, args.json, text)


if __name__ == "__main__":
    main()
