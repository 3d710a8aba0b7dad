"""Opening the byte stream to the daemon: its Unix domain socket when it has one, else TCP.

Theory of operation
-------------------
A daemon on a platform with ``AF_UNIX`` (Linux, macOS, the BSDs) listens on a Unix domain
socket in its home directory besides its loopback TCP port, and names it in ``runtime.json``
(``"socket"``). The home directory is private to its user (0700), so no other user can even
connect to that socket: whatever they do to the TCP port (hold hundreds of idle connections,
reconnect in a loop), clients that come in through the socket are not affected.

:func:`~app_client.discovery.find_daemon` puts the socket's path in
:attr:`DaemonAddress.socket` only when the caller did not choose the address itself: no host
or port by argument or environment (``TOOLBRIDGE_HOST`` / ``TOOLBRIDGE_PORT``) and no TLS
asked for by argument or environment. :func:`connect_daemon` then tries the socket first and
falls back to TCP (:func:`connect_tcp`) when that fails — a daemon from before the socket, a
stale socket file, a platform without ``AF_UNIX``. The socket carries the same NDJSON
protocol and the token is still required; it is never TLS (the kernel carries the bytes
between two processes of the same user; the daemon's pinned certificate adds nothing there).

This is the one place that opens a stream to the daemon for apps (:class:`~app_client.App`'s
default connector), toolbridge's CLI and its ``toolbridge stdio`` relay.
"""

from __future__ import annotations

import socket
import ssl

import trio

from .discovery import DaemonAddress
from .logs import get_logger
from .tls import client_context

__all__ = ["HAS_UNIX_SOCKETS", "connect_daemon", "connect_tcp", "connect_unix", "describe", "is_unix_stream"]

#: Whether this Python can open Unix domain sockets (not on Windows' usual builds).
HAS_UNIX_SOCKETS = hasattr(socket, "AF_UNIX")

_log = get_logger(__name__)


async def connect_tcp(address: DaemonAddress, ssl_context: ssl.SSLContext | None = None) -> trio.abc.Stream:
    """Open a TCP connection to ``address`` (raises OSError if refused or unreachable).

    With ``ssl_context``, or when ``address.tls`` asks for it, the stream is TLS (see
    :mod:`app_client.tls`); the handshake, and so a certificate error (``ssl.SSLError``, an
    OSError), happens on the first send or receive.
    """
    if ssl_context is None and address.tls:
        ssl_context = client_context(address.tls_ca, pinned_cert=address.tls_pin)
    if ssl_context is None:
        return await trio.open_tcp_stream(address.host, address.port)
    return await trio.open_ssl_over_tcp_stream(address.host, address.port, ssl_context=ssl_context)


async def connect_unix(path: str) -> trio.abc.Stream:
    """Connect to the Unix domain socket at ``path``. Raises OSError (also where unsupported)."""
    if not HAS_UNIX_SOCKETS:
        raise OSError(f"Unix domain sockets are not available here (cannot connect to {path})")
    return await trio.open_unix_socket(path)


async def connect_daemon(address: DaemonAddress, ssl_context: ssl.SSLContext | None = None) -> trio.abc.Stream:
    """Open a stream to the daemon: its Unix socket if ``address.socket`` names one, else TCP.

    A socket that cannot be connected (gone, refused, unsupported) falls back to TCP; an
    explicit ``ssl_context`` means the caller wants TLS, which only TCP offers. Raises
    OSError when TCP fails too.
    """
    if address.socket is not None and ssl_context is None:
        try:
            return await connect_unix(str(address.socket))
        except OSError as exc:
            _log.debug("unix socket unavailable, using TCP", socket=str(address.socket), error=str(exc))
    return await connect_tcp(address, ssl_context)


def describe(address: DaemonAddress, stream: trio.abc.Stream) -> str:
    """Where ``stream`` (opened by :func:`connect_daemon`) leads, for log lines."""
    if address.socket is not None and is_unix_stream(stream):
        return str(address.socket)
    return f"{address.host}:{address.port}"


def is_unix_stream(stream: trio.abc.Stream) -> bool:
    """Whether ``stream`` is a Unix domain socket (either end)."""
    family = getattr(socket, "AF_UNIX", None)
    return family is not None and isinstance(stream, trio.SocketStream) and stream.socket.family == family
