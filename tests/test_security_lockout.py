"""Nobody without the token can keep apps, the CLI or agents out (issue 14, item 4).

A flood of token-less connections (``flood.py``, its own process: 500 connections held idle
and re-opened as soon as the daemon drops them, plus slowloris tasks dribbling, half-sending
or garbling first lines) runs against the app port while a real app (``app_client``), the
CLI's daemon client and the ``toolbridge stdio`` relay's link connect, each within 1 s; then
the real ``toolbridge status`` and ``toolbridge stdio`` processes work too. Once over TCP
alone (the first-byte deadline and the eviction of the oldest silent waiter carry it), once
over the Unix socket (with runtime.json's TCP port pointing nowhere, so nothing but the
socket can have carried them). Also: the socket's privacy, the token it still needs, a path
too long for it, a stale socket file, the clean-up, and the fall-backs to TCP.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import structlog
import trio
from mcp import Client, StdioServerParameters

from app_client import App
from app_client.discovery import DaemonAddress, find_daemon
from app_client.transport import connect_daemon
from broker.daemon.broker_core import BrokerCore
from broker.daemon import local_socket
from broker.daemon.run import DaemonInfo
from broker.cli.daemon_client import admin_request
from broker.config.settings import Settings
from broker.errors import StartupError
from broker.cli.stdio_relay import Relay
from mcp_testkit import relay_command, relay_env, running_daemon
from rawapp import RawApp

FLOOD = Path(__file__).with_name("flood.py")
IDLE = 500

needs_unix = pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="no AF_UNIX in this Python")


@pytest.fixture(autouse=True)
def _no_address_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clients must find the daemon through its home, as they do by default."""
    for name in ("HOST", "PORT", "TOKEN", "TLS", "TLS_CA", "HOME"):
        monkeypatch.delenv(f"TOOLBRIDGE_{name}", raising=False)


def _raise_fd_limit() -> None:
    """The daemon's side of the flood lives in this process: make room (POSIX only)."""
    try:
        import resource
    except ImportError:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < 4096:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))


