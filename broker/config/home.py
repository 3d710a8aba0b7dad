"""The daemon's state directory: the token, the runtime file, the call log.

``token`` holds the shared secret that apps, the stdio relay and the CLI present; it is created
on first start with owner-only permissions (0600 on POSIX; on Windows the per-user data
directory is already private to the user). ``runtime.json`` tells clients where the running
daemon listens; it is written after the listeners are bound and removed on clean exit. A stale
runtime file (daemon killed) is detected by its port not answering and is simply replaced.

``daemon.lock`` makes the daemon the home's only owner: :func:`lock_home` takes an OS lock on
it (``fcntl.flock`` on POSIX, ``msvcrt.locking`` on Windows) before anything else and holds it
for the daemon's life, with the daemon's pid written inside. A second daemon for the same home
fails at once with a :class:`StartupError` naming that pid, however the two race (with port 0
both could bind; the runtime-file check alone let both run). The OS drops the lock when the
process dies, even by ``kill -9``, so a stale file never blocks the next start; the file itself
stays (deleting it would let a third daemon lock a fresh file while the second still holds the
old one). Every file the daemon creates in the home is owner-only (0600, the home 0700).
"""

from __future__ import annotations

import json
import os
import sys
import secrets
import socket
import stat
import time
from pathlib import Path
from typing import Any

import structlog

from app_client.discovery import RUNTIME_FILE as RUNTIME_FILE  # the names apps look for
from app_client.discovery import TOKEN_FILE as TOKEN_FILE

from ..errors import StartupError

LOCK_FILE = "daemon.lock"
#: Windows locks byte ranges, and a locked range cannot be read: lock one byte past the pid.
_WINDOWS_LOCK_OFFSET = 1 << 20


def ensure_home(home: Path) -> None:
    try:
        home.mkdir(parents=True, exist_ok=True)
        if os.name == "posix":
            os.chmod(home, 0o700)
    except OSError as exc:
        raise StartupError(f"cannot create the home directory {home}: {exc.strerror}") from exc


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, readable by the owner only."""
    tmp = path.with_name(path.name + ".tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0)
    fd = os.open(tmp, flags, 0o600)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    if os.name == "posix":
        os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def new_token() -> str:
    return secrets.token_urlsafe(32)


def _keep_private(path: Path) -> None:
    """Tighten a token file others may read (restored from a backup, written by hand) to 0600."""
    if os.name != "posix":
        return
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        os.chmod(path, 0o600)
        structlog.get_logger("toolbridge.home").warning(
            "token_file_permissions_tightened", path=str(path), mode=oct(mode), now="0o600")


def load_or_create_token(home: Path) -> str:
    path = home / TOKEN_FILE
    try:
        token = path.read_text().strip()
        if token:
            _keep_private(path)
            return token
    except FileNotFoundError:
        pass
    token = new_token()
    _write_private(path, token + "\n")
    return token


def rotate_token(home: Path) -> str:
    ensure_home(home)
    token = new_token()
    _write_private(home / TOKEN_FILE, token + "\n")
    return token


def read_runtime(home: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((home / RUNTIME_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _port_answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def check_not_owned(home: Path) -> None:
    """Refuse to start when another live daemon already owns ``home``."""
    info = read_runtime(home)
    if not info:
        return
    host, port = info.get("host", "127.0.0.1"), info.get("port")
    if isinstance(port, int) and _port_answers(_connect_host(host), port):
        raise StartupError(
            f"another toolbridge daemon (pid {info.get('pid')}) already owns {home} and "
            f"listens on port {port}. Stop it first, or use another --home."
        )


def _connect_host(host: str) -> str:
    return {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)


def write_runtime(
    home: Path, *, host: str, port: int, http_port: int | None, version: str, tls_cert: str | None = None,
    socket: str | None = None, daemon_instance: str | None = None,
) -> None:
    info: dict[str, Any] = {
        "pid": os.getpid(),
        "host": _connect_host(host),
        "port": port,
        "httpPort": http_port,
        "version": version,
        "startedAt": time.time(),
    }
    if tls_cert:  # the ports speak TLS; local clients pin this certificate
        info["tls"] = True
        info["tlsCert"] = str(Path(tls_cert).expanduser().resolve())
    if daemon_instance:  # this start of the daemon: what `toolbridge open` binds its login ticket to
        info["daemonInstance"] = daemon_instance
    if socket:  # the daemon's Unix socket, which local clients prefer (broker.daemon.local_socket)
        info["socket"] = socket
    _write_private(home / RUNTIME_FILE, json.dumps(info) + "\n")


def remove_runtime(home: Path) -> None:
    info = read_runtime(home)
    if info and info.get("pid") == os.getpid():
        try:
            (home / RUNTIME_FILE).unlink()
        except OSError:
            pass


def create_private(path: Path, flags: int = os.O_WRONLY | os.O_APPEND) -> int:
    """Open ``path`` (creating it) owner-only: 0600 on POSIX even if it existed wider."""
    fd = os.open(path, flags | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o600)
    if os.name == "posix":
        os.fchmod(fd, 0o600)
    return fd


class HomeLock:
    """The OS lock on ``<home>/daemon.lock``; :meth:`release` (or leaving the ``with``) frees it."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)  # no pid: nobody holds it (read by lock_owner)
            if sys.platform == "win32":
                import msvcrt

                os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
                msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        except OSError:
            pass
        finally:
            os.close(fd)  # closing the descriptor releases a flock by itself

    def __enter__(self) -> HomeLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _try_lock(fd: int) -> bool:
    if sys.platform == "win32":
        import msvcrt

        os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def lock_home(home: Path) -> HomeLock:
    """Take the home's lock for this process, or raise StartupError naming the daemon that has it."""
    path = home / LOCK_FILE
    try:
        fd = create_private(path, os.O_RDWR)
    except OSError as exc:
        raise StartupError(f"cannot create the lock file {path}: {exc.strerror}") from exc
    try:
        locked = _try_lock(fd)
    except OSError as exc:
        os.close(fd)
        raise StartupError(f"cannot lock {path}: {exc.strerror}") from exc
    if not locked:
        os.close(fd)
        owner = lock_owner(home)
        who = f"pid {owner}" if owner else "its pid is not written yet"
        raise StartupError(
            f"another toolbridge daemon ({who}) is running with the home {home}; stop that process "
            f"(Ctrl-C where it runs, or kill {owner or 'PID'}) and start again, or use another --home"
        )
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, f"{os.getpid()}\n".encode())
    return HomeLock(fd)


def lock_owner(home: Path) -> int | None:
    """The pid written in the home's lock file (the daemon holding it, or a crashed one's)."""
    try:
        with open(home / LOCK_FILE, "rb") as file:
            text = file.read(32).split(b"\n")[0].strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def lock_held(home: Path) -> bool:
    """Whether a live process holds the home's lock (the daemon, however it was started).

    Probes by taking the lock for a moment without writing to the file: true when that fails.
    Unlike :func:`lock_owner`'s pid, this cannot be fooled by a stale file or a reused pid.
    """
    try:
        fd = os.open(home / LOCK_FILE, os.O_RDWR | getattr(os, "O_BINARY", 0))
    except OSError:
        return False  # no lock file: no daemon ever ran with this home
    try:
        if not _try_lock(fd):
            return True
        if sys.platform == "win32":  # msvcrt wants a region unlocked before the file is closed
            import msvcrt

            os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        return False
    except OSError:
        return True  # cannot tell: assume the daemon is there (the safer answer for callers)
    finally:
        os.close(fd)  # releases a flock we took
