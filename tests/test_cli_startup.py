"""Issue 30 items 4 and 5: the CLI starts without the daemon and forgives like a good CLI.

Client commands (``status``, ``call``, ``tools``, ``logs``, ``stop``...) are clients of a running
daemon; importing the daemon's packages made each one take a second. They run here in a fresh
interpreter (a subprocess, so nothing the test process imported counts) and report which
modules they loaded. How fast they start is measured in ``bench/cli_startup.py``, not here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from broker.cli import build_parser
from broker.cli._commands import COMMANDS

#: Packages that only the daemon needs: a client command must not import any of them.
DAEMON_PACKAGES = ("broker.daemon", "broker.mcp", "broker.federation", "broker.discovery", "broker.codemode",
                   "broker.core.router", "broker.core.registry")

PROBE = """
import json, sys
from broker.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def run_cli(*args: str, home: Path) -> tuple[int, list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLBRIDGE_")}
    result = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=False,
                            env={**env, "TOOLBRIDGE_HOME": str(home)}, stdin=subprocess.DEVNULL, timeout=60)
    report = json.loads(result.stderr.strip().splitlines()[-1])
    return report["code"], report["modules"]


def daemon_modules(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in DAEMON_PACKAGES)]


@pytest.mark.parametrize("args", [
    ["-V"], ["--help"], ["status"], ["status", "--json"], ["tools"], ["call", "Notes__type_text", "--arg", "a=1"],
    ["logs"], ["stop"], ["token"], ["agent-config", "cursor"], ["call", "--help"],
])
def test_a_client_command_does_not_import_the_daemon(tmp_path: Path, args: list[str]) -> None:
    code, modules = run_cli(*args, home=tmp_path)
    assert daemon_modules(modules) == [], f"`toolbridge {' '.join(args)}` imported the daemon"
    assert code in (0, 1, 2, 4)  # ran (no daemon here: 4 for the client commands)


def test_version_and_help_import_no_command_module(tmp_path: Path) -> None:
    for args in (["-V"], ["--help"]):
        _, modules = run_cli(*args, home=tmp_path)
        assert "trio" not in modules and "app_client" not in modules
        loaded = {row.module for row in COMMANDS if f"broker.cli.{row.module}" in modules}
        assert loaded == set(), f"`toolbridge {args[0]}` imported {loaded}"


def test_serve_is_the_command_that_imports_the_daemon(tmp_path: Path) -> None:
    # `serve --help` parses serve's options only; the daemon itself is imported when it runs.
    code, modules = run_cli("serve", "--help", home=tmp_path)
    assert code == 0 and daemon_modules(modules) == []


def test_the_table_names_each_command_its_module_adds() -> None:
    parser = build_parser()
    sub = parser._subparsers._group_actions[0]  # type: ignore[union-attr]
    assert list(sub.choices) == [row.name for row in COMMANDS]
    for row in COMMANDS:  # only that command's module: the same command, with its options
        alone = build_parser(row.name)._subparsers._group_actions[0]  # type: ignore[union-attr]
        assert list(alone.choices) == [r.name for r in COMMANDS]
        assert alone.choices[row.name].format_usage() == sub.choices[row.name].format_usage()


def toolbridge(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker", *args], capture_output=True, text=True, check=False,
                          stdin=subprocess.DEVNULL, timeout=60)


def test_a_mistyped_command_gets_did_you_mean() -> None:
    result = toolbridge("stauts")
    assert result.returncode == 2
    assert "there is no command 'stauts'; did you mean `toolbridge status`?" in result.stderr
    far = toolbridge("frobnicate")
    assert far.returncode == 2 and "`toolbridge --help` lists the commands" in far.stderr


def test_a_bad_option_prints_that_commands_usage() -> None:
    result = toolbridge("status", "--bogus")
    assert result.returncode == 2
    assert result.stderr.startswith("usage: toolbridge status ")
    assert "toolbridge status: error: unrecognized arguments: --bogus" in result.stderr


def test_abbreviated_options_are_refused() -> None:
    # --args would have been taken as --args-json (a prefix), with "field=x" as a JSON object.
    result = toolbridge("call", "Notes__type_text", "--args", '{"text": "x"}')
    assert result.returncode == 2
    assert "unrecognized arguments: --args" in result.stderr
    assert toolbridge("status", "--js").returncode == 2


def test_output_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    # The reader is gone before the command writes (as `| head` gone after its lines): no
    # BrokenPipeError traceback, the shell's status for SIGPIPE.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run([sys.executable, "-m", "broker", "nats-permissions", "desk"], stdout=write_end,
                                stderr=subprocess.PIPE, text=True, check=False, timeout=60)
    finally:
        os.close(write_end)
    assert result.stderr == ""
    assert result.returncode == 141