@asynccontextmanager
async def flooding(port: int) -> AsyncIterator[None]:
    """``flood.py`` against ``port`` until the block ends (60 s at most)."""
    process = await trio.lowlevel.open_process(
        [sys.executable, str(FLOOD), str(port), "--idle", str(IDLE), "--seconds", "60"],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert process.stdout is not None
    try:
        with trio.fail_after(30):
            received = b""
            while b"ready\n" not in received:
                chunk = await process.stdout.receive_some()
                assert chunk, "the flood exited before it was ready"
                received += chunk
        yield
    finally:
        process.kill()
        with trio.move_on_after(10):
            await process.wait()
        await process.stdout.aclose()


async def wait_until(core: BrokerCore, condition: Callable[[], bool], timeout: float = 20) -> None:
    """Wait for a count the daemon keeps while the flood runs: the core pulses ``changed`` as
    connections start and stop waiting for their first message. (Not wait_all_tasks_blocked:
    with a flood arriving, the daemon's tasks in this process may never all be blocked at once.)"""
    with trio.fail_after(timeout):
        await core.changed.wait_until(condition)


def dead_port() -> int:
    """A loopback port nobody listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


#: How long a client may take to get through while the flood runs. A locked-out client never
#: gets through (the flood lasts 60 s); 1 s was tight enough to fail on a loaded 2-core machine
#: (the flood, the daemon and the clients share it), which says nothing about lock-out.
LIVENESS = 5.0


async def connect_all_three(home: Path, info: DaemonInfo) -> socket.AddressFamily:
    """A real app registers, the CLI gets its status, an agent gets its link: each within
    ``LIVENESS`` seconds.

    Returns the address family of the app's link as the daemon sees it.
    """
    app = App("Probe", home=home)

    @app.tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    async with app.connected(timeout=LIVENESS):
        with trio.fail_after(LIVENESS):
            status = await admin_request(home, "status")
        assert [entry["app"] for entry in status["apps"]] == ["Probe"]
        [probe] = info.core.registry.instances()
        assert probe.link is not None
        family = probe.link.conn.stream.socket.family
        relay = Relay(home, auto_start=False)
        with trio.fail_after(LIVENESS):
            channel = await relay._connect()  # noqa: SLF001 - agentConnect, as `toolbridge stdio` sends it
        await channel.stream.aclose()
        # And the real processes (their start-up is not what is timed here).
        cli = await trio.run_process([sys.executable, "-m", "broker", "status", "--home", str(home)],
                                     capture_stdout=True, capture_stderr=True, check=False)
        assert cli.returncode == 0, cli.stderr.decode()
        assert b"Probe" in cli.stdout
        command = relay_command(home, "--no-start")
        params = StdioServerParameters(command=command[0], args=command[1:], env=relay_env())
        with trio.fail_after(60):
            async with Client(params) as client:
                listed = await client.list_tools()
                assert [tool.name for tool in listed.tools] == ["Probe__ping"]
                answer = await client.call_tool("Probe__ping", {})
                assert not answer.is_error
    return family


async def test_a_flood_over_tcp_does_not_lock_out_apps_the_cli_or_agents(tmp_path: Path) -> None:
    """TCP alone: the daemon evicts the oldest silent waiter and lets silent ones go after 1 s."""
    _raise_fd_limit()
    home = tmp_path / "home"
    async with running_daemon(home, http_port=None, unix_socket=False) as info, flooding(info.port):
        assert "socket" not in json.loads((home / "runtime.json").read_text())
        waiting = info.core._waiting  # noqa: SLF001
        limit = info.core.settings.max_unregistered_connections
        await wait_until(info.core, lambda: len(waiting) >= limit)  # the flood fills every waiting slot
        assert await connect_all_three(home, info) == socket.AF_INET
        assert len(waiting) <= limit


@needs_unix
async def test_a_flood_on_tcp_cannot_touch_clients_on_the_unix_socket(tmp_path: Path) -> None:
    _raise_fd_limit()
    home = tmp_path / "home"
    async with running_daemon(home, http_port=None) as info, flooding(info.port):
        runtime_file = home / "runtime.json"
        runtime = json.loads(runtime_file.read_text())
        assert runtime["socket"] == str(home.absolute() / "toolbridge.sock")
        # From here on TCP leads nowhere: whatever connects, connects over the socket.
        runtime["port"] = dead_port()
        runtime_file.write_text(json.dumps(runtime))
        await wait_until(info.core, lambda: len(info.core._waiting) >= info.core.settings.max_unregistered_connections)  # noqa: SLF001
        assert await connect_all_three(home, info) == socket.AF_UNIX


@needs_unix
async def test_the_unix_socket_is_private_and_still_needs_the_token(tmp_path: Path) -> None:
    """Other users cannot reach it (0700 home, 0600 socket); the owner's processes need the token."""
    home = tmp_path / "home"
    async with running_daemon(home, http_port=None) as info:
        path = home / "toolbridge.sock"
        mode = path.lstat().st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) & 0o077 == 0
        assert stat.S_IMODE(home.stat().st_mode) == 0o700
        assert (await admin_request(home, "status"))["socket"] == str(path.absolute())
        for first in ({"type": "register", "appName": "Thief", "token": "wrong", "tools": []},
                      {"type": "agentConnect", "token": "wrong"}):
            stranger = RawApp(await trio.open_unix_socket(str(path)))
            await stranger.send(first)
            refused = await stranger.recv()
            assert (refused["code"], refused["fatal"]) == ("unauthorized", True)
            assert await stranger.closed()
        admin = RawApp(await trio.open_unix_socket(str(path)))
        await admin.send({"type": "admin", "token": "wrong", "command": "status"})
        assert (await admin.recv())["ok"] is False
        owner = RawApp(await trio.open_unix_socket(str(path)))
        assert (await owner.register(info.token))["type"] == "registered"
        await RawApp.close_all()
    assert not path.exists()  # removed on clean exit


@needs_unix
async def test_a_home_too_long_for_a_socket_path_stays_on_tcp(tmp_path: Path) -> None:
    home = tmp_path / ("h" * 60) / ("o" * 60)
    assert not local_socket.socket_path_fits(home / local_socket.SOCKET_FILE)
    with structlog.testing.capture_logs() as logs:
        async with running_daemon(home, http_port=None):
            assert "socket" not in json.loads((home / "runtime.json").read_text())
            app = App("Probe", home=home)
            async with app.connected(timeout=10):
                pass
    [skipped] = [e for e in logs if e["event"] == "unix_socket_skipped"]
    assert "longer than" in skipped["reason"] and "TCP" in skipped["hint"]


