"""The bounded soak: ``bench/soak.py`` for ~20 s of random faults, then its leak checks.

The long run is a command (``python bench/soak.py --minutes 30``, see SECURITY.md). The seed
is random unless ``TOOLBRIDGE_SOAK_SEED`` is set; it is printed, and named in any failure, so
a failing run can be repeated (choices repeat; trio's interleavings do not).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH_SOAK = Path(__file__).resolve().parent.parent / "bench" / "soak.py"


def load_soak() -> ModuleType:
    spec = importlib.util.spec_from_file_location("toolbridge_bench_soak", BENCH_SOAK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(os.name != "posix", reason="the process app is stopped with SIGKILL")
async def test_soak_resolves_every_call_once_and_leaks_nothing(tmp_path: Path) -> None:
    soak = load_soak()
    seed = int(os.environ.get("TOOLBRIDGE_SOAK_SEED", int.from_bytes(os.urandom(4), "big")))
    print(f"\nsoak seed: {seed} (set TOOLBRIDGE_SOAK_SEED={seed} to repeat its choices)")
    config = soak.SoakConfig(seconds=20.0, seed=seed, home=tmp_path / "home")
    report = await soak.run_soak(config)
    print(soak.format_report(report))
    assert report.problems == [], f"seed {seed}:\n" + soak.format_report(report)
    # The run really exercised what it claims to.
    assert report.issued > 500 and report.outcomes["ok"] > 100
    assert report.outcomes["cancelled"] > 0 and report.outcomes["timeout"] + report.outcomes["app_error"] > 0
    assert sum(report.faults.values()) >= 5
    assert report.mcp_requests > 20
    assert report.end is not None and report.baseline is not None
    assert report.pending_calls_at_end == 0
    # Failures came when their causes say (problems lists any that did not): none left on a dead link.
    assert report.ended_on_dead_link == 0
    assert report.outcomes["app_disconnected"] == 0 or report.max_disconnect_after_crash > 0
