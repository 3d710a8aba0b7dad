"""Finding the running toolbridge daemon: host, port and token.

Theory of operation
-------------------
The daemon keeps two files in its *home* directory:

``token``
    The shared secret every connection presents (one line; surrounding whitespace is
    ignored).
``runtime.json``
    Written by the running daemon: ``{"pid": int, "host": str, "port": int,
    "httpPort": int | null, "version": str, "startedAt": float}``, plus ``"socket": str``
    (the path of its Unix domain socket) where it listens on one.

:func:`find_daemon` resolves each of host, port and token on its own, from the first source
that has it: the function's arguments, then the environment (``TOOLBRIDGE_HOST``,
``TOOLBRIDGE_PORT``, ``TOOLBRIDGE_TOKEN``), then the files in the home directory. These
variables say where to *connect*; the daemon listens where ``TOOLBRIDGE_LISTEN_HOST`` /
``TOOLBRIDGE_LISTEN_PORT`` say, and ``TOOLBRIDGE_PORT=0`` (which used to mean "listen on any free
port" to the daemon too) counts as unset here. The home
directory is the ``home`` argument, else ``TOOLBRIDGE_HOME``, else
``platformdirs.user_data_dir("toolbridge", appauthor=False)``. Files are read only when an
argument or variable did not already supply the value, and they are read again on every
call, so a client that calls it before each connection attempt follows a restarted daemon
(new port) and a rotated token.

Unix socket: when host and port both come from ``runtime.json`` and no TLS is asked for by
argument or environment, the address also carries the ``socket`` that file names, and
:func:`~app_client.transport.connect_daemon` tries it before TCP (see
:mod:`app_client.transport`).

TLS: a daemon that serves its app port over TLS says so in ``runtime.json`` (``"tls": true``
and ``"tlsCert"``, the path of its certificate). The address then asks for TLS: verified
against ``tls_ca`` (argument, else ``TOOLBRIDGE_TLS_CA``) when one is given, else by pinning
the daemon's certificate from ``tlsCert`` (see :mod:`app_client.tls`). A CA given by argument
or environment, or ``TOOLBRIDGE_TLS=1`` (the system's trust store), asks for TLS whatever
``runtime.json`` says, for daemons on another machine.

Nothing here touches the network or checks that the recorded ``pid`` is alive (that cannot
be done portably without extra dependencies; on Windows ``os.kill(pid, 0)`` would kill the
process). A stale ``runtime.json`` therefore shows up as a refused connection, and callers
word that error using :attr:`DaemonAddress.runtime_file`.

The daemon's CLI imports this module too, so the file names, variable names and the
:class:`RuntimeInfo` layout are defined once, here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import attrs
import msgspec
import platformdirs

from .errors import DaemonNotFound

__all__ = [
    "DEFAULT_HOST",
    "ENV_HOME",
    "ENV_HOST",
    "ENV_PORT",
    "ENV_TLS",
    "ENV_TLS_CA",
    "ENV_TOKEN",
    "RUNTIME_FILE",
    "TOKEN_FILE",
    "DaemonAddress",
    "RuntimeInfo",
    "default_home",
    "find_daemon",
    "read_runtime",
    "read_token",
    "resolve_home",
]

ENV_HOME: Final = "TOOLBRIDGE_HOME"
ENV_HOST: Final = "TOOLBRIDGE_HOST"
ENV_PORT: Final = "TOOLBRIDGE_PORT"
ENV_TOKEN: Final = "TOOLBRIDGE_TOKEN"
ENV_TLS_CA: Final = "TOOLBRIDGE_TLS_CA"
ENV_TLS: Final = "TOOLBRIDGE_TLS"
TOKEN_FILE: Final = "token"
RUNTIME_FILE: Final = "runtime.json"
#: Used when neither an argument, the environment nor ``runtime.json`` names a host.
DEFAULT_HOST: Final = "127.0.0.1"

_START_HINT: Final = "start it with `toolbridge serve`"


class RuntimeInfo(msgspec.Struct, rename="camel", frozen=True):
    """The contents of ``runtime.json``, written by the running daemon."""

    pid: int
    host: str
    port: int
    http_port: int | None = None
    version: str = ""
    started_at: float = 0.0
    #: The app port speaks TLS; ``tls_cert`` is the daemon's certificate file (for pinning).
    tls: bool = False
    tls_cert: str | None = None
    #: The daemon's Unix domain socket (in its 0700 home), if it listens on one.
    socket: str | None = None


@attrs.frozen
class DaemonAddress:
    """Where the daemon listens for apps, and the token to present.

    ``token`` is left out of ``repr`` so that logging an address never leaks it.
    ``runtime_file`` is the ``runtime.json`` the port came from, or ``None`` when the port
    came from an argument or the environment (useful when explaining a refused connection).
    ``tls`` asks for TLS, verified against ``tls_ca`` (a CA file; ``None``: the system's
    trust store) or, when set, by pinning the certificate in ``tls_pin``.
    ``socket`` is the daemon's Unix domain socket, tried before TCP by
    :func:`~app_client.transport.connect_daemon`; set only when the caller did not choose
    the host, port or TLS itself.
    """

    host: str
    port: int
    token: str = attrs.field(repr=False)
    runtime_file: Path | None = None
    tls: bool = False
    tls_ca: Path | None = None
    tls_pin: Path | None = None
    socket: Path | None = None


def default_home() -> Path:
    """The per-user data directory toolbridge uses when nothing else is configured."""
    return Path(platformdirs.user_data_dir("toolbridge", appauthor=False))


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """``home`` if given, else ``$TOOLBRIDGE_HOME``, else :func:`default_home`."""
    if home is not None:
        return Path(home)
    from_env = os.environ.get(ENV_HOME)
    if from_env:
        return Path(from_env)
    return default_home()


def read_token(home: str | os.PathLike[str] | None = None) -> str:
    """Read the token file of ``home`` (resolved by :func:`resolve_home`).

    Raises :class:`DaemonNotFound` if the file is missing, unreadable or empty.
    """
    path = resolve_home(home) / TOKEN_FILE
    try:
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise DaemonNotFound(
            f"no toolbridge token file at {path}: the daemon has never run with this home "
            f"directory; {_START_HINT} (or set {ENV_TOKEN})"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DaemonNotFound(f"cannot read the toolbridge token file {path}: {exc}") from exc
    if not token:
        raise DaemonNotFound(f"the toolbridge token file {path} is empty; {_START_HINT}")
    return token


def read_runtime(home: str | os.PathLike[str] | None = None) -> RuntimeInfo:
    """Read ``runtime.json`` of ``home`` (resolved by :func:`resolve_home`).

    Raises :class:`DaemonNotFound` if the file is missing (the daemon is not running) or
    malformed.
    """
    path = resolve_home(home) / RUNTIME_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DaemonNotFound(
            f"the toolbridge daemon is not running (no {path}); {_START_HINT}"
        ) from None
    except OSError as exc:
        raise DaemonNotFound(f"cannot read {path}: {exc}") from exc
    try:
        return msgspec.json.decode(raw, type=RuntimeInfo)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise DaemonNotFound(
            f"{path} is not a valid toolbridge runtime file ({exc}); {_START_HINT}"
        ) from exc


def _parse_port(value: str | int, source: str) -> int:
    try:
        port = int(value)
    except (TypeError, ValueError):
        raise DaemonNotFound(f"{source}={value!r} is not a port number") from None
    if not 0 < port < 65536:
        raise DaemonNotFound(f"{source}={value!r} is not a port number (1-65535)")
    return port


def find_daemon(
    home: str | os.PathLike[str] | None = None,
    host: str | None = None,
    port: int | None = None,
    token: str | None = None,
    tls_ca: str | os.PathLike[str] | None = None,
) -> DaemonAddress:
    """Resolve the daemon's address and token (arguments > environment > home directory).

    Empty strings in arguments or variables count as unset. Raises :class:`DaemonNotFound`
    when a value is missing from every source or malformed; its message says what to do
    (usually: start the daemon with ``toolbridge serve``).
    """
    runtime: RuntimeInfo | None = None
    runtime_file: Path | None = None

    def runtime_info() -> RuntimeInfo:
        nonlocal runtime, runtime_file
        if runtime is None:
            runtime = read_runtime(home)
            runtime_file = resolve_home(home) / RUNTIME_FILE
        return runtime

    resolved_port: int
    if port is not None:
        resolved_port = _parse_port(port, "port")
    elif os.environ.get(ENV_PORT, "").strip() not in ("", "0"):
        # "0" is unset here: it was the daemon's "listen on any free port" (the same variable
        # used to set both; the daemon now reads TOOLBRIDGE_LISTEN_PORT), and a client cannot
        # connect to port 0, so runtime.json's real port is the one meant.
        resolved_port = _parse_port(os.environ[ENV_PORT], ENV_PORT)
    else:
        resolved_port = _parse_port(runtime_info().port, str(resolve_home(home) / RUNTIME_FILE))

    resolved_host = host or os.environ.get(ENV_HOST) or ""
    if not resolved_host:
        resolved_host = runtime.host if runtime is not None else DEFAULT_HOST
        resolved_host = resolved_host or DEFAULT_HOST

    resolved_token = token or os.environ.get(ENV_TOKEN) or read_token(home)
    ca = tls_ca or os.environ.get(ENV_TLS_CA) or None
    if ca is not None:
        return DaemonAddress(resolved_host, resolved_port, resolved_token, runtime_file, True, Path(ca))
    if os.environ.get(ENV_TLS, "").strip().lower() in ("1", "true", "yes", "on"):
        return DaemonAddress(resolved_host, resolved_port, resolved_token, runtime_file, True)
    # The whole address came from runtime.json (no host or port chosen, no TLS asked for):
    # its Unix socket, which other users cannot reach, comes first.
    local = None
    if runtime is not None and runtime.socket and not (host or os.environ.get(ENV_HOST)):
        local = Path(runtime.socket)
    if runtime is not None and runtime.tls:
        pin = Path(runtime.tls_cert) if runtime.tls_cert else None
        return DaemonAddress(resolved_host, resolved_port, resolved_token, runtime_file, True, None, pin, local)
    return DaemonAddress(resolved_host, resolved_port, resolved_token, runtime_file, socket=local)
