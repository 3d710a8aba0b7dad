"""The TypeScript app client (clients/typescript): `tsc --strict` is clean and `npm test` passes.

`npm test` runs Node's own test runner on the compiled tests, which start real daemons
(`python -m broker serve`, with this interpreter through TOOLBRIDGE_PYTHON) and a scripted one.
"""

from __future__ import annotations

import subprocess
import sys

from ts_testkit import TS_CLIENT, build, node_env, npm, run_tsc


def test_the_typescript_client_compiles_cleanly_with_tsc_strict() -> None:
    result = run_tsc()
    assert result.returncode == 0, f"tsc reported:\n{result.stdout}\n{result.stderr}"
    assert result.stdout.strip() == "" and result.stderr.strip() == ""
    assert (TS_CLIENT / "dist" / "src" / "index.d.ts").exists(), "declarations are emitted"


def test_npm_test_passes_against_a_real_daemon() -> None:
    build()
    result = subprocess.run([npm(), "test", "--silent"], cwd=TS_CLIENT, capture_output=True, text=True, timeout=600,
                            env=node_env(TOOLBRIDGE_PYTHON=sys.executable))
    summary = [line for line in result.stdout.splitlines() if line.startswith(("# pass", "# fail", "not ok"))]
    assert result.returncode == 0, "npm test failed:\n" + result.stdout[-6000:] + result.stderr[-3000:]
    assert "# fail 0" in summary, summary
