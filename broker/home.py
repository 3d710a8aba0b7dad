"""The daemon's state directory: the token, the runtime file, the call log.

``token`` holds the shared secret that apps, the stdio relay and the CLI present; it is created
on first start with owner-only permissions (0600 on POSIX; on Windows the per-user data
directory is already private to the user). ``runtime.json`` tells clients where the running
daemon listens; it is written after the listeners are bound and removed on clean exit. A stale
runtime file (daemon killed) is detected by its port not answering and is simply replaced.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import stat
import time
from pathlib import Path
from typing import Any

import structlog

from app_client.discovery import RUNTIME_FILE as RUNTIME_FILE  # the names apps look for
from app_client.discovery import TOKEN_FILE as TOKEN_FILE

from .errors import StartupError



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
    socket: str | None = None,
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
    if socket:  # the daemon's Unix socket, which local clients prefer (broker.local_socket)
        info["socket"] = socket
    _write_private(home / RUNTIME_FILE, json.dumps(info) + "\n")


def remove_runtime(home: Path) -> None:
    info = read_runtime(home)
    if info and info.get("pid") == os.getpid():
        try:
            (home / RUNTIME_FILE).unlink()
        except OSError:
            pass
