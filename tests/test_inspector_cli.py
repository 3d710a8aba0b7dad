"""The MCP Inspector's non-interactive CLI (npm @modelcontextprotocol/inspector) as the agent.

A second, independent client implementation: over Streamable HTTP with the bearer token, and
over stdio through `toolbridge stdio`. `.ci/run` installs the Inspector; locally, set
TOOLBRIDGE_INSPECTOR to its `mcp-inspector` binary or run the command the failure names.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import trio

from mcp_testkit import ScriptedApp, running_daemon

INSTALL = (
    'npm install --prefix "$HOME/.cache/toolbridge-inspector" --no-audit --no-fund '
    "--loglevel=error @modelcontextprotocol/inspector@2.12.0"
)


def inspector() -> str:
    candidates = [
        os.environ.get("TOOLBRIDGE_INSPECTOR"),
        str(Path.home() / ".cache/toolbridge-inspector/node_modules/.bin/mcp-inspector"),
        shutil.which("mcp-inspector"),
    ]
    for candidate in candidates:
        if candidate and Path(candidate).exists():
            return candidate
    pytest.fail(f"the MCP Inspector CLI is not installed; install it with: {INSTALL}")


async def run_cli(*args: str, exit_code: int = 0) -> dict:
    with trio.fail_after(60):
        result = await trio.run_process([inspector(), "--cli", *args], capture_stdout=True,
                                        capture_stderr=True, check=False)
    assert result.returncode == exit_code, result.stderr.decode()[-2000:]
    parsed: dict = json.loads(result.stdout)
    return parsed


async def test_inspector_over_http_and_stdio(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with running_daemon(home) as info, trio.open_nursery() as nursery:
        await ScriptedApp(info.port, info.token).start(nursery)
        http = [f"http://127.0.0.1:{info.http_port}/mcp", "--transport", "http",
                "--header", f"Authorization: Bearer {info.token}"]

        listed = await run_cli(*http, "--method", "tools/list")
        assert "Demo__echo" in {tool["name"] for tool in listed["tools"]}

        called = await run_cli(*http, "--method", "tools/call", "--tool-name", "Demo__echo",
                               "--tool-arg", "text=hello")
        assert called.get("isError") in (None, False)
        assert called["structuredContent"] == {"echo": {"text": "hello"}}

        # The Inspector exits 5 when a tool returns isError, and still prints the result.
        failed = await run_cli(*http, "--method", "tools/call", "--tool-name", "Demo__fail", exit_code=5)
        assert failed["isError"] is True and "disk is full" in failed["content"][0]["text"]

        stdio = [sys.executable, "-m", "broker", "stdio", "--home", str(home), "--no-start"]
        over_stdio = await run_cli(*stdio, "--method", "tools/call", "--tool-name", "Demo__text")
        assert over_stdio["content"][0]["text"] == "just text"
        nursery.cancel_scope.cancel()
