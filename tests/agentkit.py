"""What the tests of apps in other languages (TypeScript, C#) share when an agent drives them:
the app as a process with its output read as it comes, and the conformance fixture's tool
calls with their expected answers (progress, image, structured result, app error, cancellation)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio
from mcp import Client
from mcp import types as mcp_types

from mcp_testkit import alive

#: The fixtures' 1x1 PNG.
PNG_1X1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="


class Output:
    """A process's output stream, read as it comes, searchable for a marker."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self.text = ""

    async def wait_for(self, marker: str, count: int = 1, timeout: float = 30) -> None:
        with trio.fail_after(timeout):
            while self.text.count(marker) < count:
                chunk = await self._stream.receive_some(65536)
                if not chunk:
                    raise AssertionError(f"the stream ended before {marker!r} x{count}:\n{self.text}")
                self.text += chunk.decode("utf-8", "replace")


@asynccontextmanager
async def app_process(argv: list[str], env: dict[str, str]) -> AsyncIterator[tuple[trio.Process, Output, Output]]:
    """The app as a process of its own: (the process, its stdout, its stderr). A test that
    checks how the app ends ends it itself; one that fails leaves it to be killed here."""
    # stdin: a pipe held open, as the conformance runner gives it, so the fixture apps (which quit
    # when it closes) end with this test run even if it is killed outright
    app = await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                           env=env)
    assert app.stdin is not None and app.stdout is not None and app.stderr is not None
    stderr = Output(app.stderr)
    try:
        yield app, Output(app.stdout), stderr
    except Exception as exc:
        # A test that fails because the app died says why: its exit status and last stderr lines
        # (read for at most 2 s: an app still running keeps its stderr open).
        with trio.move_on_after(2) as reading:
            reading.shield = True
            with contextlib.suppress(Exception):
                await stderr.wait_for("\0never\0", timeout=2)
        exc.add_note(f"the app's exit status: {app.returncode}; its stderr ends:\n{stderr.text[-4000:]}")
        raise
    finally:
        if app.returncode is None:
            app.kill()
            await app.wait()
        await app.stdin.aclose()


async def call_the_fixture_tools(agent: Client, app_stderr: Output) -> None:
    """Progress, an image, a structured result, an app error and a cancelled call of the
    conformance fixture app (``Conformance``), each checked against what the fixture promises."""
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    done = await agent.call_tool("Conformance__progress", {"steps": 3}, progress_callback=on_progress)
    assert done.content == [mcp_types.TextContent(type="text", text="done")]
    assert seen == [(1, 3, "step 1 of 3"), (2, 3, "step 2 of 3"), (3, 3, "step 3 of 3")]

    picture = await agent.call_tool("Conformance__image", {})
    assert isinstance(picture.content[0], mcp_types.TextContent)
    assert picture.content[0].text == "1x1 pixel"
    assert isinstance(picture.content[1], mcp_types.ImageContent)
    assert (picture.content[1].data, picture.content[1].mime_type) == (PNG_1X1, "image/png")

    summed = await agent.call_tool("Conformance__structured", {"a": 2, "b": 40})
    assert summed.structured_content == {"sum": 42}

    failed = await agent.call_tool("Conformance__fail", {"message": "the disk is full"})
    assert failed.is_error
    assert isinstance(failed.content[0], mcp_types.TextContent)
    assert "the disk is full" in failed.content[0].text

    # Cancel: the SDK sends notifications/cancelled when the call's scope is cancelled; the
    # app's handler stops and it sends nothing for that call.
    with trio.move_on_after(1):
        await agent.call_tool("Conformance__slow", {"seconds": 30})
    await app_stderr.wait_for("call cancelled by the daemon")
    for text in ("after", "the cancel"):  # two round trips: a late answer would be refused by now
        assert (await agent.call_tool("Conformance__echo", {"text": text})).content[0].text == text  # type: ignore[union-attr]
    assert "unknown_correlation_id" not in app_stderr.text


def runner_with_app(tmp_path: Path, app_code: str, env: dict[str, str] | None = None, *,
                    capture: bool = False) -> tuple[subprocess.Popen[str], int]:
    """A conformance runner (``--only echo``) whose app is Python running ``app_code`` after it
    wrote its pid: (the runner, the app's pid), once the app runs. ``capture``: the runner's
    stdout and stderr are pipes (text), else discarded."""
    pid_file = tmp_path / "pid"
    script = tmp_path / "app.py"
    script.write_text(f"import os, pathlib\npathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()))\n" + app_code,
                      encoding="utf-8")
    output = subprocess.PIPE if capture else subprocess.DEVNULL
    kit = subprocess.Popen(
        [sys.executable, "-m", "broker", "conformance", "app", "--only", "echo", "--", sys.executable, str(script)],
        stdout=output, stderr=output, text=True, cwd=Path(__file__).resolve().parent.parent, env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text()):  # the app is running
            assert time.monotonic() < deadline and kit.poll() is None, "the app never started"
            time.sleep(0.05)
    except BaseException:
        kit.kill()
        raise
    return kit, int(pid_file.read_text())


def a_killed_runner_leaves_no_app(tmp_path: Path, fixture: list[str], env: dict[str, str]) -> None:
    """A conformance runner killed with SIGKILL cannot stop its app; the fixture app ``fixture``
    must notice its stdin (the runner's pipe) close and quit (the kit's fixture contract). The
    app is pointed at a port where nothing listens, so it is still retrying when the runner dies."""
    # the fixture app itself (exec keeps the pid and stdin), on a dead port
    kit, app = runner_with_app(tmp_path, f"os.environ['TOOLBRIDGE_PORT'] = '9'\nos.execvp({fixture[0]!r}, {fixture!r})\n",
                               env)
    try:
        time.sleep(2)  # past the app's start-up: retrying the port
        assert alive(app), "the app ended before its runner was killed"
        kit.kill()
        kit.wait(timeout=30)
        deadline = time.monotonic() + 30
        while alive(app):
            assert time.monotonic() < deadline, "the app outlived its runner"
            time.sleep(0.05)
    finally:
        kit.kill()
        if alive(app):
            os.kill(app, signal.SIGKILL)
