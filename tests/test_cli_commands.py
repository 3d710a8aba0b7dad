"""`toolbridge status`, `tools`, `call` and `token` as a user runs them: real processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
import trio

from app_client.wire import ToolSpec
from broker.daemon.run import DaemonInfo
from broker.cli.client_commands import parse_arguments
from mcp_testkit import ScriptedApp, png_bytes, running_daemon

TOOLBRIDGE = [sys.executable, "-m", "broker"]


async def run(*args: str) -> subprocess.CompletedProcess[str]:
    result = await trio.run_process([*TOOLBRIDGE, *args], capture_stdout=True, capture_stderr=True, check=False)
    return subprocess.CompletedProcess(result.args, result.returncode, result.stdout.decode(), result.stderr.decode())


def home(info: DaemonInfo) -> str:
    return str(info.core.settings.home)


async def test_status_when_the_daemon_is_down(tmp_path: Path) -> None:
    result = await run("status", "--home", str(tmp_path))
    assert result.returncode == 4
    assert result.stderr.count("\n") == 1 and "toolbridge serve" in result.stderr


async def test_status_tools_and_call(tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "home") as info, trio.open_nursery() as nursery:
        app = await ScriptedApp(info.port, info.token).start(nursery)
        status = await run("status", "--home", home(info))
        assert status.returncode == 0, status.stderr
        assert f"apps on 127.0.0.1:{info.port}" in status.stdout
        assert "Demo" in status.stdout and "connected" in status.stdout
        as_json = json.loads((await run("status", "--home", home(info), "--json")).stdout)
        assert as_json["apps"][0]["app"] == "Demo" and as_json["tools"] == len(app.tools)
        assert as_json["eventLoop"]["watching"] is True and as_json["eventLoop"]["stallsOver100Ms"] >= 0
        assert "event loop: longest stall" in status.stdout
        # Issue 30 item 9: the apps first (after the one line that says it runs), the event loop last.
        lines = status.stdout.splitlines()
        assert lines[1].startswith("1 app instance(s)") and lines[2].lstrip().startswith("Demo ")
        assert lines[-1].startswith("event loop: ")
        instance = as_json["apps"][0]["instance"]
        assert f"instance {instance[:8]}:" in lines[2] and (len(instance) <= 12 or instance not in status.stdout)

        tools = await run("tools", "--home", home(info))
        assert "Demo__echo" in tools.stdout
        with_schema = await run("tools", "--home", home(info), "--schema")
        assert '"type": "object"' in with_schema.stdout
        listed = json.loads((await run("tools", "--home", home(info), "--json")).stdout)
        assert {t["name"] for t in listed} >= {"Demo__echo"}

        ok = await run("call", "Demo__echo", "--home", home(info), "--arg", "text=hello", "--arg", "n=3")
        assert ok.returncode == 0, ok.stderr
        assert json.loads(ok.stdout) == {"echo": {"text": "hello", "n": 3}}

        error = await run("call", "Demo__fail", "--home", home(info))
        assert error.returncode == 1 and error.stdout.strip()

        missing = await run("call", "Demo__nope", "--home", home(info))
        assert missing.returncode == 3 and "unknown tool" in missing.stderr

        bad = await run("call", "Demo__echo", "--home", home(info), "--json", "[1]")
        assert bad.returncode == 2 and "JSON object" in bad.stderr

        image = await run("call", "Demo__image", "--home", home(info), "--save-dir", str(tmp_path / "shots"))
        assert image.returncode == 0, image.stderr
        saved = list((tmp_path / "shots").glob("*.png"))
        assert len(saved) == 1 and saved[0].read_bytes() == png_bytes()
        assert str(saved[0]) in image.stdout

        progress = await run("call", "Demo__progress", "--home", home(info))
        assert progress.returncode == 0 and progress.stdout.strip() == "done"
        assert "1/2 step 1" in progress.stderr and "2/2 step 2" in progress.stderr  # off a TTY: a line each
        nursery.cancel_scope.cancel()


async def test_token_print_and_rotate(tmp_path: Path) -> None:
    missing = await run("token", "--home", str(tmp_path))
    assert missing.returncode == 1 and "toolbridge serve" in missing.stderr
    rotated = await run("token", "--home", str(tmp_path), "--rotate")
    assert rotated.returncode == 0 and "restart the daemon" in rotated.stderr
    printed = await run("token", "--home", str(tmp_path))
    assert printed.stdout.strip() == rotated.stdout.strip() == (tmp_path / "token").read_text().strip()


def test_argument_parsing() -> None:
    assert parse_arguments(["x=1", "name=Ann", "flags=[1,2]", "raw=not json"], '{"y": true}') == {
        "y": True, "x": 1, "name": "Ann", "flags": [1, 2], "raw": "not json"}


async def test_tools_shows_the_typical_requests_the_search_reads(tmp_path: Path) -> None:
    receive = ToolSpec("receive_shipment", "Record an inbound purchase order",
                       example_requests=["my pallets came in, log them", "we just unloaded the lorry"])
    async with running_daemon(tmp_path / "home") as info, trio.open_nursery() as nursery:
        app = await ScriptedApp(info.port, info.token, "Depot", tools=[receive]).start(nursery)
        listed = json.loads((await run("tools", "--home", home(info), "--json")).stdout)
        assert listed[0]["exampleRequests"] == ["my pallets came in, log them", "we just unloaded the lorry"]
        shown = await run("tools", "--home", home(info), "--schema")
        assert "typical requests: my pallets came in, log them; we just unloaded the lorry" in shown.stdout
        assert "typical requests" not in (await run("tools", "--home", home(info))).stdout
        await app.close()
