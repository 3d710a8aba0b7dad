"""Helpers for the tests of the C# app client (clients/csharp): Mono and the build.

`python3 dev.py test` installs Debian's Mono (mono-devel) when it is missing and it runs as root;
`clients/csharp/build.sh` builds the library, its unit tests, the conformance fixture and the
example into clients/csharp/bin/ (one `mcs` call each), once per test session here. Without
Mono the tests fail with what to install (they never skip: CI must run them).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CS_CLIENT = ROOT / "clients" / "csharp"
BIN = CS_CLIENT / "bin"
FIXTURE_APP = BIN / "ConformanceApp.exe"
UNIT_TESTS = BIN / "Toolbridge.Tests.exe"
SETUP_HINT = "install Mono (Debian: `apt-get install mono-devel`), or run `python3 dev.py test` as root once"

_built: list[bool] = []


def mono() -> str:
    found = shutil.which("mono")
    if found is None:
        pytest.fail(f"Mono (mono) not found on PATH: {SETUP_HINT}")
    return found


def build() -> None:
    """Build once per session with build.sh; fail the test with the compiler's output if it does not build."""
    if _built:
        return
    if shutil.which("mcs") is None:
        pytest.fail(f"the Mono C# compiler (mcs) is missing: {SETUP_HINT}")
    result = subprocess.run(["sh", str(CS_CLIENT / "build.sh")], capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        pytest.fail(f"clients/csharp/build.sh failed:\n{result.stdout}\n{result.stderr}")
    _built.append(True)


def cs_env(**extra: str) -> dict[str, str]:
    """The environment without the caller's TOOLBRIDGE_* settings, plus ``extra``."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("TOOLBRIDGE_")}
    return {**env, **extra}
