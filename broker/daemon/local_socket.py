"""The daemon's Unix domain socket: the local transport other users cannot reach.

Theory of operation
-------------------
Besides its loopback TCP port, the daemon listens on ``<home>/toolbridge.sock`` where Python
has ``AF_UNIX`` (Linux, macOS, the BSDs; not Windows' usual builds). The home directory is
0700, so only its owner can even connect; the socket itself is made 0600 too (Linux checks
it; macOS and the BSDs only check the directory). It carries exactly what the TCP port
carries — same framing, same first messages, the token still required — and is served by
the same :meth:`~broker.daemon.broker_core.BrokerCore.handle_connection`. Its path goes into
``runtime.json`` (``"socket"``), and local clients (apps on ``app_client``, the CLI, the
``toolbridge stdio`` relay) prefer it (``app_client.transport``), so a flood on the TCP port
by another user cannot keep them out.

A socket path must fit ``sun_path`` (108 bytes on Linux, 104 on macOS and the BSDs,
including the terminating NUL). A home whose socket path is longer gets no socket: a warning
is logged and clients use TCP as before. A socket file left by a killed daemon is removed at
start, but only after a connection attempt to it is refused (nobody answers there); one
that answers means another daemon owns the home, which stops this one. The file is removed
on clean exit if it is still the one this daemon made.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
import sys
from pathlib import Path

import attrs
import structlog
import trio

from app_client.transport import HAS_UNIX_SOCKETS, connect_unix

from ..errors import StartupError

__all__ = ["SOCKET_FILE", "LocalListener", "bind_local_listener", "socket_path_fits"]

log = structlog.get_logger("toolbridge.local_socket")

SOCKET_FILE = "toolbridge.sock"
#: ``sizeof(sun_path)``: the socket path plus its terminating NUL must fit.
SUN_PATH_BYTES = 104 if sys.platform == "darwin" or "bsd" in sys.platform else 108
#: Pending connections the kernel may hold for us (it caps this at its own maximum).
_BACKLOG = 4096
#: How long a leftover socket gets to answer before it counts as stale.
_PROBE_SECONDS = 1.0


@attrs.define
class LocalListener:
    """A bound, listening Unix socket and the file it lives at."""

    listener: trio.SocketListener
    path: Path
    #: ``(st_dev, st_ino)`` of the socket file this daemon bound, so that ``remove`` never
    #: deletes a file another daemon put there later.
    identity: tuple[int, int]

    def remove(self) -> None:
        """Unlink the socket file if it is still ours (call on exit, after serving stopped)."""
        try:
            info = os.lstat(self.path)
            if (info.st_dev, info.st_ino) == self.identity:
                os.unlink(self.path)
        except OSError:
            pass


def socket_path_fits(path: Path) -> bool:
    """Whether ``path`` (and its NUL) fits a Unix socket address on this platform."""
    return len(os.fsencode(path)) < SUN_PATH_BYTES


async def bind_local_listener(home: Path) -> LocalListener | None:
    """Listen on ``<home>/toolbridge.sock``; None (logged) where that cannot be done.

    Raises StartupError only when another daemon answers on that socket.
    """
    if not HAS_UNIX_SOCKETS:
        log.info("unix_socket_unavailable", reason="no AF_UNIX in this Python; local clients use TCP")
        return None
    path = home.absolute() / SOCKET_FILE
    if not socket_path_fits(path):
        log.warning("unix_socket_skipped", path=str(path),
                    reason=f"the path is longer than the {SUN_PATH_BYTES - 1} bytes a Unix socket allows",
                    hint="local clients use TCP; choose a shorter --home to get the socket")
        return None
    sock = await _bind(path)
    if sock is None:
        return None
    try:
        if os.name == "posix":
            os.chmod(path, 0o600)  # the 0700 home already keeps others out; belt and braces
        sock.listen(_BACKLOG)
        info = os.lstat(path)
    except OSError as exc:
        sock.close()
        _unlink(path)
        log.warning("unix_socket_skipped", path=str(path), reason=exc.strerror, hint="local clients use TCP")
        return None
    return LocalListener(trio.SocketListener(sock), path, (info.st_dev, info.st_ino))


async def _bind(path: Path) -> trio.socket.SocketType | None:
    """A socket bound to ``path``, replacing a stale socket file once; None if impossible."""
    for attempt in (1, 2):
        sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            await sock.bind(str(path))
        except OSError as exc:
            sock.close()
            if exc.errno == errno.EADDRINUSE and attempt == 1 and await _remove_if_stale(path):
                continue
            log.warning("unix_socket_skipped", path=str(path), reason=exc.strerror or str(exc),
                        hint="local clients use TCP")
            return None
        return sock
    return None  # pragma: no cover - the loop returns on its second pass


async def _remove_if_stale(path: Path) -> bool:
    """Unlink a leftover socket file nobody answers on; False if it is no socket or hangs.

    Raises StartupError when a daemon answers there.
    """
    try:
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            return False  # not a socket: not ours to delete
    except FileNotFoundError:
        return True  # gone meanwhile: just bind again
    except OSError:
        return False
    refused = False
    with trio.move_on_after(_PROBE_SECONDS):
        try:
            stream = await connect_unix(str(path))
        except OSError:
            refused = True  # a socket file left by a daemon that did not exit cleanly
        else:
            await trio.aclose_forcefully(stream)
            raise StartupError(f"another toolbridge daemon answers on {path}, so it owns {path.parent}. "
                               "Stop it first, or use another --home.")
    if not refused:
        return False  # no answer either way: leave it alone (and skip the socket)
    log.info("stale_unix_socket_removed", path=str(path))
    _unlink(path)
    return True


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
