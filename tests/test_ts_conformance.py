"""The conformance kit (`toolbridge conformance app`, issue 16 §1) against the TypeScript fixture
app, like the Python fixture's own kit test (tests/test_conformance_kit.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from agentkit import a_killed_runner_leaves_no_app
from broker import conformance
from ts_testkit import FIXTURE_APP, ROOT, build, node, node_env


def test_the_typescript_fixture_app_passes_every_scenario() -> None:
    build()
    scenarios = len(conformance.load_scenarios())
    done = subprocess.run(
        [sys.executable, "-m", "broker", "conformance", "app", "--", node(), str(FIXTURE_APP)],
        capture_output=True, text=True, timeout=600, cwd=ROOT, env=node_env(),
    )
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert sum(line.startswith("pass: ") for line in lines) == scenarios
    assert lines[-1] == f"{scenarios} of {scenarios} scenarios passed"


def test_the_typescript_fixture_app_outlives_no_runner_even_one_killed_outright(tmp_path: Path) -> None:
    build()
    a_killed_runner_leaves_no_app(tmp_path, [node(), str(FIXTURE_APP)], node_env())
