"""The C# app client (clients/csharp, issue 29): its unit tests, and the conformance kit against
its fixture app (every scenario of both kit versions), like the Python and TypeScript fixtures;
a fixture broken on purpose fails the matching vector."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentkit import a_killed_runner_leaves_no_app
from broker import conformance
from csharp_testkit import BIN, FIXTURE_APP, ROOT, UNIT_TESTS, build, cs_env, mono

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
        # A Mono that hangs before it connects (seen once in CI) is asked for its threads' stacks.
        [sys.executable, "-m", "broker", "conformance", "app", *selection, "--stacks-signal", "QUIT",
         "--", mono(), str(FIXTURE_APP), *args],
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


def test_the_client_leaves_the_runtimes_timer_thread_alone() -> None:
    """Every timeout of the client runs on its own clock thread (src/Clock.cs), none on
    System.Threading.Timer or Task.Delay: Mono's timer thread, aborted at exit while it sorts its
    timers, ends the host program with exit code 1 (mono/mono#15418, seen in the goodbye
    scenario), and the client's timers kept it busy until then."""
    build()
    ikdasm = shutil.which("ikdasm")
    assert ikdasm is not None, "ikdasm (mono-devel) is missing"
    il = subprocess.run([ikdasm, str(BIN / "Toolbridge.dll")], capture_output=True, text=True, check=True,
                        timeout=120).stdout
    assert "Toolbridge.Clock" in il
    assert [line.strip() for line in il.splitlines() if "System.Threading.Timer" in line or "Task::Delay" in line] == []


def referenced_types_outside_netstandard(assembly: Path) -> list[str]:
    """The types an assembly uses that .NET Standard 2.0 does not have: every type reference in
    its IL (ikdasm, part of mono-devel) checked against Mono's netstandard.dll facade, which
    forwards exactly the .NET Standard 2.0 types. (Types, not members: a member missing from
    the standard would still slip through.)"""
    ikdasm = shutil.which("ikdasm")
    assert ikdasm is not None, "ikdasm (mono-devel) is missing"
    facade = Path(mono()).resolve().parent.parent / "lib" / "mono" / "4.5" / "Facades" / "netstandard.dll"
    il = subprocess.run([ikdasm, str(assembly)], capture_output=True, text=True, check=True, timeout=120).stdout
    forwards = subprocess.run([ikdasm, str(facade)], capture_output=True, text=True, check=True, timeout=120).stdout
    standard = set(re.findall(r"\.class extern forwarder ([A-Za-z0-9_.`]+)", forwards))
    assert len(standard) > 2000, facade
    used = set(re.findall(r"\[([A-Za-z.]+)\]([A-Za-z0-9_.`]+)", il))
    return sorted(f"[{where}]{name}" for where, name in used if name not in standard)


def test_the_library_uses_only_netstandard_2_0_types() -> None:
    build()
    assert referenced_types_outside_netstandard(BIN / "Toolbridge.dll") == []
    # The check can fail: the WinForms example uses types .NET Standard does not have.
    assert "[System.Windows.Forms]System.Windows.Forms.Form" in referenced_types_outside_netstandard(BIN / "NotesApp.exe")


def test_the_csharp_fixture_app_outlives_no_runner_even_one_killed_outright(tmp_path: Path) -> None:
    build()
    a_killed_runner_leaves_no_app(tmp_path, [mono(), str(FIXTURE_APP)], cs_env())
