"""TLS for the daemon's listeners, and the rule for listening beyond the loopback interface.

Theory of operation
-------------------
``tls_cert`` / ``tls_key`` (``--tls-cert`` / ``--tls-key``: PEM files, the certificate file
may hold the chain) turn on TLS for both listeners: the app port (apps, uplinks of other
brokers, ``toolbridge stdio``, the CLI) is wrapped in :class:`trio.SSLListener`, and the MCP
HTTP port is served as HTTPS (``broker.mcp.http_server``, HTTP/1.1). The handshake happens on a connection's first
read, inside the register deadline, so a peer that never finishes it is dropped like one
that never registers; a peer that speaks plain TCP to a TLS port just fails its handshake.
``runtime.json`` then says ``"tls": true`` and names the certificate, so local clients
connect by pinning it (see :mod:`app_client.tls`).

:func:`check_exposure`: a non-loopback ``host`` needs ``allow_remote`` (checked by the
daemon: "I mean a non-loopback address") and either TLS or ``allow_insecure_remote``, which
is logged as a warning at every start: tokens and calls would cross the network in clear.
"""

from __future__ import annotations

import os
import ssl
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
import trio

from ..errors import ConfigError, StartupError

if TYPE_CHECKING:
    from .settings import Settings

log = structlog.get_logger("toolbridge.tls")

__all__ = ["check_exposure", "open_runtime_stream", "server_context"]


def server_context(settings: Settings) -> ssl.SSLContext | None:
    """The server's SSL context, or None without TLS. Raises ConfigError, StartupError."""
    cert, key = settings.tls_cert, settings.tls_key
    if not cert and not key:
        return None
    if not cert or not key:
        raise ConfigError("TLS needs both tls_cert and tls_key (--tls-cert and --tls-key)")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(certfile=os.path.expanduser(cert), keyfile=os.path.expanduser(key))
    except (OSError, ssl.SSLError) as exc:
        raise StartupError(f"cannot load the TLS certificate {cert} and key {key}: {exc}") from None
    return context


def check_exposure(settings: Settings, tls: ssl.SSLContext | None, loopback: bool) -> None:
    """Refuse a non-loopback bind without TLS unless explicitly allowed. Raises StartupError."""
    if loopback or tls is not None:
        return
    if not settings.allow_insecure_remote:
        raise StartupError(
            f"refusing to listen on {settings.host} without TLS: tokens and calls would cross the "
            "network in clear. Pass --tls-cert and --tls-key (see docs/federation.md), or "
            "--allow-insecure-remote if the network itself is private."
        )
    log.warning(
        "insecure_remote_listener",
        host=settings.host,
        warning="NO TLS on a non-loopback address: tokens and calls cross the network in clear",
    )


async def open_runtime_stream(info: dict[str, Any], host: str) -> trio.abc.Stream:
    """Connect to the daemon described by ``runtime.json`` contents ``info`` (TLS if it says so).

    For toolbridge's own local clients: the daemon's Unix socket first when it names one
    (``socket``), else TCP, where a TLS daemon's certificate is pinned (``tlsCert``).
    Raises OSError when the port does not answer.
    """
    from app_client.discovery import DaemonAddress
    from app_client.transport import connect_daemon

    cert, local = info.get("tlsCert"), info.get("socket")
    address = DaemonAddress(
        host, int(info["port"]), "", tls=info.get("tls") is True,
        tls_pin=Path(cert) if isinstance(cert, str) and cert else None,
        socket=Path(local) if isinstance(local, str) and local else None,
    )
    return await connect_daemon(address)
