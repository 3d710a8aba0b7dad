"""``toolbridge stop`` and ``toolbridge restart``: the daemon of this home, from another terminal.

Theory of operation
-------------------
``stop`` asks the daemon itself, over the admin channel (the home's Unix socket or TCP port,
with the home's token: :func:`~broker.cli.daemon_client.admin_request`), to shut down. That
works the same on every OS and stops it as SIGTERM would: calls in flight get a "shutting
down" error, ``runtime.json`` and the socket are removed. The daemon may close the connection
before its answer is out (the shutdown closes it), so a closed connection after ``stop`` counts
as accepted.

Only when the daemon does not answer (stuck, or an old version without ``stop``) does it fall
back to the pid in ``runtime.json``, and only if the home's lock is held and its file names the
same pid (a pid from a stale file may belong to another program by now; such a file is removed): ``os.kill(pid, SIGTERM)``, which
is a graceful stop on POSIX and ``TerminateProcess`` on Windows.

Then it waits, bounded, until the daemon is gone: ``runtime.json`` no longer names it and it no
longer holds the home's lock (:func:`~broker.config.home.lock_held`; not ``os.kill(pid, 0)``,
which on Windows would kill, and on POSIX sees a zombie whose parent, say the relay that
started it, has not reaped it yet, as alive).

``restart`` stops the daemon (if one runs), then starts ``toolbridge serve`` in the background
exactly as ``toolbridge stdio`` does (:func:`~broker.cli.stdio_relay.start_daemon`, output to
``<home>/daemon.log``) on the same ports as before unless ``--port`` / ``--http-port`` say
otherwise, and waits until it answers. Other ``serve`` flags are not carried over: put lasting
settings in ``<home>/config.toml``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any, Final

import trio

from ..config import home as home_files
from ..errors import BrokerError
from ._common import EXIT_ERROR, EXIT_OK, SubParsers, add_command, add_home, home_from
from .daemon_client import DaemonUnavailable, admin_request

__all__ = ["add_parser", "cmd_restart", "cmd_stop", "stop_daemon"]

#: How long ``stop`` waits for the daemon to be gone (its own drain takes up to a few seconds).
STOP_TIMEOUT: Final = 15.0
#: How long ``restart`` waits for the new daemon to answer.
START_TIMEOUT: Final = 20.0
_POLL: Final = 0.05


class StopFailed(BrokerError):
    """The daemon could not be stopped; the message says what to do."""


def _alive(home: Path, pid: int) -> bool:
    """Whether the daemon ``pid`` still holds ``home`` (portable; see the module docstring)."""
    runtime = home_files.read_runtime(home)
    if runtime is not None and runtime.get("pid") == pid:
        return True
    # The daemon empties the lock file as it lets go; the OS drops the lock itself when the
    # process ends however it ends (even while it waits, a zombie, for its parent to reap it,
    # which is why this is not os.kill(pid, 0)). Probe only when the file still names it.
    return home_files.lock_owner(home) == pid and home_files.lock_held(home)


async def _wait_gone(home: Path, pid: int, timeout: float) -> bool:
    with trio.move_on_after(timeout):
        while _alive(home, pid):
            await trio.sleep(_POLL)  # another process: there is no event to wait on
        return True
    return False


async def stop_daemon(home: Path, timeout: float = STOP_TIMEOUT) -> int | None:
    """Stop the daemon of ``home``; return its pid, or None when none was running.

    Raises :class:`StopFailed` when it does not go away in ``timeout`` seconds.
    """
    runtime = home_files.read_runtime(home)
    pid = runtime.get("pid") if runtime else None
    if not isinstance(pid, int):
        return None
    how = "asked it over the admin channel"
    try:
        await admin_request(home, "stop", timeout=5)
    except DaemonUnavailable as exc:
        if "closed the connection" not in str(exc):  # closed: accepted, the shutdown closed it
            if home_files.lock_owner(home) != pid or not home_files.lock_held(home):
                # Nobody holds the home under that pid: a file left by a daemon that was killed.
                _remove_stale_runtime(home, pid)
                return None
            how = f"it did not answer ({exc}), so sent it SIGTERM"
            try:
                os.kill(pid, signal.SIGTERM)  # Windows: TerminateProcess
            except ProcessLookupError:
                return pid
            except PermissionError:
                raise StopFailed(f"the daemon (pid {pid}) did not answer and is not ours to signal: {exc}") from None
            if os.name != "posix":
                _remove_stale_runtime(home, pid)  # terminated at once, with no chance to clean up
    if not await _wait_gone(home, pid, timeout):
        kill = f"taskkill /PID {pid} /F" if os.name == "nt" else f"kill -9 {pid}"
        raise StopFailed(f"the daemon (pid {pid}) is still running {timeout:g} s after we {how}; "
                         f"see {home / 'daemon.log'} if it was started in the background, or end it with `{kill}`")
    return pid


def _remove_stale_runtime(home: Path, pid: int) -> None:
    runtime = home_files.read_runtime(home)
    if runtime is not None and runtime.get("pid") == pid:
        try:
            (home / home_files.RUNTIME_FILE).unlink()
        except OSError:
            pass


def cmd_stop(args: argparse.Namespace) -> int:
    home = home_from(args)
    try:
        pid = trio.run(stop_daemon, home, args.timeout)
    except StopFailed as exc:
        print(f"toolbridge: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if pid is None:
        print(f"no toolbridge daemon is running for {home}: nothing to stop", file=sys.stderr)
    else:
        print(f"stopped the toolbridge daemon (pid {pid}) of {home}")
    return EXIT_OK


def _serve_args(args: argparse.Namespace, previous: dict[str, Any] | None) -> list[str]:
    """The ports for the new daemon: the flags, else the previous daemon's (so URLs stay valid)."""
    serve: list[str] = []
    port = args.port if args.port is not None else (previous or {}).get("port")
    if isinstance(port, int):
        serve += ["--port", str(port)]
    if args.http_port is not None:
        serve += ["--http-port", str(args.http_port)]
    elif previous is not None:
        http_port = previous.get("httpPort")
        serve += ["--http-port", str(http_port)] if isinstance(http_port, int) else ["--no-http"]
    return serve


