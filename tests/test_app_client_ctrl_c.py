"""Issue 30 item 11: Ctrl-C in a program on app_client ends it cleanly, with a goodbye.

Three shapes of program, each a real process beside a real daemon, interrupted with SIGINT as
a terminal's Ctrl-C would: ``trio.run(app.run)`` (the README's pattern), a plain host program
that runs the app in a thread (``start_in_thread``) and quits on Ctrl-C without stopping it,
and the Tk example. Each must exit without a traceback, and its app must say goodbye: the
daemon then drops the instance at once, where a vanished app keeps its names through the
reconnect grace period (set long here, so the difference cannot be missed).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from mcp_testkit import end_process, running_daemon

pytestmark = pytest.mark.skipif(os.name != "posix", reason="sends SIGINT (a console Ctrl-C event on Windows)")

ROOT = Path(__file__).resolve().parent.parent

MAIN_TASK = """
import trio
from app_client import App
app = App("CtrlC")
@app.tool
def echo(text: str) -> str:
    "Echo the text."
    return text
trio.run(app.run)
print("returned")
"""

THREADED = """
import time
from app_client import App, ConnectionState
app = App("CtrlC")
@app.tool
def echo(text: str) -> str:
    "Echo the text."
    return text
app.start_in_thread()
try:
    while True:
        time.sleep(0.05)
except KeyboardInterrupt:
    print("host quits")
"""


async def interrupted(argv: list[str], home: Path, daemon_registry: object, *, env: dict[str, str] | None = None,
                      ) -> subprocess.CompletedProcess[str]:
    """Start ``argv``, wait for its app to register, send SIGINT, and return how it ended."""
    environment = {**os.environ, "TOOLBRIDGE_HOME": str(home), **(env or {})}
    process = await trio.lowlevel.open_process(argv, env=environment, stdout=subprocess.PIPE,
                                               stderr=subprocess.PIPE, cwd=ROOT)
    try:
        registry = daemon_registry
        with trio.fail_after(30):
            while not registry.instances():  # type: ignore[attr-defined]
                await trio.sleep(0.05)  # another process registers: no event crosses to us
        process.send_signal(signal.SIGINT)
        assert process.stdout is not None and process.stderr is not None
        with trio.fail_after(20):
            out = await _read_all(process.stdout)
            err = await _read_all(process.stderr)
            code = await process.wait()
        return subprocess.CompletedProcess(argv, code, out, err)
    finally:
        await end_process(process)


async def _read_all(stream: trio.abc.ReceiveStream) -> str:
    chunks = []
    while chunk := await stream.receive_some(65536):
        chunks.append(chunk)
    return b"".join(chunks).decode()


async def gone_at_once(registry: object) -> None:
    # With goodbye the instance is dropped now; without it, it would stay for the 60 s grace.
    with trio.fail_after(10):
        while registry.instances():  # type: ignore[attr-defined]
            await trio.sleep(0.05)


@pytest.mark.parametrize("program", [MAIN_TASK, THREADED], ids=["trio.run(app.run)", "start_in_thread"])
async def test_ctrl_c_ends_the_program_cleanly_with_a_goodbye(tmp_path: Path, program: str) -> None:
    async with running_daemon(tmp_path / "home", reconnect_grace=60.0) as info:
        result = await interrupted([sys.executable, "-c", program], info.core.settings.home, info.core.registry)
        assert "Traceback" not in result.stderr, result.stderr
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip().splitlines()[-1] in ("returned", "host quits")  # (app_client may log there)
        await gone_at_once(info.core.registry)


@pytest.mark.skipif(sys.platform != "linux", reason="the Tk example runs on a virtual X display (Linux CI)")
async def test_ctrl_c_in_the_tk_example(tmp_path: Path, display: str) -> None:
    async with running_daemon(tmp_path / "home", reconnect_grace=60.0) as info:
        argv = [sys.executable, str(ROOT / "examples" / "notes_app.py")]
        result = await interrupted(argv, info.core.settings.home, info.core.registry, env={"DISPLAY": display})
        assert "Traceback" not in result.stderr, result.stderr
        assert result.returncode == 0, result.stderr
        await gone_at_once(info.core.registry)
