"""What the tests of the real-program integrations (Blender, FreeCAD, LibreOffice) share: the
world a program runs in (a home with ports of its own, a private Xvfb display, the add-on
installed with ``toolbridge integrate``), the agent over ``toolbridge stdio``, waiting for a
program's tool, and a call's JSON answer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import trio
from mcp import Client, StdioServerParameters

from broker.cli.integrate_blender import program_env
from mcp_testkit import relay_command, relay_env

ROOT = Path(__file__).resolve().parent.parent
XVFB = shutil.which("Xvfb")


def toolbridge(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker", *args], capture_output=True, text=True, timeout=300,
                          env=env, cwd=ROOT)


class ProgramWorld:
    """The world of one program's tests: a home whose daemon uses ports of its own, the
    program's private user folders (in ``env``), a private Xvfb display and the program's
    process (``process``, started by the subclass), whose output goes to ``log``."""

    def __init__(self, base: Path, program: str, env: dict[str, str]) -> None:
        self.base = base
        self.program = program
        self.home = base / "home"
        self.home.mkdir()
        (self.home / "config.toml").write_text("port = 0\nhttp_port = 0\n")  # never the user's ports
        # The program's temporary files (Blender's autosave every two minutes, FreeCAD's start
        # page thumbnails, the office's pipes) stay in the test's folder, not the machine's /tmp.
        self.tmp = base / "tmp"
        self.tmp.mkdir()
        temp = {name: str(self.tmp) for name in ("TMPDIR", "TMP", "TEMP")}
        self.env = {**program_env(), "TOOLBRIDGE_HOME": str(self.home), **temp, **env}
        self.display = ""
        self.display_pipe = -1
        self.xvfb: subprocess.Popen[bytes] | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.log = base / f"{program}.log"

    def start_display(self) -> None:
        read_end, write_end = os.pipe()
        self.xvfb = subprocess.Popen([XVFB or "Xvfb", "-displayfd", str(write_end), "-screen", "0", "1280x800x24",
                                      "-nolisten", "tcp", "-noreset"],
                                     pass_fds=(write_end,), stderr=subprocess.DEVNULL)
        os.close(write_end)
        # Kept open until Xvfb ends: a write to a closed pipe would kill it with SIGPIPE.
        self.display_pipe = read_end
        self.display = ":" + os.read(read_end, 64).decode().strip()

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.xvfb is not None:
            self.xvfb.terminate()  # lets it remove its lock file and socket
            self.xvfb.wait()
            os.close(self.display_pipe)
        toolbridge("stop", "--home", str(self.home), env=self.env)


@contextmanager
def integrated(world: ProgramWorld, listed: str) -> Iterator[None]:
    """``toolbridge integrate <program>`` (checked: ``listed`` is in ``integrate --list``), the
    daemon (re)started and the display up; the world closed at the end, whatever happened."""
    try:
        installed = toolbridge("integrate", world.program, env=world.env)
        assert installed.returncode == 0, installed.stderr
        shown = toolbridge("integrate", "--list", env=world.env)
        assert listed in shown.stdout, shown
        started = toolbridge("restart", "--home", str(world.home), env=world.env)
        assert started.returncode == 0, started.stderr
        world.start_display()
        yield
    finally:
        world.close()


@asynccontextmanager
async def agent(home: Path) -> AsyncIterator[Client]:
    """The MCP SDK over `toolbridge stdio` (which starts the daemon when there is none)."""
    command = relay_command(home)
    params = StdioServerParameters(command=command[0], args=command[1:], env=relay_env(TOOLBRIDGE_HOME=str(home)))
    async with Client(params) as client:
        yield client


def still_running(program: str, process: subprocess.Popen[bytes] | None) -> Callable[[], None]:
    """A check for :func:`wait_for_tool`: fails once ``process`` has exited."""
    def check() -> None:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"{program} exited with status {process.returncode}; see its log")
    return check


async def wait_for_tool(client: Client, name: str, *, present: bool = True,
                        alive: Callable[[], None] | None = None) -> dict[str, Any]:
    """Polled: the program is another process; the agent sees it (un)register only by listing.
    ``alive`` runs before each look (it fails the wait when the program has ended)."""
    with trio.fail_after(120):
        while True:
            if alive is not None:
                alive()
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            if (name in tools) == present:
                return tools
            await trio.sleep(0.2)


@asynccontextmanager
async def call_cancelled_on_leaving(client: Client, tool: str, arguments: dict[str, Any], *,
                                    progress_at_least: float = 0) -> AsyncIterator[None]:
    """Call ``tool`` in the background; enter once it has reported progress of at least
    ``progress_at_least``, and cancel the call on leaving (the agent's cancel, as the SDK sends
    it). A call that ends by itself instead fails the test."""
    reported = trio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if progress >= progress_at_least:
            reported.set()

    async with trio.open_nursery() as nursery:
        scope = trio.CancelScope()

        async def run() -> None:
            with scope:
                await client.call_tool(tool, arguments, progress_callback=on_progress)
                raise AssertionError(f"{tool} should have been cancelled")  # pragma: no cover

        nursery.start_soon(run)
        await reported.wait()
        yield
        scope.cancel()


def data(result: Any) -> Any:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)