async def _wait_started(home: Path, process: Any, timeout: float) -> dict[str, Any]:
    from .stdio_relay import LOG_FILE, _log_tail

    with trio.move_on_after(timeout):
        while True:
            if home_files.read_runtime(home) is not None:
                try:
                    status: dict[str, Any] = await admin_request(home, "status", timeout=5)
                    return status
                except DaemonUnavailable:
                    pass
            if process.poll() is not None and home_files.read_runtime(home) is None:
                break
            await trio.sleep(_POLL)  # another process starting: there is no event to wait on
    tail = _log_tail(home)
    state = f"exited with code {process.returncode}" if process.returncode is not None else f"did not answer in {timeout:g} s"
    raise DaemonUnavailable(f"the new daemon {state}; see {home / LOG_FILE}" + (f": {tail}" if tail else ""))


def cmd_restart(args: argparse.Namespace) -> int:
    from .stdio_relay import start_daemon

    home = home_from(args)
    previous = home_files.read_runtime(home)
    try:
        pid = trio.run(stop_daemon, home, args.timeout)
    except StopFailed as exc:
        print(f"toolbridge: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if pid is not None:
        print(f"stopped the toolbridge daemon (pid {pid})", file=sys.stderr)
    process = start_daemon(home, _serve_args(args, previous))
    try:
        status = trio.run(_wait_started, home, process, START_TIMEOUT)
    except DaemonUnavailable as exc:
        print(f"toolbridge: {exc}", file=sys.stderr)
        return EXIT_ERROR
    http = f", MCP over HTTP on port {status['httpPort']}" if status.get("httpPort") else ""
    print(f"started the toolbridge daemon (pid {status['pid']}) of {home}: apps on port {status['port']}{http}; "
          f"its output goes to {home / 'daemon.log'}")
    return EXIT_OK


def add_parser(sub: SubParsers) -> None:
    stop = add_command(sub, "stop")
    add_home(stop)
    stop.add_argument("--timeout", type=float, default=STOP_TIMEOUT, metavar="SECONDS",
                      help=f"how long to wait for it to exit (default {STOP_TIMEOUT:g})")
    stop.set_defaults(func=cmd_stop)

    restart = add_command(sub, "restart")
    add_home(restart)
    restart.add_argument("--port", type=int, metavar="PORT", help="app port (default: the one it had)")
    restart.add_argument("--http-port", type=int, metavar="PORT", help="MCP HTTP port (default: the one it had)")
    restart.add_argument("--timeout", type=float, default=STOP_TIMEOUT, metavar="SECONDS",
                         help=f"how long to wait for the old daemon to exit (default {STOP_TIMEOUT:g})")
    restart.set_defaults(func=cmd_restart)
