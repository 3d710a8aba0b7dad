"""The C# app client (clients/csharp, issue 29): its unit tests, and the conformance kit against
its fixture app (every scenario of both kit versions), like the Python and TypeScript fixtures;
a fixture broken on purpose fails the matching vector."""

from __future__ import annotations

import subprocess
import sys

import pytest

from broker import conformance
from csharp_testkit import FIXTURE_APP, ROOT, UNIT_TESTS, build, cs_env, mono

VECTORS = ROOT / "broker" / "conformance" / "vectors"


def test_the_unit_tests_pass() -> None:
    build()
    done = subprocess.run([mono(), str(UNIT_TESTS), str(VECTORS)], capture_output=True, text=True,
                          timeout=300, env=cs_env())
    assert done.returncode == 0, done.stdout + done.stderr
    last = done.stdout.splitlines()[-1]
    ran = int(last.split(" of ")[1].split()[0])
    assert ran >= 19 and last == f"{ran} of {ran} tests passed"


def kit(*args: str, only: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    selection = [part for name in only for part in ("--only", name)]
    return subprocess.run(
        [sys.executable, "-m", "broker", "conformance", "app", *selection, "--", mono(), str(FIXTURE_APP), *args],
        capture_output=True, text=True, timeout=600, cwd=ROOT, env=cs_env(),
    )


def test_the_csharp_fixture_app_passes_every_scenario() -> None:
    build()
    scenarios = len(conformance.load_scenarios())
    done = kit()
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert sum(line.startswith("pass: ") for line in lines) == scenarios
    assert lines[-1] == f"{scenarios} of {scenarios} scenarios passed"


@pytest.mark.parametrize(("broken", "vector"), [("echo", "echo"), ("image", "result-image")])
def test_a_broken_fixture_fails_the_matching_vector(broken: str, vector: str) -> None:
    build()
    done = kit("--break", broken, only=(vector, "heartbeat"))
    lines = done.stdout.splitlines()
    assert done.returncode != 0, done.stdout
    assert any(line.startswith(f"FAIL: {vector}: ") for line in lines), done.stdout
    assert "pass: heartbeat" in lines  # only the broken behaviour fails
