"""``toolbridge stdio``: the relay process against a daemon that is missing, restarted or started by it."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import Client, MCPError, StdioServerParameters

from broker.config import home as home_files
from mcp_testkit import (MODERN_META, ScriptedApp, end_process, relay_command, relay_env, running_daemon, start_daemon_task,
                         stop_background_daemon, stop_pid)
from rawapp import JsonLines

@asynccontextmanager
async def relay(home: Path, *extra: str) -> AsyncIterator[tuple[trio.Process, JsonLines]]:
    process = await trio.lowlevel.open_process(
        relay_command(home, *extra), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        env={**os.environ, **relay_env()},
    )
    try:
        assert process.stdout is not None
        yield process, JsonLines(process.stdout)
    finally:
        await end_process(process, terminate=False)


async def write(process: trio.Process, *messages: dict[str, Any]) -> None:
    assert process.stdin is not None
    await process.stdin.send_all(b"".join(json.dumps(m).encode() + b"\n" for m in messages))


async def test_without_a_daemon_requests_get_errors_not_silence(tmp_path: Path) -> None:
    async with relay(tmp_path / "empty", "--no-start") as (process, lines):
        await write(process, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                              "params": {"protocolVersion": "2025-11-25", "capabilities": {}}})
        reply = await lines.next()
        assert reply is not None
        assert reply["id"] == 1
        assert reply["error"]["code"] == -32000
        assert "no toolbridge daemon is running" in reply["error"]["message"]
        assert process.stdin is not None
        await process.stdin.aclose()
        assert await lines.next() is None
    assert process.returncode == 0


async def test_stdin_eof_waits_for_the_answers_still_owed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with running_daemon(home, http_port=None), relay(home, "--no-start") as (process, lines):
        listen = {"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen",
                  "params": {"notifications": {"toolsListChanged": True}, "_meta": MODERN_META}}
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": MODERN_META}}
        await write(process, listen, listing, {"jsonrpc": "2.0", "id": 3, "method": "nonsense", "params": {"_meta": MODERN_META}})
        assert process.stdin is not None
        await process.stdin.aclose()  # EOF right away: answers still come; the listen stream does not hold us
        seen = []
        while (message := await lines.next()) is not None:
            seen.append(message)
    assert process.returncode == 0
    # The listen stream's acknowledgement may or may not have come before the relay left.
    assert {m["method"] for m in seen if "method" in m} <= {"notifications/subscriptions/acknowledged"}
    replies = {m["id"]: m for m in seen if "id" in m}
    assert replies[2]["result"]["tools"] == []
    assert replies[3]["error"]["code"] == -32601


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_relay_survives_a_daemon_restart(tmp_path: Path, mode: str) -> None:
    home = tmp_path / "home"
    command = relay_command(home, "--no-start")
    params = StdioServerParameters(command=command[0], args=command[1:], env=relay_env())
    async with trio.open_nursery() as nursery:
        first, first_scope, first_finished = await start_daemon_task(nursery, home)
        app = await ScriptedApp(first.port, first.token).start(nursery)
        async with Client(params, mode=mode) as client:
            assert not (await client.call_tool("Demo__text", {})).is_error

            failure: list[MCPError] = []

            async def slow_call() -> None:
                try:
                    await client.call_tool("Demo__slow", {})
                except MCPError as exc:
                    failure.append(exc)

            async with trio.open_nursery() as calls:
                calls.start_soon(slow_call)
                await app.until(lambda: any(i.tool == "slow" for i in app.invocations))
                first_scope.cancel()  # the daemon dies without answering
            assert failure, "the call in flight must fail, not hang"
            assert failure[0].code == -32000
            assert "connection to the toolbridge daemon was lost" in failure[0].message

            await first_finished.wait()  # it holds the home's lock till then
            second, second_scope, _ = await start_daemon_task(nursery, home)
            assert second.port != first.port
            await ScriptedApp(second.port, second.token).start(nursery)
            result = await client.call_tool("Demo__text", {})  # reconnects; replays initialize in legacy mode
            assert not result.is_error
            assert second.core.agent_sessions == 1
        second_scope.cancel()


async def test_the_relay_starts_a_daemon_when_none_runs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    command = relay_command(home)
    env = relay_env(TOOLBRIDGE_PORT="0", TOOLBRIDGE_HTTP_PORT="off")
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    try:
        async with Client(params) as client:
            assert client.protocol_version == "2026-07-28"
            assert (await client.list_tools()).tools == []
        runtime = home_files.read_runtime(home)
        assert runtime is not None and runtime["pid"] != os.getpid()
        # Another process's file, and its info lines are flushed every 50 ms (logsetup): the
        # line may trail runtime.json by that much.
        with trio.move_on_after(5):
            while "daemon_started" not in (home / "daemon.log").read_text():
                await trio.sleep(0.02)
        assert "daemon_started" in (home / "daemon.log").read_text()
    finally:
        runtime = home_files.read_runtime(home)
        if runtime is not None:
            os.kill(runtime["pid"], signal.SIGTERM)
            with trio.fail_after(10):
                # Polled: the relay's daemon is another process, not our child (nothing to wait() on).
                while home_files.read_runtime(home) is not None:  # removed by the daemon on its way out
                    await trio.sleep(0.05)


async def test_two_relays_starting_at_once_share_one_daemon_and_every_home_file_is_private(tmp_path: Path) -> None:
    """Regression (issue 14, items 6 and 8): two relays that both start a daemon on a fresh home
    (port 0, so both could bind) end with one daemon, both connected to it; and daemon.log,
    which the relay creates, was 0644 while everything else in the home is owner-only.

    Clean-up (issue 27, item 16): the daemon that lost the race may still be starting when the
    test ends; once the winner is stopped it takes the free lock and would serve on after the
    suite (``conftest``'s leftover check fails the run then). Every daemon a relay started is
    stopped, not only the one runtime.json names."""
    home = tmp_path / "home"
    env = {**os.environ, **relay_env(TOOLBRIDGE_PORT="0", TOOLBRIDGE_HTTP_PORT="0")}
    listed: list[Any] = []
    started: list[int] = []  # the pids of the daemons the relays started (their log says)
    try:
        processes = [await trio.lowlevel.open_process(relay_command(home), stdin=subprocess.PIPE,
                                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
                     for _ in range(2)]
        async with trio.open_nursery() as nursery:  # both relays find no daemon and start one
            for process in processes:
                nursery.start_soon(_list_and_call, process, listed)
                nursery.start_soon(_started_daemons, process, started)
        assert listed == [[], []]
        runtime = home_files.read_runtime(home)
        assert runtime is not None and home_files.lock_owner(home) == runtime["pid"]
        assert runtime["pid"] in started
        log_text = (home / "daemon.log").read_text()
        assert log_text.count("daemon_started") == 1, log_text
        if os.name == "posix":
            await _wait_for_call_log(home)
            modes = {str(p.relative_to(home)): stat.S_IMODE(p.stat().st_mode) for p in [home, *home.rglob("*")]}
            assert {"daemon.log", "daemon.lock", "token", "runtime.json", "calls.sqlite3"} <= set(modes)
            assert {name: mode for name, mode in modes.items()
                    if mode != (0o700 if (home / name).is_dir() else 0o600)} == {}, modes
    finally:
        await stop_background_daemon(home)
        for pid in started:  # the loser: exited on the lock, still starting, or serving now
            await stop_pid(pid)


async def _started_daemons(process: trio.Process, started: list[int]) -> None:
    """Read the relay's log (stderr, JSON lines) to its end; note each daemon it started."""
    assert process.stderr is not None
    text = b""
    while chunk := await process.stderr.receive_some(65536):
        text += chunk
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("event") == "daemon_started" and isinstance(record.get("pid"), int):
            started.append(record["pid"])


async def _list_and_call(process: trio.Process, listed: list[Any]) -> None:
    assert process.stdin is not None and process.stdout is not None
    lines = JsonLines(process.stdout)
    requests = [{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": MODERN_META}},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call",  # recorded in the call log
                 "params": {"name": "Nobody__nothing", "arguments": {"secret": "x"}, "_meta": MODERN_META}}]
    await process.stdin.send_all(b"".join(json.dumps(r).encode() + b"\n" for r in requests))
    answers = {}
    while len(answers) < 2:
        answer = await lines.next(timeout=30)
        assert answer is not None, "the relay closed its stdout"
        answers[answer["id"]] = answer
    listed.append(answers[1]["result"]["tools"])
    await process.stdin.aclose()
    with trio.fail_after(10):
        await process.wait()


async def _wait_for_call_log(home: Path) -> None:
    """The call log's -wal file exists once the writer has written (flush interval 0.5 s)."""
    with trio.fail_after(10):
        # Polled: the writer is in another process (the daemon the relay started).
        while not (home / "calls.sqlite3-wal").exists():
            await trio.sleep(0.05)


async def test_the_relay_and_the_cli_share_one_connect_timeout_and_one_limit_for_daemon_lines(tmp_path: Path) -> None:
    """One CONNECT_TIMEOUT (5 s) and one limit for lines from the daemon (64 MiB) for the CLI and
    the relay: the relay's agent link takes a line the CLI takes (it refused over 16 MiB)."""
    import trio.testing

    from app_client.protocol import AgentConnect, AgentConnected, decode_message, encode_message
    from broker.cli import daemon_client, stdio_relay

    assert stdio_relay.CONNECT_TIMEOUT is daemon_client.CONNECT_TIMEOUT == 5.0
    assert daemon_client.DAEMON_LINE_LIMIT == 64 * 1024 * 1024
    home = tmp_path / "home"
    home.mkdir()
    (home / home_files.TOKEN_FILE).write_text("tok")
    relay_end, daemon_end = trio.testing.memory_stream_pair()
    big = b'{"jsonrpc": "2.0", "id": 1, "result": {"blob": "' + b"x" * (20 * 1024 * 1024) + b'"}}'

    async def daemon() -> None:
        line = b""
        while not line.endswith(b"\n"):
            line += await daemon_end.receive_some()
        assert decode_message(line[:-1]) == AgentConnect(token="tok")
        await daemon_end.send_all(encode_message(AgentConnected()) + big + b"\n")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(daemon)
        channel = await stdio_relay.Relay(home, auto_start=False)._hello(relay_end)  # noqa: SLF001
    assert channel.framer.max_line_bytes == daemon_client.DAEMON_LINE_LIMIT
    assert await channel.receive_batch() == [big]
