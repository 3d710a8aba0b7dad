"""MCP protocol constants and the per-request envelope of the 2026-07-28 revision.

Theory of operation
-------------------
toolbridge serves both protocol eras (see MCP-NOTES.md): the handshake era, where a session
starts with ``initialize`` and the negotiated version holds for the session, and the modern
era (2026-07-28), where every request carries its version, client capabilities and client
info in ``params._meta``. The era is decided per request: a request whose ``_meta`` names a
protocol version is modern (:func:`modern_version_of`); anything else belongs to the
handshake session. :func:`read_envelope` checks a modern request's envelope in the order
the SDK's own server does (shape -> version), so clients get the same answers from us.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from app_client.protocol import LOG_LEVELS

from .jsonrpc import INVALID_PARAMS, UNSUPPORTED_PROTOCOL_VERSION, RpcError

__all__ = [
    "HANDSHAKE_VERSIONS",
    "MODERN_VERSIONS",
    "SUPPORTED_VERSIONS",
    "LATEST_HANDSHAKE_VERSION",
    "PROTOCOL_VERSION_KEY",
    "CLIENT_INFO_KEY",
    "CLIENT_CAPABILITIES_KEY",
    "SERVER_INFO_KEY",
    "SUBSCRIPTION_ID_KEY",
    "Envelope",
    "modern_version_of",
    "read_envelope",
    "negotiate_handshake",
    "progress_token_of",
    "timeout_of",
    "TIMEOUT_KEY",
    "client_identity",
    "LOG_LEVEL_KEY",
    "log_level_of",
]

#: Oldest first, like the SDK's registry.
HANDSHAKE_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS: Final = ("2026-07-28",)
LATEST_HANDSHAKE_VERSION: Final = HANDSHAKE_VERSIONS[-1]
#: Newest first: what ``server/discover`` and -32022 errors advertise.
SUPPORTED_VERSIONS: Final = (*reversed(MODERN_VERSIONS), *reversed(HANDSHAKE_VERSIONS))

PROTOCOL_VERSION_KEY: Final = "io.modelcontextprotocol/protocolVersion"
CLIENT_INFO_KEY: Final = "io.modelcontextprotocol/clientInfo"
CLIENT_CAPABILITIES_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_KEY: Final = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_ID_KEY: Final = "io.modelcontextprotocol/subscriptionId"


@attrs.frozen
class Envelope:
    """The per-request fields of a modern request."""

    protocol_version: str
    client_capabilities: Any
    client_info: dict[str, Any] | None = None


def _meta_of(params: dict[str, Any]) -> dict[str, Any] | None:
    meta = params.get("_meta")
    return meta if isinstance(meta, dict) else None


def modern_version_of(params: dict[str, Any]) -> Any:
    """The protocol version a request's ``_meta`` declares (None: a handshake-era request)."""
    meta = _meta_of(params)
    return None if meta is None else meta.get(PROTOCOL_VERSION_KEY)


def read_envelope(params: dict[str, Any], *, check_version: bool = True) -> Envelope:
    """Check a modern request's ``_meta``; raise the error the client should get.

    -32602 when ``_meta`` or one of its required keys is missing or has the wrong type;
    -32022 (with ``data.supported`` / ``data.requested``) when the version is not one we
    serve in the modern era. ``check_version=False`` stops after the shape check (HTTP runs
    its header check in between, as the specification orders it).
    """
    meta = _meta_of(params)
    if meta is None:
        raise RpcError(
            INVALID_PARAMS,
            f"params._meta must be an object carrying {PROTOCOL_VERSION_KEY!r} and "
            f"{CLIENT_CAPABILITIES_KEY!r} (protocol 2026-07-28), or send initialize first",
        )
    missing = [k for k in (PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY) if k not in meta]
    if missing:
        raise RpcError(
            INVALID_PARAMS, f"params._meta is missing the required key(s): {', '.join(missing)}"
        )
    version = meta[PROTOCOL_VERSION_KEY]
    if not isinstance(version, str):
        raise RpcError(INVALID_PARAMS, f"params._meta[{PROTOCOL_VERSION_KEY!r}] must be a string")
    capabilities = meta[CLIENT_CAPABILITIES_KEY]
    if not isinstance(capabilities, dict):
        raise RpcError(INVALID_PARAMS, f"params._meta[{CLIENT_CAPABILITIES_KEY!r}] must be an object")
    info = meta.get(CLIENT_INFO_KEY)
    if check_version:
        check_modern_version(version)
    return Envelope(version, capabilities, info if isinstance(info, dict) else None)


def check_modern_version(version: str) -> None:
    if version not in MODERN_VERSIONS:
        raise RpcError(
            UNSUPPORTED_PROTOCOL_VERSION,
            f"Unsupported protocol version {version!r}",
            {"supported": list(SUPPORTED_VERSIONS), "requested": version},
        )


def negotiate_handshake(requested: str) -> str:
    """The version to answer ``initialize`` with: the client's if we speak it, else our latest."""
    return requested if requested in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE_VERSION


def progress_token_of(params: dict[str, Any]) -> str | int | None:
    """The request's ``_meta.progressToken`` (a string or an integer), if it asked for progress."""
    meta = _meta_of(params)
    if meta is None:
        return None
    token = meta.get("progressToken")
    if isinstance(token, str) or (isinstance(token, int) and not isinstance(token, bool)):
        return token
    return None


#: toolbridge's own request ``_meta`` key: a deadline for this call, in milliseconds.
TIMEOUT_KEY: Final = "toolbridge/timeoutMs"


def timeout_of(params: dict[str, Any]) -> float | None:
    """The call deadline a request asks for (``_meta["toolbridge/timeoutMs"]``), in seconds."""
    meta = _meta_of(params)
    value = None if meta is None else meta.get(TIMEOUT_KEY)
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return value / 1000
    return None


#: MCP 2026-07-28 (server/utilities/logging, "Per-request log level"; schema.ts ``RequestMetaObject``):
#: a request opts in to ``notifications/message`` with this ``_meta`` key; it replaces the
#: handshake era's ``logging/setLevel`` (SEP-2575).
LOG_LEVEL_KEY: Final = "io.modelcontextprotocol/logLevel"


def log_level_of(params: dict[str, Any]) -> str | None:
    """A modern request's log level (``_meta["io.modelcontextprotocol/logLevel"]``), None if absent.

    The specification: without it the server MUST NOT send ``notifications/message`` for the
    request; a value that is not a log level SHOULD be refused with ``-32602`` (raised here).
    """
    meta = _meta_of(params)
    level = None if meta is None else meta.get(LOG_LEVEL_KEY)
    if level is None:
        return None
    if level not in LOG_LEVELS:
        raise RpcError(INVALID_PARAMS, f"Invalid params: _meta[{LOG_LEVEL_KEY!r}] must be one of "
                       f"{', '.join(LOG_LEVELS)}, not {str(level)[:40]!r}")
    return str(level)


def client_identity(info: Any) -> tuple[str | None, str | None]:
    """``(name, version)`` from a clientInfo object, tolerating junk."""
    if not isinstance(info, dict):
        return None, None
    name, version = info.get("name"), info.get("version")
    return (
        name[:200] if isinstance(name, str) else None,
        version[:100] if isinstance(version, str) else None,
    )
