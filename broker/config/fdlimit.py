"""The process's file-descriptor limit: raised at daemon start, and what the HTTP port may use of it.

Theory of operation
-------------------
Every connection is a descriptor. Many systems start programs with a soft limit of 1,024
(far below the hard limit, often 500,000 or more), and a flood of HTTP connections that never
finish their head used all of it: accepting on the Unix socket then failed (``EMFILE``), so app
registrations and ``toolbridge status`` waited until the flood timed out. So the daemon raises
its soft limit to the hard one (:func:`raise_descriptor_limit`, at most :data:`WANTED`) at
start, and the HTTP server takes at most :func:`http_connection_cap` of what it got, keeping
the rest for app links, the admin socket, NATS, the call log and the logs.

Portable: where there is no ``resource`` module (Windows, whose C runtime and sockets have no
such per-process limit) both functions report None and change nothing.
"""

from __future__ import annotations

from typing import Final

import structlog

try:
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]

__all__ = ["WANTED", "MAX_HTTP_CONNECTIONS", "descriptor_limit", "http_connection_cap", "raise_descriptor_limit"]

log = structlog.get_logger("toolbridge.daemon")

#: The soft limit the daemon asks for (or the hard limit, when lower): plenty for a local daemon.
WANTED: Final = 65536
#: HTTP connections open at once, at most, however high the limit: MCP clients hold a few each.
MAX_HTTP_CONNECTIONS: Final = 1024
#: macOS refuses a soft limit over OPEN_MAX (10,240) even when the hard limit is "unlimited".
_MACOS_OPEN_MAX: Final = 10240


def descriptor_limit() -> int | None:
    """The soft limit on open descriptors; None where there is none to read (Windows)."""
    if resource is None:
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def raise_descriptor_limit() -> int | None:
    """Raise the soft limit towards the hard one (at most :data:`WANTED`); the soft limit now in
    force (None where there is none). Never lowers it; a refusal leaves it as it was."""
    if resource is None:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    target = WANTED if hard == resource.RLIM_INFINITY else min(int(hard), WANTED)
    for candidate in (target, min(target, _MACOS_OPEN_MAX)):
        if candidate <= soft:
            break
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (candidate, hard))
        except (ValueError, OSError):
            continue
        log.debug("descriptor_limit_raised", before=int(soft), now=candidate, hard=None if hard == resource.RLIM_INFINITY
                  else int(hard))
        return candidate
    return int(soft)


def http_connection_cap(limit: int | None) -> int:
    """How many HTTP connections may be open at once under the descriptor ``limit``: half of
    it (the other half stays for everything else), at most :data:`MAX_HTTP_CONNECTIONS`, at
    least 16."""
    if limit is None:
        return MAX_HTTP_CONNECTIONS
    return max(16, min(MAX_HTTP_CONNECTIONS, limit // 2))
