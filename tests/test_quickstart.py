"""Issue 19 items 1 and 2: the README's quick start, literally, on a fresh clone with an empty HOME.

``git clone`` of this repository (its committed HEAD) into a temporary folder, an empty HOME
and no ``TOOLBRIDGE_*`` variables; then the quick start's commands as written, from the clone:
``python3 dev.py serve`` (on free ports here: other daemons may hold the defaults; the README
says arguments are passed on), whose first run must print the exact path of the ``toolbridge``
command and the PATH line before the daemon's log; ``.venv/bin/toolbridge status``; the PATH
line itself in a shell, then plain ``toolbridge status``; and ``.venv/bin/toolbridge stop``, after which
``dev.py serve`` exits cleanly. Needs the package index (dev.py installs from it); ~30-60 s.

Issue 30 items 1 and 2: README.md is the front page now; its quick start (which the docs'
Getting started page includes) names these commands as written, and step 3's command for a
machine without a display (``xvfb-run -a .venv/bin/python examples/notes_app.py``) runs the Tk
app on a virtual display, where an agent calls its tools; without a display the app says so.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from mcp_testkit import end_process

ROOT = Path(__file__).resolve().parent.parent
#: The README's `python3`: the interpreter under our venv (a shim on PATH may need the real HOME).
PYTHON3 = getattr(sys, "_base_executable", sys.executable)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TOOLBRIDGE_", "XDG_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # The PATH of a fresh shell: no venv of ours on it.
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    return {**env, "HOME": str(home), "USERPROFILE": str(home)}


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix" or shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="needs git, a git checkout, and a POSIX shell for the PATH line")
async def test_the_quick_start_works_as_written_on_a_fresh_clone(tmp_path: Path) -> None:
    clone, home = tmp_path / "toolbridge", tmp_path / "home"
    home.mkdir()
    env = _env(home)
    await trio.run_process(["git", "clone", "--quiet", str(ROOT), str(clone)], env=env)
    with open(tmp_path / "serve.err", "wb") as err:
        serve = await trio.lowlevel.open_process(
            [PYTHON3, "dev.py", "serve", "--port", "0", "--http-port", "0"], cwd=clone, env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    try:
        with trio.fail_after(300):  # the first run creates .venv and installs from the package index
            while b'"daemon_started"' not in (tmp_path / "serve.err").read_bytes():
                assert serve.poll() is None, (tmp_path / "serve.err").read_text()[-3000:]
                await trio.sleep(0.2)  # another process's output file: no event to wait on
        output = (tmp_path / "serve.err").read_text()
        command = clone / ".venv" / "bin" / "toolbridge"
        hint = output[:output.index('"daemon_started"')]
        # Issue 30 item 10: no setuptools warning block on the first run (pip's output shows on failure).
        assert "Warning" not in hint and "Please be careful" not in hint, hint
        assert f"\n    {command}\n" in hint, hint
        path_line = re.search(r'^    (export PATH=".*")$', hint, re.MULTILINE)
        assert path_line is not None and path_line.group(1) == f'export PATH="{command.parent}:$PATH"', hint

        status = await trio.run_process([".venv/bin/toolbridge", "status"], cwd=clone, env=env,
                                        capture_stdout=True, capture_stderr=True, check=False)
        assert status.returncode == 0, status.stderr.decode()
        assert "is running" in status.stdout.decode()
        on_path = await trio.run_process(["sh", "-c", f"{path_line.group(1)}; toolbridge status"],
                                         cwd=tmp_path, env=env, capture_stdout=True, capture_stderr=True, check=False)
        assert on_path.returncode == 0, on_path.stderr.decode()
        stop = await trio.run_process([".venv/bin/toolbridge", "stop"], cwd=clone, env=env,
                                      capture_stdout=True, capture_stderr=True, check=False)
        assert stop.returncode == 0, stop.stderr.decode()
        with trio.fail_after(20):
            assert await serve.wait() == 0
    finally:
        await end_process(serve)


# --- the README's quick start as the front page shows it (issue 30 items 1 and 2) ----------

README = (ROOT / "README.md").read_text()
#: Step 3 on a machine without a display, as the README writes it.
XVFB_COMMAND = "xvfb-run -a .venv/bin/python examples/notes_app.py"


def _quick_start() -> str:
    start, end = README.index("## Quick start"), README.index("<!-- --8<-- [end:quick-start] -->")
    return README[start:end]


def test_the_readme_quick_start_has_the_commands_these_tests_run() -> None:
    """The front page's five steps name the commands the tests here run, as they run them."""
    steps = _quick_start()
    for command in ("python3 dev.py serve", ".venv/bin/toolbridge status", ".venv/bin/toolbridge stop",
                    ".venv/bin/python examples/notes_app.py", XVFB_COMMAND,
                    ".venv/bin/toolbridge call Notes__type_text --arg field=title --arg text=Hello"):
        assert f"`{command}`" in steps, f"README's quick start no longer says `{command}`"
    assert [line[:3] for line in steps.splitlines() if line[:1].isdigit()] == ["1. ", "2. ", "3. ", "4. ", "5. "]
    assert "needs Tk" in steps and "display" in steps  # step 3 says what the Tk app needs


@pytest.mark.skipif(sys.platform != "linux", reason="Tk needs an X display on Linux only")
async def test_the_notes_app_without_a_display_says_to_use_xvfb_run(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    result = await trio.run_process([sys.executable, "examples/notes_app.py", "--home", str(tmp_path)],
                                    cwd=ROOT, env=env, capture_stdout=True, capture_stderr=True, check=False)
    error = result.stderr.decode()
    assert result.returncode == 1, error
    assert "Traceback" not in error, error
    assert f"xvfb-run -a {sys.executable} examples/notes_app.py" in error, error


@pytest.mark.skipif(sys.platform != "linux", reason="xvfb-run is Linux's (Debian's xvfb package)")
async def test_the_quick_start_step_3_without_a_display(tmp_path: Path) -> None:
    """Step 3's `xvfb-run` command, as written (our interpreter for `.venv/bin/python`, which is
    where this test runs from anyway), with no display: the app registers and takes a call."""
    if shutil.which("xvfb-run") is None:
        pytest.fail("xvfb-run is not installed: run `apt-get install -y xvfb` (python3 dev.py test does, as root)")
    from mcp import Client, StdioServerParameters

    from mcp_testkit import relay_command, relay_env, running_daemon

    home = tmp_path / "home"
    command = XVFB_COMMAND.replace(".venv/bin/python", sys.executable).split()
    env = {**{k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")},
           "TOOLBRIDGE_HOME": str(home)}
    async with running_daemon(home):
        # Its own session: xvfb-run's Xvfb and the app go with it when the group is ended.
        app = await trio.lowlevel.open_process(command, cwd=ROOT, env=env, start_new_session=True,
                                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        try:
            relay = relay_command(home, "--no-start")
            async with Client(StdioServerParameters(command=relay[0], args=relay[1:], env=relay_env())) as agent:
                with trio.fail_after(60):
                    # Polled: the app is another process; the agent sees it register only by listing.
                    while "Notes__type_text" not in {tool.name for tool in (await agent.list_tools()).tools}:
                        assert app.poll() is None, "the app exited"
                        await trio.sleep(0.1)
                typed = await agent.call_tool("Notes__type_text", {"field": "title", "text": "Hello"})
                assert not typed.is_error and typed.content[0].text == "Hello"
        finally:
            if app.returncode is None:
                os.killpg(app.pid, signal.SIGTERM)
            await end_process(app, terminate=False)
