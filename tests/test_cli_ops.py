"""Issue 19, the operator's first ten minutes: stop/restart, status, stdio's flags and log line,
help, doctor, agent-config and the listen/connect variables. Real processes, as a user runs them."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from broker.cli import build_parser
from broker.cli.help_text import HELP
from broker.config import home as home_files
from broker.config.settings_file import env_deprecations, load_settings
from broker.version import VERSION
from mcp_testkit import ScriptedApp, end_process, relay_command, running_daemon, stop_background_daemon

TOOLBRIDGE = [sys.executable, "-m", "broker"]
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "ops-test", "version": "7"}}}


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without any TOOLBRIDGE_* variable of the machine running the tests."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLBRIDGE_")}
    return {**env, **extra}


async def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    result = await trio.run_process([*TOOLBRIDGE, *args], capture_stdout=True, capture_stderr=True, check=False,
                                    env=env if env is not None else clean_env(), cwd=cwd)
    return subprocess.CompletedProcess(result.args, result.returncode, result.stdout.decode(), result.stderr.decode())


async def wait_for_runtime(home: Path, *, other_than: int | None = None, timeout: float = 20) -> dict[str, Any]:
    """runtime.json of a daemon in another process (no event crosses processes: bounded polling)."""
    with trio.fail_after(timeout):
        while True:
            runtime = home_files.read_runtime(home)
            if runtime is not None and runtime.get("pid") != other_than:
                return runtime
            await trio.sleep(0.05)


@asynccontextmanager
async def serve_process(home: Path, *args: str, env: dict[str, str] | None = None) -> AsyncIterator[trio.Process]:
    """``toolbridge serve`` as a subprocess on free ports; killed at the end if still running."""
    with open(home.parent / "serve.log", "ab") as log:  # the child keeps its own copy of the descriptor
        process = await trio.lowlevel.open_process(
            [*TOOLBRIDGE, "serve", "--home", str(home), *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=log,
            env=env if env is not None else clean_env(TOOLBRIDGE_LISTEN_PORT="0", TOOLBRIDGE_LISTEN_HTTP_PORT="0"),
        )
    try:
        yield process
    finally:
        await end_process(process)


# --- item 10: stop, restart, status -------------------------------------------------------------


async def test_stop_then_restart_the_daemon_of_a_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    async with serve_process(home, "--log-level", "warning") as daemon:
        runtime = await wait_for_runtime(home)
        stopped = await run("stop", "--home", str(home))
        assert stopped.returncode == 0, stopped.stderr
        assert f"pid {runtime['pid']}" in stopped.stdout
        with trio.fail_after(10):
            assert await daemon.wait() == 0  # a clean exit, as on Ctrl-C
        assert home_files.read_runtime(home) is None
        again = await run("stop", "--home", str(home))
        assert again.returncode == 0 and "nothing to stop" in again.stderr
        # item 11: --log-level is applied (it was parsed and ignored): no info lines at warning.
        assert "daemon_started" not in (tmp_path / "serve.log").read_text()

    async with serve_process(home) as daemon:
        first = await wait_for_runtime(home)
        try:
            restarted = await run("restart", "--home", str(home))
            assert restarted.returncode == 0, restarted.stderr
            with trio.fail_after(10):
                await daemon.wait()
            second = await wait_for_runtime(home)
            assert second["pid"] != first["pid"]
            # The same ports, so agents' URLs and apps' ports stay valid.
            assert (second["port"], second["httpPort"]) == (first["port"], first["httpPort"])
            status = await run("status", "--home", str(home))
            assert status.returncode == 0 and f"pid {second['pid']}" in status.stdout
        finally:
            await stop_background_daemon(home)


async def test_the_daemon_log_has_a_line_per_call_and_per_app_and_none_per_cli_command(tmp_path: Path) -> None:
    # Issue 30 item 10: at the default level, `toolbridge call/status/tools` add nothing but the
    # call's own line (they were three session lines each), and every event name is snake_case.
    home = tmp_path / "home"
    home.mkdir()
    async with serve_process(home, "--log-format", "json") as daemon, trio.open_nursery() as nursery:
        runtime = await wait_for_runtime(home)
        token = (home / "token").read_text().strip()
        app = await ScriptedApp(runtime["port"], token).start(nursery)
        for _ in range(2):
            assert (await run("call", "Demo__echo", "--home", str(home), "--arg", "text=x")).returncode == 0
        assert (await run("status", "--home", str(home))).returncode == 0
        assert (await run("tools", "--home", str(home))).returncode == 0
        await app.close()
        assert (await run("stop", "--home", str(home))).returncode == 0
        with trio.fail_after(10):
            await daemon.wait()
        nursery.cancel_scope.cancel()
    events = [json.loads(line)["event"] for line in (tmp_path / "serve.log").read_text().splitlines()
              if line.startswith("{")]
    assert events.count("tool_executed") == 2
    assert {"app_registered", "app_disconnected"} <= set(events)
    assert not {"agent_connected", "mcp_initialized", "agent_disconnected"} & set(events), events
    assert [e for e in events if not e.replace("_", "").isalnum() or e != e.lower()] == []


async def test_stop_never_signals_the_pid_of_a_stale_runtime_file(tmp_path: Path) -> None:
    """A daemon killed hard leaves runtime.json and its pid in daemon.lock; that pid may belong
    to another program by now. `stop` removes the stale file and signals nobody."""
    home = tmp_path / "home"
    home_files.ensure_home(home)
    bystander = await trio.lowlevel.open_process([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (home / home_files.RUNTIME_FILE).write_text(json.dumps({"pid": bystander.pid, "host": "127.0.0.1", "port": 1}))
        (home / home_files.LOCK_FILE).write_text(f"{bystander.pid}\n")  # named, but nobody holds the lock
        (home / home_files.TOKEN_FILE).write_text("t\n")
        result = await run("stop", "--home", str(home))
        assert result.returncode == 0 and "nothing to stop" in result.stderr
        assert home_files.read_runtime(home) is None
        assert bystander.poll() is None  # still running: never signalled
    finally:
        bystander.kill()
        await bystander.wait()


async def test_a_scoped_token_cannot_stop_the_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from broker.cli.daemon_client import DaemonUnavailable, admin_request
    from broker.config import tokens

    home = tmp_path / "home"
    home_files.ensure_home(home)
    agent_token = tokens.issue(home, "agent-only", ["agent"])
    async with running_daemon(home) as info:
        with monkeypatch.context() as patched:
            patched.setenv("TOOLBRIDGE_TOKEN", agent_token)  # find_daemon: the variable before the token file
            with pytest.raises(DaemonUnavailable, match="wrong token"):
                await admin_request(home, "stop")
        assert not info.core.shutdown_started.is_set()
        assert (await admin_request(home, "status"))["pid"] == os.getpid()


async def test_status_shows_the_mcp_url_the_agents_and_each_app_label_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with running_daemon(home) as info, trio.open_nursery() as nursery:
        await ScriptedApp(info.port, info.token).start(nursery)
        relay = await trio.lowlevel.open_process(relay_command(home), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                 stderr=subprocess.PIPE, env=clean_env(TOOLBRIDGE_LOG_FORMAT="json"))
        assert relay.stdin is not None and relay.stdout is not None and relay.stderr is not None
        await relay.stdin.send_all(json.dumps(INIT).encode() + b"\n")
        assert b'"result"' in await relay.stdout.receive_some(65536)  # initialized: the session is named
        status = await run("status", "--home", str(home))
        assert status.returncode == 0, status.stderr
        assert f"MCP URL: http://127.0.0.1:{info.http_port}/mcp" in status.stdout
        assert "agents: 1 session(s) open" in status.stdout
        assert "ops-test 7 over stdio" in status.stdout
        app_lines = [line for line in status.stdout.splitlines() if "instance" in line and "tools" in line]
        assert len(app_lines) == 1 and app_lines[0].count("Demo") == 1, status.stdout
        as_json = json.loads((await run("status", "--home", str(home), "--json")).stdout)
        assert as_json["agents"][0]["client"] == "ops-test"
        # item 3: the relay said on stderr which home and which daemon it joined.
        await relay.stdin.aclose()
        with trio.fail_after(10):
            await relay.wait()
        log = [json.loads(line) for line in (await relay.stderr.receive_some(65536)).splitlines()]
        events = {entry["event"]: entry for entry in log}
        assert events["relay_home"]["home"] == str(home) and events["relay_home"]["home_from"] == "--home"
        assert events["daemon_joined"]["pid"] == os.getpid() and events["daemon_joined"]["port"] == info.port
        nursery.cancel_scope.cancel()


# --- item 4: stdio --port / --http-port -----------------------------------------------------------


async def _one_answer(home: Path, *flags: str) -> tuple[dict[str, Any], str]:
    process = await trio.lowlevel.open_process(
        relay_command(home, *flags), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=clean_env(TOOLBRIDGE_LOG_FORMAT="json"))
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    await process.stdin.send_all(json.dumps(INIT).encode() + b"\n")
    await process.stdin.aclose()
    out = b""
    with trio.fail_after(40):
        while not out.endswith(b"\n"):
            chunk = await process.stdout.receive_some(65536)
            assert chunk, "the relay closed stdout without answering"
            out += chunk
        await process.wait()
    return json.loads(out), (await process.stderr.receive_some(65536)).decode()


async def test_stdio_passes_its_port_flags_to_the_daemon_it_starts_and_stop_stops_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    try:
        answer, _ = await _one_answer(home, "--port", "0", "--http-port", "0")
        assert "result" in answer, answer
        runtime = home_files.read_runtime(home)
        assert runtime is not None and runtime["port"] != 47700 and runtime["httpPort"] not in (47701, None)
        stopped = await run("stop", "--home", str(home))  # the daemon a relay started, by its home alone
        assert stopped.returncode == 0, stopped.stderr
        assert home_files.read_runtime(home) is None
    finally:
        await stop_background_daemon(home)


async def test_a_taken_port_names_the_stdio_flag_that_fixes_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        try:
            answer, _ = await _one_answer(home, "--port", str(port), "--http-port", "0")
        finally:
            await stop_background_daemon(home)
    message = answer["error"]["message"]
    assert f"port {port}" in message and "already in use" in message
    assert "toolbridge stdio --port" in message


# --- item 14: where to listen vs where to connect ------------------------------------------------


async def test_listen_variables_for_serve_and_port_zero_does_not_break_clients(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # TOOLBRIDGE_PORT=0 in the shell (meant for the daemon, as it used to be) must not break the CLI.
    env = clean_env(TOOLBRIDGE_LISTEN_PORT="0", TOOLBRIDGE_LISTEN_HTTP_PORT="0", TOOLBRIDGE_PORT="0")
    async with serve_process(home, env=env):
        runtime = await wait_for_runtime(home)
        assert runtime["port"] != 47700 and runtime["httpPort"] != 47701
        status = await run("status", "--home", str(home), env=env)
        assert status.returncode == 0, status.stderr
        assert f"apps on 127.0.0.1:{runtime['port']}" in status.stdout


def test_the_old_listen_variable_still_works_for_serve_with_a_note(tmp_path: Path) -> None:
    settings = load_settings(None, tmp_path, {"TOOLBRIDGE_PORT": "4100", "TOOLBRIDGE_HTTP_PORT": "off"})
    assert settings.port == 4100 and settings.http_port is None
    notes = env_deprecations({"TOOLBRIDGE_PORT": "4100"})
    assert len(notes) == 1 and "TOOLBRIDGE_LISTEN_PORT" in notes[0]
    # The new name wins, and then the old one is the clients' alone: no note.
    both = {"TOOLBRIDGE_PORT": "4100", "TOOLBRIDGE_LISTEN_PORT": "0"}
    assert load_settings(None, tmp_path, both).port == 0 and env_deprecations(both) == []


# --- item 11: help -------------------------------------------------------------------------------


def test_every_command_has_a_description_and_an_example() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = {name for name, command in sub.choices.items()
               if not command.description or "example" not in (command.epilog or "")}
    assert missing == set(), f"add a row to broker/cli/help_text.py HELP for: {missing}"
    assert set(HELP) <= set(sub.choices)
    serve_help = sub.choices["serve"].format_help()
    assert "least important log lines" in serve_help


async def test_dash_capital_v_prints_the_version() -> None:
    result = await run("-V")
    assert result.returncode == 0 and result.stdout.strip() == f"toolbridge {VERSION}"


# --- item 13: doctor and agent-config ------------------------------------------------------------


async def test_doctor_with_no_daemon_and_a_readable_token_says_what_to_fix(tmp_path: Path) -> None:
    fake_home = tmp_path / "user"
    fake_home.mkdir()
    home = tmp_path / "tb"
    home_files.ensure_home(home)
    home_files.load_or_create_token(home)
    env = clean_env(HOME=str(fake_home), XDG_CONFIG_HOME=str(fake_home / ".config"))
    result = await run("doctor", "--home", str(home), env=env, cwd=fake_home)
    assert result.returncode == 0, result.stdout + result.stderr  # warnings only
    assert "no daemon is running" in result.stdout and "fix: start it" in result.stdout
    assert (home / "token").read_text().strip() not in result.stdout + result.stderr  # never printed
    if os.name == "posix":
        (home / "token").chmod(0o644)
        loose = await run("doctor", "--home", str(home), "--json", env=env, cwd=fake_home)
        assert loose.returncode == 1
        token = next(f for f in json.loads(loose.stdout) if f["check"] == "token")
        assert token["level"] == "fail" and "chmod 600" in token["fix"]


async def test_doctor_reaches_a_running_daemon_over_both_doors_and_reads_agent_configs(tmp_path: Path) -> None:
    fake_home = tmp_path / "user"
    (fake_home / ".cursor").mkdir(parents=True)
    other_home = tmp_path / "elsewhere"
    (fake_home / ".cursor" / "mcp.json").write_text(json.dumps({"mcpServers": {"toolbridge": {
        "command": sys.executable, "args": ["-m", "broker", "stdio", "--home", str(other_home)]}}}))
    env = clean_env(HOME=str(fake_home), XDG_CONFIG_HOME=str(fake_home / ".config"))
    async with running_daemon(tmp_path / "home") as info:
        result = await run("doctor", "--home", str(tmp_path / "home"), "--json", env=env, cwd=fake_home)
        assert result.returncode == 0, result.stdout + result.stderr
        found = {f["check"]: f for f in json.loads(result.stdout)}
        assert found["app door"]["level"] == "ok" and found["app port"]["level"] == "ok"
        assert found["http"]["level"] == "ok" and f":{info.http_port}/mcp" in found["http"]["detail"]
        assert found["agent cursor"]["level"] == "warn" and str(other_home) in found["agent cursor"]["detail"]
        assert found["agent claude-desktop"]["level"] == "ok"  # no file: nothing to say


async def test_agent_config_prints_the_entry_and_merges_it_without_clobbering(tmp_path: Path) -> None:
    fake_home = tmp_path / "user"
    fake_home.mkdir()
    env = clean_env(HOME=str(fake_home), XDG_CONFIG_HOME=str(fake_home / ".config"))
    home = tmp_path / "tb home"
    printed = await run("agent-config", "claude-desktop", "--home", str(home), env=env)
    assert printed.returncode == 0, printed.stderr
    entry = json.loads(printed.stdout)["mcpServers"]["toolbridge"]
    assert Path(entry["command"]).is_absolute() and Path(entry["command"]).exists()
    assert entry["args"][-3:] == ["stdio", "--home", str(home.absolute())]

    cursor = fake_home / ".cursor" / "mcp.json"
    cursor.parent.mkdir()
    original = {"theme": "dark", "mcpServers": {"other": {"command": "other-server", "args": ["--x"]}}}
    cursor.write_text(json.dumps(original))
    written = await run("agent-config", "cursor", "--home", str(home), "--write", env=env)
    assert written.returncode == 0, written.stderr
    merged = json.loads(cursor.read_text())
    assert merged["theme"] == "dark" and merged["mcpServers"]["other"] == original["mcpServers"]["other"]
    assert merged["mcpServers"]["toolbridge"] == entry
    assert json.loads(cursor.with_name("mcp.json.bak").read_text()) == original
    again = await run("agent-config", "cursor", "--home", str(home), "--write", env=env)
    assert "nothing to change" in again.stdout

    on_path = {**env, "PATH": str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")}
    code = await run("agent-config", "claude-code", "--home", str(home), "--write", env=on_path, cwd=fake_home)
    assert code.returncode == 0, code.stderr
    shared = json.loads((fake_home / ".mcp.json").read_text())["mcpServers"]["toolbridge"]
    assert shared == {**entry, "command": "toolbridge"}  # on PATH: the same command on every machine
    assert f"names {home.absolute()}, which exist(s) only on this machine" in code.stderr  # --home: a local path

    cursor.write_text("{not json")
    broken = await run("agent-config", "cursor", "--home", str(home), "--write", env=env)
    assert broken.returncode == 1 and "not valid JSON" in broken.stderr
    assert cursor.read_text() == "{not json"  # left alone


@pytest.mark.skipif(os.name != "posix", reason="uses the POSIX HOME variable for the agents' config files")
async def test_agent_config_for_a_projects_mcp_json_is_json_and_portable(tmp_path: Path) -> None:
    # Issue 30 item 8: `agent-config claude-code > .mcp.json` writes valid JSON (the `claude mcp
    # add` line and the hints go to stderr); with the default home and toolbridge on PATH the
    # entry names no path of this machine, so the file can be committed with the project.
    fake_home = tmp_path / "user"
    fake_home.mkdir()
    env = clean_env(HOME=str(fake_home), PATH=str(Path(sys.executable).parent) + os.pathsep + "/usr/bin:/bin")
    printed = await run("agent-config", "claude-code", env=env, cwd=fake_home)
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout) == {"mcpServers": {"toolbridge": {"command": "toolbridge", "args": ["stdio"]}}}
    assert "claude mcp add toolbridge -- toolbridge stdio" in printed.stderr
    assert "only on this machine" not in printed.stderr

    off_path = await run("agent-config", "claude-code", env=clean_env(HOME=str(fake_home), PATH="/usr/bin:/bin"),
                         cwd=fake_home)
    entry = json.loads(off_path.stdout)["mcpServers"]["toolbridge"]
    assert Path(entry["command"]).is_absolute() and "only on this machine" in off_path.stderr


@pytest.mark.skipif(os.name != "posix", reason="uses the POSIX HOME variable for the agents' config files")
async def test_doctor_reads_claude_codes_own_config_and_names_each_source(tmp_path: Path) -> None:
    fake_home = tmp_path / "user"
    project = tmp_path / "project"
    project.mkdir(parents=True)
    fake_home.mkdir()
    home = tmp_path / "tb"
    other = tmp_path / "other"
    claude = {"numStartups": 3, "mcpServers": {"toolbridge": {"command": sys.executable, "args": ["-m", "broker", "stdio", "--home", str(home)]}},
              "projects": {str(project): {"mcpServers": {"my-toolbridge": {"command": "no-such-toolbridge", "args": ["stdio"]}}},
                           "/elsewhere": {"mcpServers": {"toolbridge": {"command": "x", "args": ["stdio", "--home", str(other)]}}}}}
    (fake_home / ".claude.json").write_text(json.dumps(claude))
    result = await run("doctor", "--home", str(home), "--json", env=clean_env(HOME=str(fake_home)), cwd=project)
    findings = [f for f in json.loads(result.stdout) if f["check"] == "agent claude-code"]
    details = sorted((f["level"], f["detail"]) for f in findings)
    claude_json = fake_home / ".claude.json"
    assert details == [
        ("fail", f"'my-toolbridge' in {claude_json} (local scope of {project}) runs 'no-such-toolbridge', which the agent will not find"),
        ("ok", f"'toolbridge' in {claude_json} (user scope) runs {sys.executable} with this home"),
    ]


@pytest.mark.skipif(os.name != "posix", reason="uses the POSIX HOME variable for the agents' config files")
async def test_the_launched_entry_really_works(tmp_path: Path) -> None:
    """What agent-config prints is a command line that serves MCP for that home."""
    fake_home = tmp_path / "user"
    fake_home.mkdir()
    home = tmp_path / "tb"
    printed = await run("agent-config", "cursor", "--home", str(home),
                        env=clean_env(HOME=str(fake_home)))
    entry = json.loads(printed.stdout)["mcpServers"]["toolbridge"]
    async with running_daemon(home):
        process = await trio.run_process([entry["command"], *entry["args"]], stdin=json.dumps(INIT).encode() + b"\n",
                                         capture_stdout=True, capture_stderr=True, env=clean_env(HOME=str(fake_home)))
    assert json.loads(process.stdout)["result"]["serverInfo"]["name"] == "toolbridge"


async def test_lock_held_tells_a_live_daemon_from_a_leftover_lock_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert not home_files.lock_held(home)  # no file at all
    async with running_daemon(home):
        assert home_files.lock_held(home)
    assert (home / home_files.LOCK_FILE).exists() and not home_files.lock_held(home)
    async with running_daemon(home):  # the probe left nothing behind that stops the next daemon
        assert home_files.lock_held(home)
