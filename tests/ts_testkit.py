"""Helpers for the tests of the TypeScript app client (clients/typescript): Node, npm, the build.

`python3 dev.py test` runs `npm ci` there (typescript, @types/node); these helpers find Node
and build the package once per test session with `tsc -p` (whose tsconfig is `strict`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TS_CLIENT = ROOT / "clients" / "typescript"
TSC = TS_CLIENT / "node_modules" / "typescript" / "bin" / "tsc"
FIXTURE_APP = TS_CLIENT / "dist" / "fixtures" / "conformance-app.js"
SETUP_HINT = "run `python3 dev.py test` once (it installs Node tools and runs `npm ci` in clients/typescript)"

_built: list[bool] = []


def node() -> str:
    found = shutil.which("node")
    if found is None:
        pytest.fail(f"Node.js (node) not found on PATH: {SETUP_HINT}")
    return found


def npm() -> str:
    found = shutil.which("npm")
    if found is None:
        pytest.fail(f"npm not found on PATH: {SETUP_HINT}")
    return found


def run_tsc() -> subprocess.CompletedProcess[str]:
    """Compile the package (sources, tests, fixture) with `tsc -p tsconfig.json --strict`."""
    if not TSC.exists():
        pytest.fail(f"the TypeScript client's devDependencies are missing ({TSC}): {SETUP_HINT}")
    return subprocess.run([node(), str(TSC), "-p", str(TS_CLIENT / "tsconfig.json"), "--strict"],
                          cwd=TS_CLIENT, capture_output=True, text=True, timeout=300)


def build() -> None:
    """Build once per session; fail the test with tsc's output if it does not compile cleanly."""
    if _built:
        return
    result = run_tsc()
    if result.returncode != 0:
        pytest.fail(f"tsc failed:\n{result.stdout}\n{result.stderr}")
    _built.append(True)


def node_env(**extra: str) -> dict[str, str]:
    """The environment without the caller's TOOLBRIDGE_* settings, plus ``extra``."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("TOOLBRIDGE_")}
    return {**env, **extra}
