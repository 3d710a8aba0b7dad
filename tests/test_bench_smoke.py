"""Smoke run of every benchmark scenario (bench/*.py) at tiny sizes.

Each scenario runs as a subprocess with ``--json``; the test checks that it completes and that
its numbers are well-formed (present, finite, positive where they must be). No timing is
asserted: these runs are far too small to mean anything, and CI machines vary.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"

SCENARIOS = {
    "relay_stdio": ["--calls", "50", "--concurrency", "1,4", "--repeats", "1", "--warmup", "10"],
    "relay_http": ["--calls", "30", "--concurrency", "1,4", "--repeats", "1", "--warmup", "5"],
    "scale": ["--apps", "70", "--tools", "10", "--in-flight", "200", "--repeats", "1", "--list-repeats", "2"],
    "pipeline": ["--iterations", "200", "--repeats", "3", "--calls", "50", "--repeats-relay", "1", "--warmup", "10"],
    "large_result": ["--image-bytes", "262144", "--calls", "2", "--repeats", "1"],
    "cli_startup": ["--runs", "1"],
    "gc_pauses": ["--apps", "2", "--tools", "50", "--calls", "20", "--freeze-ms", "off,20"],
    "app_cpu": ["--calls", "200", "--concurrency", "4", "--repeats", "1"],
}


def run_scenario(name: str, *extra: str) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, str(BENCH / f"{name}.py"), *SCENARIOS[name], *extra, "--json"],
        capture_output=True, timeout=120, cwd=BENCH.parent,
    )
    assert completed.returncode == 0, completed.stderr.decode(errors="replace")[-3000:]
    result = json.loads(completed.stdout.decode().strip().splitlines()[-1])
    assert result["scenario"] == name
    assert result["machine"]["cores"] >= 1
    return result


def positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def non_negative(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value >= 0


def check_load(stats: dict[str, Any], calls: int | None = None) -> None:
    for key in ("calls_per_s", "p50_ms", "p99_ms"):
        assert positive(stats[key]), (key, stats)
    assert stats["p50_ms"] <= stats["p99_ms"]
    assert stats["errors"] == 0, stats
    if calls is not None:
        assert stats["calls"] == calls, stats


def test_relay_stdio() -> None:
    result = run_scenario("relay_stdio")
    for target in ("app_client", "raw_app", "one_hop", "sdk"):
        for level in (1, 4):
            check_load(result["summary"][f"{target}@{level}"], calls=50)
            assert result["summary"][f"{target}@{level}"]["tool_errors"] == 0
    assert len(result["ratios"]) == 8
    for ratio in result["ratios"].values():
        assert positive(ratio["throughput_ratio"]) and positive(ratio["p50_ratio"])
    assert positive(result["daemon_memory"]["after"]["hwm_kib"])


def test_relay_stdio_with_an_app_answering_one_call_at_a_time() -> None:
    # Performance round 4's row: the app_client app with max_concurrency 1 (a GUI thread).
    result = run_scenario("relay_stdio", "--targets", "app_client", "--app-concurrency", "1")
    for level in (1, 4):
        check_load(result["summary"][f"app_client@{level}"], calls=50)
        assert result["summary"][f"app_client@{level}"]["tool_errors"] == 0


def test_relay_stdio_breakdown() -> None:
    # Performance round 5: one call's stages beside the daemon's measured CPU per call.
    result = run_scenario("relay_stdio", "--targets", "raw_app", "--concurrency", "1", "--breakdown")
    parts = result["breakdown"]
    for stage in ("mcp_parse_request", "validate", "guards", "audit_without_call_log", "call_log_row_encode"):
        assert positive(parts[stage]), stage
    assert positive(parts["sum of the stages"])
    assert non_negative(parts["raw_app@1: daemon CPU per call"])  # a few clock ticks at this size
    assert math.isfinite(parts["raw_app@1: less the stages (loop, I/O, session, bookkeeping)"])


def test_relay_http() -> None:
    result = run_scenario("relay_http")
    for target in ("app_client", "raw_app", "raw_app_modern", "sdk"):
        for level in (1, 4):
            check_load(result["summary"][f"{target}@{level}"], calls=30)
            assert result["summary"][f"{target}@{level}"]["errors"] == 0
            if sys.platform.startswith("linux"):  # CPU times come from /proc, in 10 ms ticks:
                # 30 calls may well take less than one tick, so 0 is a valid reading.
                assert non_negative(result["summary"][f"{target}@{level}"]["cpu_us_per_call"]["server"])
    for ratio in result["ratios"].values():
        assert positive(ratio["throughput_ratio"]) and positive(ratio["p50_ratio"])


def test_scale() -> None:
    summary = run_scenario("scale")["summary"]
    for key in ("all_registered_s", "tools_list_whole_ms", "tools_list_first_page_ms",
                "tools_list_whole_via_stdio_ms", "resolve_all_s", "daemon_peak_kib"):
        assert positive(summary[key]), (key, summary)
    assert summary["calls_resolved"] == 200  # (70 apps: more than one token's default cap of 64)
    assert summary["calls_failed"] == 0
    assert summary["tools_list_pages"] >= 1
    if sys.platform.startswith("linux"):  # VmRSS comes from /proc
        assert math.isfinite(summary["bytes_per_pending_call"])
        assert positive(summary["daemon_rss_apps_registered_kib"])


def test_pipeline() -> None:
    result = run_scenario("pipeline")
    for stage in ("resolve", "validate", "guards", "audit", "call_log_row_encode", "pipeline_stages_total"):
        assert positive(result["stages_us"][stage]), stage
    assert positive(result["whole_call_us"]["call_tool_sequential_us"])
    assert positive(result["whole_call_us"]["call_tool_concurrent32_us"])
    for variant in ("call_log_on", "call_log_off"):
        for level in (1, 32):
            check_load(result["relay"]["summary"][f"{variant}@{level}"], calls=50)
    assert all(positive(v) for v in result["relay"]["throughput_ratio"].values())


def test_large_result() -> None:
    result = run_scenario("large_result")
    for path in ("toolbridge", "one_hop"):
        check_load(result["summary"][path], calls=2)
        assert positive(result["summary"][path]["mib_per_s"])
    assert positive(result["p50_ratio_toolbridge_to_one_hop"])
    if sys.platform.startswith("linux"):
        assert non_negative(result["daemon_memory"]["peak_growth_kib"])


def test_large_result_in_flight_and_as_links() -> None:
    # Performance round 4's rows: several large results at once, and the link mode (issue 17).
    for extra in (("--in-flight", "2", "--calls", "4"), ("--links",)):
        result = run_scenario("large_result", *extra)
        assert positive(result["summary"]["toolbridge"]["mib_per_s"]), extra
        assert result["summary"]["toolbridge"]["errors"] == 0, extra


def test_cli_startup() -> None:
    result = run_scenario("cli_startup")
    assert set(result["commands"]) == {"-V", "--help", "status", "tools", "call"}
    for command in result["commands"].values():
        assert positive(command["median_ms"]) and command["median_ms"] <= command["max_ms"]


def test_gc_pauses() -> None:
    result = run_scenario("gc_pauses")
    assert [run["freeze_ms"] for run in result["runs"]] == ["off", "20"]
    for run in result["runs"]:
        assert positive(run["calls_per_s"]) and positive(run["tracked"]) and non_negative(run["frozen"])
        assert non_negative(run["max_stall_ms"]) and non_negative(run["gen2"]["max_ms"])


@pytest.mark.parametrize("app", ["app_client", "raw"])
def test_app_cpu(app: str) -> None:
    result = run_scenario("app_cpu", "--app", app)
    assert result["params"]["app"] == app and len(result["runs"]) == 1
    assert positive(result["calls_per_s"]) and non_negative(result["app_cpu_us_per_call"])


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_scenario_has_a_smoke_test(name: str) -> None:
    assert f"test_{name}" in globals()
    assert (BENCH / f"{name}.py").exists()
