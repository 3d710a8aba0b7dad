"""Issue 19 item 15: toolbridge installed as a tool (what `pipx install .` / `uv tool install .` do).

Both build a wheel from the clone and install it, with its dependencies, into a fresh virtual
environment of its own; the ``toolbridge`` command is that environment's script. This test does
the same with PyPA's ``build`` (``python -m build``: the wheel and the sdist, both checked with
``twine check`` and for what they hold, issue 30 item 13), then ``pip install`` of the wheel into
a new venv (dependencies from the package index like pipx), and then uses only that environment: its
``toolbridge --version``, its ``toolbridge serve``, an app on its ``app_client`` and one
``toolbridge call`` through the daemon. It catches a package or data file missing from the
wheel and an entry point that does not start. It needs the package index (as ``dev.py`` does)
and takes ~30 s; it runs in CI with the rest of the suite (``-m "not slow"`` leaves it out).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest
import trio

from broker.version import VERSION
from mcp_testkit import end_process

ROOT = Path(__file__).resolve().parent.parent
BIN = "Scripts" if os.name == "nt" else "bin"

APP = """
import sys
import trio
from app_client import App, ConnectionState

app = App("Wheel", home=sys.argv[1],
          on_state_change=lambda state: print(state.value, flush=True))

@app.tool
def echo(text: str) -> str:
    \"\"\"Say it back.\"\"\"
    return "echo: " + text

trio.run(app.run)
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLBRIDGE_") and k != "PYTHONPATH"}
    return {**env, "TOOLBRIDGE_LOG_FORMAT": "json"}


async def _check(*argv: str | Path, cwd: Path | None = None) -> str:
    return await _check_any(*argv, cwd=cwd, codes=(0,))


async def _check_any(*argv: str | Path, cwd: Path | None = None, codes: tuple[int, ...] = (0, 1)) -> str:
    """stdout of ``argv``, which must exit with one of ``codes`` (doctor exits 1 with no daemon)."""
    result = await trio.run_process([str(a) for a in argv], capture_stdout=True, capture_stderr=True, check=False,
                                    env=_env(), cwd=cwd)
    assert result.returncode in codes, (argv, result.stdout.decode()[-2000:], result.stderr.decode()[-2000:])
    return result.stdout.decode()


def check_contents(wheel: Path, sdist: Path) -> None:
    """The wheel holds the two packages with the data files the docs promise, and nothing from
    the tests; the sdist builds the wheel and carries the documents the README links to."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    dist_info = f"toolbridge-{VERSION}.dist-info"
    assert {name.split("/")[0] for name in names} == {"broker", "app_client", dist_info}
    assert {"broker/py.typed", "app_client/py.typed", "broker/conformance/README.md",
            f"{dist_info}/licenses/LICENSE"} <= set(names)
    assert any(n.startswith("broker/mcp/static/") for n in names)  # the status page
    vectors = [n for n in names if n.startswith("broker/conformance/vectors/") and n.endswith(".json")]
    assert len(vectors) == len(list((ROOT / "broker" / "conformance" / "vectors").glob("*.json")))
    assert not [n for n in names if "__pycache__" in n or "conftest" in n or "/tests/" in n]
    with tarfile.open(sdist) as archive:
        members = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"LICENSE", "README.md", "protocol.md", "SECURITY.md", "pyproject.toml"} <= members
    assert not [m for m in members if m.startswith("tests/")]


@pytest.mark.slow
async def test_the_wheel_gives_a_working_toolbridge_command(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    with trio.fail_after(300):
        await _check(sys.executable, "-m", "build", "--outdir", wheels, ROOT)
        (wheel,) = wheels.glob("toolbridge-*.whl")
        (sdist,) = wheels.glob("toolbridge-*.tar.gz")
        await _check(sys.executable, "-m", "twine", "check", "--strict", wheel, sdist)
        check_contents(wheel, sdist)
        await trio.to_thread.run_sync(lambda: venv.EnvBuilder(with_pip=True).create(tmp_path / "tool"))
        python = tmp_path / "tool" / BIN / ("python.exe" if os.name == "nt" else "python")
        await _check(python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", wheel)
    toolbridge = tmp_path / "tool" / BIN / ("toolbridge.exe" if os.name == "nt" else "toolbridge")
    # Run from elsewhere: nothing may come from the clone (cwd on sys.path would shadow the wheel).
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    assert (await _check(toolbridge, "--version", cwd=outside)).strip() == f"toolbridge {VERSION}"
    located = await _check(python, "-c", "import broker, app_client; print(broker.__file__, app_client.__file__)",
                           cwd=outside)
    assert str(ROOT) not in located and str(tmp_path / "tool") in located
    # Issue 30 item 3: a missing extra names a command that works for this installation (a
    # plain venv: its own interpreter and the extra's requirements; toolbridge is on no index).
    hint = await _check(python, "-c", "from broker.extras import install_hint; print(install_hint('code'))",
                        cwd=outside)
    assert hint.strip() == f"{python} -m pip install 'deno>=2.1'"
    doctor = json.loads(await _check_any(toolbridge, "doctor", "--json", "--home", tmp_path / "no-home", cwd=outside))
    extras = {f["check"]: f["detail"] for f in doctor if f["check"].startswith("extra ")}
    assert extras["extra code"].endswith(f"to add it: {python} -m pip install 'deno>=2.1'")
    # the semantic extra's packages, then its model's files (a package dependency cannot bring them)
    assert extras["extra semantic"].endswith(
        f"to add it: {python} -m pip install 'numpy>=1.24' 'tokenizers>=0.15' 'threadpoolctl>=3.1', then `toolbridge models fetch`")

    home = tmp_path / "home"
    (outside / "app.py").write_text(APP)
    processes: list[trio.Process] = []
    try:
        processes.append(await trio.lowlevel.open_process(
            [str(toolbridge), "serve", "--home", str(home), "--port", "0", "--http-port", "0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=outside, env=_env()))
        app = await trio.lowlevel.open_process([str(python), "app.py", str(home)], stdout=subprocess.PIPE,
                                               stderr=subprocess.DEVNULL, cwd=outside, env=_env())
        processes.append(app)
        assert app.stdout is not None
        seen = b""
        with trio.fail_after(30):  # the app retries until the daemon is up, then registers
            while b"connected\n" not in seen.replace(b"reconnecting", b""):
                chunk = await app.stdout.receive_some(4096)
                assert chunk, "the app exited"
                seen += chunk
        answer = await _check(toolbridge, "call", "Wheel__echo", "--home", home, "--arg", "text=hi", cwd=outside)
        assert answer.strip() == "echo: hi"
    finally:
        for process in reversed(processes):
            await end_process(process)
