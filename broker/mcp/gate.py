"""The gate in front of MCP over HTTP: which Host, Origin and Accept values are acceptable.

Theory of operation
-------------------
A local daemon's HTTP port is reachable from any web page the user opens, through DNS
rebinding (a hostile name that resolves to 127.0.0.1) or a plain cross-origin request. Two
checks close that door before the token is even looked at: the ``Host`` header must name the
loopback (``localhost``, ``127.0.0.1``, ``[::1]``, any port) or a configured name, and an
``Origin`` header, when a browser sends one, must be a loopback origin or a configured one.
Pure functions; :mod:`broker.mcp.http` turns a refusal into 421 / 403.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from typing import Final

__all__ = ["Headers", "host_allowed", "origin_allowed", "media_types", "accepts"]

_LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})
#: An origin's host[:port]: a name or IPv4 address, or a bracketed IPv6 address; no user info.
_ORIGIN_NETLOC: Final = re.compile(r"^(?:\[[0-9A-Fa-f:.]+\]|[^\[\]@/:]+)(?::[0-9]+)?$")


# --- the gate ------------------------------------------------------------------------------


def _split_host(value: str) -> tuple[str, str]:
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return value, ""
        return value[: end + 1], value[end + 2 :] if value[end + 1 : end + 2] == ":" else value[end + 1 :]
    name, sep, port = value.rpartition(":")
    return (name, port) if sep else (value, "")


def _is_loopback_name(name: str) -> bool:
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def host_allowed(host: str | None, allowed: tuple[str, ...] = ()) -> bool:
    """Whether a ``Host`` header names this machine's loopback (or a configured name)."""
    if not host:
        return False
    value = host.strip().lower()
    extra = {a.lower() for a in allowed}
    if value in extra:
        return True
    name, port = _split_host(value)
    if port and not port.isdigit():
        return False
    return _is_loopback_name(name) or name in extra


def origin_allowed(origin: str | None, allowed: tuple[str, ...] = ()) -> bool:
    """Whether an ``Origin`` header may talk to us: absent, loopback, or configured."""
    if origin is None:
        return True
    value = origin.strip()
    if value in allowed:
        return True
    try:
        parts = urllib.parse.urlsplit(value)
        hostname = parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        return False
    if not _ORIGIN_NETLOC.match(parts.netloc) or parts.path or parts.query or parts.fragment:
        return False  # not an origin a browser sends (urlsplit would read "[::1].evil" as ::1)
    return parts.scheme in ("http", "https") and hostname is not None and _is_loopback_name(hostname)


class Headers:
    """An ASGI header list, looked up by lowercase name (repeated headers are counted)."""

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self._values: dict[str, list[str]] = {}
        for name, value in raw:
            self._values.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))

    def get(self, name: str) -> str | None:
        values = self._values.get(name)
        return values[0] if values else None

    def count(self, name: str) -> int:
        return len(self._values.get(name, ()))


def media_types(value: str | None) -> set[str]:
    """The media types of a Content-Type or Accept value, parameters dropped."""
    if not value:
        return set()
    return {part.split(";", 1)[0].strip().lower() for part in value.split(",")}


def accepts(value: str | None) -> tuple[bool, bool]:
    """Whether an Accept value admits ``(application/json, text/event-stream)``."""
    types = media_types(value)
    anything = "*/*" in types
    return (
        anything or "application/json" in types or "application/*" in types,
        anything or "text/event-stream" in types or "text/*" in types,
    )
