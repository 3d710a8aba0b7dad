"""``toolbridge serve`` for benchmarks: the same daemon, plus a ``bench.memory`` admin command.

Usage: ``python bench/bench_daemon.py --home H --port 0 (--http-port 0 | --no-http)``

Settings come from ``load_settings`` exactly as for ``toolbridge serve`` (defaults <
``<home>/config.toml`` < ``TOOLBRIDGE_*`` < flags), logging is configured the same way, and the
daemon is :func:`broker.daemon.run.run_daemon`. Once it has started, one admin handler is added
through the core it reports (``DaemonInfo.core``): ``bench.memory`` runs ``gc.collect()`` and
answers with the process's resident memory, so a benchmark can compare the daemon's memory
before and after a load. With ``BENCH_TRACEMALLOC=1`` it also reports the traced Python heap
and the top allocation sites by size (slow: for finding where memory goes, not for timing).

As ``toolbridge serve`` does, it runs under ``broker.daemon.gc_policy`` (freeze after a full
garbage-collection pass over ``BENCH_GC_FREEZE_MS``, default the daemon's; ``off``: no policy,
for comparison), and ``bench.gc`` answers with the collector's pauses timed by a callback of its
own (every pass since start: count and longest per generation) and how many objects are frozen.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import trio

from broker.daemon.gc_policy import FREEZE_AFTER_MS, freezing_after_long_passes
from broker.daemon.run import run_daemon
from broker.config.logsetup import configure_logging
from broker.config.settings_file import load_settings


def _memory() -> dict[str, Any]:
    found: dict[str, Any] = {"rss_kib": None, "hwm_kib": None}
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    found["rss_kib"] = int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    found["hwm_kib"] = int(line.split()[1])
    except OSError:
        maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        found["hwm_kib"] = maxrss // 1024 if sys.platform == "darwin" else maxrss
    return found


def _malloc_trim() -> None:
    """Give freed heap pages back to the OS (glibc only): without it, freed memory stays in the
    process's RSS, so "after" would measure glibc's caching, not what the daemon still holds."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name and sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(name).malloc_trim(0)
        except (OSError, AttributeError):
            pass


async def bench_memory(core: Any, request: Any) -> dict[str, Any]:
    collected = gc.collect()
    if getattr(request, "args", None) and request.args.get("trim"):
        _malloc_trim()
    result = _memory()
    result["gc_collected"] = collected
    result["allocated_blocks"] = sys.getallocatedblocks()
    result["calls_in_flight"] = len(core.calls)
    import tracemalloc

    if tracemalloc.is_tracing():
        snapshot = tracemalloc.take_snapshot()
        result["traced_kib"] = tracemalloc.get_traced_memory()[0] // 1024
        top = snapshot.statistics("lineno")[:12]
        result["top"] = [f"{s.size // 1024} KiB {s.count} blocks {s.traceback}" for s in top]
    return result


class _GcTimes:
    """Every garbage-collection pass's duration, by generation (a ``gc.callbacks`` entry)."""

    def __init__(self) -> None:
        self.passes: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.passes[info["generation"]].append((time.perf_counter() - self._started) * 1000)


_GC_TIMES = _GcTimes()


async def bench_gc(core: Any, request: Any) -> dict[str, Any]:
    result: dict[str, Any] = {"frozen": gc.get_freeze_count(), "tracked": len(gc.get_objects())}
    for generation, times in _GC_TIMES.passes.items():
        ordered = sorted(times)
        result[f"gen{generation}"] = {"passes": len(times), "max_ms": round(ordered[-1], 2) if times else 0.0,
                                      "p50_ms": round(ordered[len(ordered) // 2], 2) if times else 0.0}
    return result


async def main(args: argparse.Namespace) -> None:
    settings = load_settings(args, Path(args.home))
    configure_logging(settings.log_format, batched=True)  # as `toolbridge serve`
    if os.environ.get("BENCH_TRACEMALLOC") == "1":
        import tracemalloc

        tracemalloc.start(8)
    gc.callbacks.append(_GC_TIMES)
    freeze = os.environ.get("BENCH_GC_FREEZE_MS", str(FREEZE_AFTER_MS))
    with contextlib.nullcontext() if freeze == "off" else freezing_after_long_passes(float(freeze)):
        async with trio.open_nursery() as nursery:
            await nursery.start(lambda task_status: run_daemon(
                settings, handle_signals=True, extra_admin={"bench.memory": bench_memory, "bench.gc": bench_gc},
                task_status=task_status))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", required=True)
    parser.add_argument("--host", default=None)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--http-port", type=int, default=None)
    parser.add_argument("--no-http", action="store_true")
    parser.add_argument("--log-format", default=None)
    trio.run(main, parser.parse_args())
