"""Apps' log messages (protocol v2, section 12): levels, the per-app flood bound, who hears them.

Theory of operation
-------------------
An app sends ``log`` messages (a level, an optional logger name, any JSON ``data``). Its link
hands each one to :meth:`AppLogHub.admit` first, which bounds what one app connection can
make the daemon do: ``data`` of at most ``MAX_LOG_DATA_BYTES`` (as JSON), and a token bucket
per link (``burst`` messages at once, ``rate`` per second after that). Anything else is
dropped and counted, with a warning in the daemon's log at most once per ``warn_interval``
per link — counts and levels only: log data may hold the user's data and never enters the
daemon's own log (SECURITY.md). Admitting is O(1) and never waits, so a flood costs the
daemon one decode and one bucket check per line and cannot stall its loop or other apps.

An admitted message is an :class:`AppLogRecord`. The link sends it either to the one agent
request it belongs to (the app's ``correlationId`` names one of its invocations in flight:
only the request that made that call hears it) or, without a ``correlationId``, to every
listener of :meth:`AppLogHub.broadcast` — the handshake-era MCP sessions that asked for log
messages with ``logging/setLevel`` (held weakly, like the resource directory's listeners).
Which level a listener wants, and how the notification is worded for its agent, is the MCP
session's business (``broker.mcp.session``); the record encodes each wording once however
many sessions receive it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, Final

import attrs
import msgspec
import structlog
import trio

from app_client.protocol import LOG_LEVELS, MAX_LOG_DATA_BYTES

__all__ = ["LEVEL_RANK", "LOG_BURST", "LOG_RATE", "AppLogHub", "AppLogRecord", "wants"]

log = structlog.get_logger("toolbridge.applog")

#: Each level's severity, least severe (``debug``) first: a listener at level L hears rank >= L's.
LEVEL_RANK: Final = {name: rank for rank, name in enumerate(LOG_LEVELS)}
#: Log messages one app connection may send at once ...
LOG_BURST: Final = 100
#: ... and per second after that; more are dropped (and counted).
LOG_RATE: Final = 20.0
#: At most one "dropped" warning per link per this many seconds.
WARN_INTERVAL: Final = 10.0


def wants(level: str | None, record: AppLogRecord) -> bool:
    """Whether a listener that asked for ``level`` (None: nothing) hears ``record``."""
    return level is not None and record.rank >= LEVEL_RANK[level]


@attrs.define(eq=False)
class AppLogRecord:
    """One admitted log message of the app with label ``label``."""

    label: str
    level: str
    logger: str | None
    #: The app's JSON, forwarded as it came (never decoded, never logged).
    data: msgspec.Raw
    _encoded: dict[bool, bytes] = attrs.field(factory=dict, init=False)

    @property
    def rank(self) -> int:
        return LEVEL_RANK[self.level]

    def params(self, *, own_names: bool) -> dict[str, Any]:
        """``notifications/message`` params. The logger is prefixed with the app's label
        (``Notes.sync``, or just ``Notes``) so an agent knows the source; ``own_names`` (a
        one-app scope, whose agent knows it) keeps the app's own logger name."""
        logger = self.logger if own_names else (f"{self.label}.{self.logger}" if self.logger else self.label)
        params: dict[str, Any] = {"level": self.level, "data": self.data}
        if logger:
            params["logger"] = logger
        return params

    def encoded(self, *, own_names: bool, encode: Callable[[dict[str, Any]], bytes]) -> bytes:
        """The notification as ``encode`` makes it from :meth:`params`, made once per wording."""
        data = self._encoded.get(own_names)
        if data is None:
            data = self._encoded[own_names] = encode(self.params(own_names=own_names))
        return data


@attrs.define
class _Bucket:
    tokens: float
    stamp: float
    #: Dropped since the last warning (reported with the next one).
    dropped: int = 0
    next_warning: float = 0.0


class AppLogHub:
    """The flood bound per app link and the listeners of app-wide log messages (module docstring)."""

    def __init__(self, *, rate: float = LOG_RATE, burst: int = LOG_BURST,
                 max_data_bytes: int = MAX_LOG_DATA_BYTES, warn_interval: float = WARN_INTERVAL) -> None:
        self.rate = rate
        self.burst = burst
        self.max_data_bytes = max_data_bytes
        self.warn_interval = warn_interval
        #: Per link (weakly: a link's bucket goes with it).
        self._buckets: weakref.WeakKeyDictionary[object, _Bucket] = weakref.WeakKeyDictionary()
        self._listeners: list[weakref.WeakMethod[Callable[[AppLogRecord], None]]] = []
        #: Messages dropped since the daemon started (too many, too large).
        self.dropped = 0

    def admit(self, link: object, label: str, level: str, data_bytes: int) -> bool:
        """Whether ``link``'s message may go on: within the size bound and the link's rate."""
        now = trio.current_time()
        bucket = self._buckets.get(link)
        if bucket is None:
            bucket = self._buckets[link] = _Bucket(tokens=float(self.burst), stamp=now)
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.stamp) * self.rate)
        bucket.stamp = now
        if data_bytes > self.max_data_bytes:
            reason = "too_large"
        elif bucket.tokens < 1:
            reason = "rate"
        else:
            bucket.tokens -= 1
            return True
        self.dropped += 1
        bucket.dropped += 1
        if now >= bucket.next_warning:
            # Counts only, never the data: it may hold the user's data (SECURITY.md).
            log.warning("app_log_dropped", app=label, reason=reason, level=level, dropped=bucket.dropped,
                        data_bytes=data_bytes, limit_bytes=self.max_data_bytes, burst=self.burst,
                        per_second=self.rate)
            bucket.dropped = 0
            bucket.next_warning = now + self.warn_interval
        return False

    def on_message(self, listener: Callable[[AppLogRecord], None]) -> None:
        """Call the bound method ``listener(record)`` for each app-wide message (held weakly)."""
        self._listeners.append(weakref.WeakMethod(listener))

    def broadcast(self, record: AppLogRecord) -> None:
        """An app-wide message (no ``correlationId``): every listener hears it (and filters)."""
        alive = []
        for ref in self._listeners:
            listener = ref()
            if listener is not None:
                alive.append(ref)
                listener(record)
        self._listeners = alive
