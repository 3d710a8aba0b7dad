"""Issue 19 items 1 and 2: the README's quick start, literally, on a fresh clone with an empty HOME.

``git clone`` of this repository (its committed HEAD) into a temporary folder, an empty HOME
and no ``TOOLBRIDGE_*`` variables; then the quick start's commands as written, from the clone:
``python3 dev.py serve`` (on free ports here: other daemons may hold the defaults; the README
says arguments are passed on), whose first run must print the exact path of the ``toolbridge``
command and the PATH line before the daemon's log; ``.venv/bin/toolbridge status``; the PATH
line itself in a shell, then plain ``toolbridge status``; and ``.venv/bin/toolbridge stop``, after which
``dev.py serve`` exits cleanly. Needs the package index (dev.py installs from it); ~30-60 s.
"""

from __future__ import annotations

import os
import re
import shutil
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
