"""Processes a test run left behind: what ``conftest.py``'s session-end check looks for.

A leftover is a live process (not a zombie) that is either a descendant of the pytest process
or, because the relay and ``toolbridge restart`` start their daemon in a session of its own
(its parent becomes init), a process of ours whose command line or environment names a path
under this run's temporary root (a daemon's ``--home``, an app's ``TOOLBRIDGE_HOME``, a
nats-server's config or store, a Deno sandbox's folder). Only this run's root is searched, so
other pytest runs on the same machine (their own ``pytest-N`` roots) are never blamed.

It reads ``/proc``: on a system without one (macOS, Windows) :func:`find_leftovers` finds
nothing and the check is a no-op there.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import attrs

__all__ = ["Leftover", "find_leftovers", "kill_leftovers"]

_PROC = Path("/proc")


@attrs.frozen
class Leftover:
    pid: int
    command: str
    why: str

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.why}): {self.command[:300]}"


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:  # gone meanwhile, or not ours to read
        return b""


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) from /proc/PID/stat; None when it is gone."""
    data = _read(_PROC / str(pid) / "stat")
    if not data:
        return None
    rest = data[data.rfind(b")") + 2:].split()  # the command name may hold spaces and parentheses
    return rest[0].decode(), int(rest[1])


def find_leftovers(root_pid: int, tmp_root: Path | None) -> list[Leftover]:
    """Live processes started by ``root_pid`` (at any depth) or naming a path under ``tmp_root``
    (when there is one)."""
    if not _PROC.is_dir():
        return []
    uid = os.getuid()
    marker = str(tmp_root).encode() if tmp_root is not None else None
    parents: dict[int, int] = {}
    live: set[int] = set()
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        stat = _stat(pid)
        if stat is None:
            continue
        state, parent = stat
        parents[pid] = parent
        if state not in ("Z", "X"):  # a zombie is dead, only not yet reaped
            live.add(pid)
    found: list[Leftover] = []
    for pid in sorted(live - {root_pid, os.getpid()}):
        ancestor, depth = parents.get(pid, 0), 0
        while ancestor not in (0, 1, root_pid) and depth < 64:
            ancestor, depth = parents.get(ancestor, 0), depth + 1
        command = _read(_PROC / str(pid) / "cmdline").replace(b"\0", b" ").decode(errors="replace").strip()
        if ancestor == root_pid:
            found.append(Leftover(pid, command, "a child of pytest"))
            continue
        if marker is None:
            continue
        try:
            if (_PROC / str(pid)).stat().st_uid != uid:
                continue
        except OSError:
            continue
        if marker in command.encode() or marker in _read(_PROC / str(pid) / "environ"):
            found.append(Leftover(pid, command, f"names {tmp_root}"))
    return found


def kill_leftovers(leftovers: list[Leftover], grace: float = 5.0) -> None:
    """SIGTERM each, then SIGKILL what is still there after ``grace`` seconds (polled: they are
    not our children, so there is nothing to wait() on)."""
    for leftover in leftovers:
        try:
            os.kill(leftover.pid, signal.SIGTERM)
        except OSError:
            pass
    end = time.monotonic() + grace
    pending = [leftover.pid for leftover in leftovers]
    while pending and time.monotonic() < end:
        pending = [pid for pid in pending if (stat := _stat(pid)) is not None and stat[0] not in ("Z", "X")]
        time.sleep(0.05)
    for pid in pending:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
