from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from broker.config.settings import Settings
from broker.daemon.run import DaemonInfo, run_daemon
from leftovers import find_leftovers, kill_leftovers
from rawapp import RawApp

#: How long processes still exiting at the session's end (a daemon that got its SIGTERM during
#: the last test's teardown) get before they count as left behind.
_LEFTOVER_GRACE_SECONDS = 10.0


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when tests left a process behind: a daemon, an app, a nats-server, a Deno
    sandbox, a relay... (``leftovers``: children of this pytest process, or processes naming
    this run's temporary root). Runs after every fixture's teardown; the leftovers are
    reported, then killed so they do not outlive the run either."""
    factory = getattr(session.config, "_tmp_path_factory", None)
    # This run's temporary root if a test made one (asking for it otherwise would make one).
    root = getattr(factory, "_basetemp", None)
    leftovers = find_leftovers(os.getpid(), root)
    deadline = time.monotonic() + _LEFTOVER_GRACE_SECONDS
    while leftovers and time.monotonic() < deadline:  # polled: mostly not our children
        time.sleep(0.1)
        leftovers = find_leftovers(os.getpid(), root)
    if not leftovers:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    text = "tests left processes running (stop every process a test starts):\n" + "\n".join(
        f"  {leftover}" for leftover in leftovers)
    if reporter is not None:
        reporter.write_sep("=", "leftover processes", red=True)
        reporter.write_line(text)
    else:
        print(text, file=sys.stderr)
    kill_leftovers(leftovers)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED



@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[DaemonInfo]:
    """A real daemon in this test's trio loop, on free ports, with its own home."""
    shutdown = trio.Event()
    async with trio.open_nursery() as nursery:
        info = await nursery.start(
            lambda task_status: run_daemon(
                Settings(home=tmp_path / "home", port=0, http_port=None), shutdown=shutdown, task_status=task_status
            )
        )
        yield info
        await RawApp.close_all()
        shutdown.set()


XVFB = shutil.which("Xvfb")


@pytest.fixture
async def display() -> AsyncIterator[str]:
    """A private Xvfb display; its number comes back through -displayfd (no guessing)."""
    if XVFB is None:
        pytest.fail("Xvfb is not installed: run `apt-get install -y xvfb` (.ci/run does)")
    read_end, write_end = os.pipe()
    process = await trio.lowlevel.open_process(
        [XVFB, "-displayfd", str(write_end), "-screen", "0", "1024x768x24", "-nolisten", "tcp"],
        pass_fds=(write_end,), stderr=subprocess.DEVNULL,
    )
    os.close(write_end)
    try:
        with trio.fail_after(20):
            number = await trio.to_thread.run_sync(lambda: os.read(read_end, 64))
        yield f":{number.decode().strip()}"
    finally:
        os.close(read_end)
        process.terminate()
        await process.wait()