@needs_unix
async def test_a_stale_socket_file_is_replaced_but_a_live_one_is_not(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    path = home / "toolbridge.sock"
    with socket.socket(socket.AF_UNIX) as leftover:  # what a SIGKILLed daemon leaves behind
        leftover.bind(str(path))
    async with running_daemon(home, http_port=None) as info:
        owner = RawApp(await trio.open_unix_socket(str(path)))
        assert (await owner.register(info.token))["type"] == "registered"
        await RawApp.close_all()
    with socket.socket(socket.AF_UNIX) as live:  # somebody answers there: not ours to delete
        live.bind(str(path))
        live.listen()
        with pytest.raises(StartupError, match="answers on"):
            await local_socket.bind_local_listener(home)
        assert path.exists()


async def test_without_af_unix_the_daemon_and_its_clients_use_tcp(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows' usual Python has no AF_UNIX: no socket, and connect_daemon goes to TCP."""
    import app_client.transport as transport

    monkeypatch.setattr(local_socket, "HAS_UNIX_SOCKETS", False)
    monkeypatch.setattr(transport, "HAS_UNIX_SOCKETS", False)
    home = tmp_path / "home"
    async with running_daemon(home, http_port=None):
        assert "socket" not in json.loads((home / "runtime.json").read_text())
        assert not (home / "toolbridge.sock").exists()
        assert (await admin_request(home, "status"))["socket"] is None
        address = find_daemon(home)
        stream = await connect_daemon(attrs_evolve(address, socket=home / "toolbridge.sock"))
        await stream.aclose()


async def test_a_socket_that_does_not_answer_falls_back_to_tcp(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with running_daemon(home, http_port=None, unix_socket=False) as info:
        address = DaemonAddress("127.0.0.1", info.port, info.token, socket=tmp_path / "gone.sock")
        link = RawApp(await connect_daemon(address))
        assert (await link.register(info.token))["type"] == "registered"
        await RawApp.close_all()


def attrs_evolve(address: DaemonAddress, **changes: Any) -> DaemonAddress:
    import attrs

    return attrs.evolve(address, **changes)


def test_find_daemon_names_the_socket_only_when_the_address_was_not_chosen(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "token").write_text("t\n")
    runtime = {"pid": os.getpid(), "host": "127.0.0.1", "port": 4000, "socket": "/run/x.sock"}
    (tmp_path / "runtime.json").write_text(json.dumps(runtime))
    assert find_daemon(tmp_path).socket == Path("/run/x.sock")
    assert find_daemon(tmp_path, host="127.0.0.1").socket is None
    assert find_daemon(tmp_path, port=4001).socket is None
    monkeypatch.setenv("TOOLBRIDGE_PORT", "4001")
    assert find_daemon(tmp_path).socket is None
    monkeypatch.delenv("TOOLBRIDGE_PORT")
    monkeypatch.setenv("TOOLBRIDGE_HOST", "127.0.0.1")
    assert find_daemon(tmp_path).socket is None
    monkeypatch.delenv("TOOLBRIDGE_HOST")
    monkeypatch.setenv("TOOLBRIDGE_TLS", "1")
    assert find_daemon(tmp_path).socket is None
    monkeypatch.delenv("TOOLBRIDGE_TLS")
    del runtime["socket"]  # a daemon from before the socket
    (tmp_path / "runtime.json").write_text(json.dumps(runtime))
    assert find_daemon(tmp_path).socket is None


def test_the_socket_and_first_byte_settings_come_from_file_environment_and_flag(tmp_path: Path) -> None:
    import argparse

    from broker.cli import build_parser
    from broker.config.settings_file import load_settings

    assert Settings().unix_socket is True and Settings().first_byte_timeout == 1.0
    (tmp_path / "config.toml").write_text("first_byte_timeout = 2.5\nunix_socket = false\n")
    assert load_settings(None, tmp_path, {}).first_byte_timeout == 2.5
    assert load_settings(None, tmp_path, {}).unix_socket is False
    (tmp_path / "config.toml").unlink()
    assert load_settings(None, tmp_path, {"TOOLBRIDGE_UNIX_SOCKET": "off"}).unix_socket is False
    assert load_settings(None, tmp_path, {"TOOLBRIDGE_FIRST_BYTE_TIMEOUT": "0.5"}).first_byte_timeout == 0.5
    flags = build_parser().parse_args(["serve", "--no-unix-socket"])
    assert isinstance(flags, argparse.Namespace)
    assert load_settings(flags, tmp_path, {}).unix_socket is False


@needs_unix
async def test_a_failed_start_leaves_no_socket_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        http_port = taken.getsockname()[1]
        with pytest.raises(BaseException) as failed:  # StartupError, in the daemon's nursery's group
            async with running_daemon(home, http_port=http_port):
                pass
    assert "already in use" in repr(failed.value)
    assert not (home / "toolbridge.sock").exists()
