"""Log messages an app sends to agents (wire protocol v2, section 12), and a ``logging`` adapter.

Theory of operation
-------------------
:meth:`App.log <app_client.App.log>` (app-wide) and :meth:`ToolContext.log
<app_client.ToolContext.log>` (tied to one call: only the agent request that made it hears
it) build a :class:`~app_client.protocol.LogMessage` with :func:`log_message`: the level must be
one of MCP's eight (a ``ValueError`` otherwise: a programming error), ``data`` is any value
JSON can hold (other objects become their ``str``), and data over the protocol's 64 KiB is cut
(a string) or replaced by a short note (anything else), so the broker never has to drop it.
The session then queues it without ever waiting (:class:`LogBucket` keeps the app within the
broker's rate, so a chatty app does not spend its link on messages the broker would drop).
None of this logs the data itself.

:class:`AgentLogHandler` is a :class:`logging.Handler` that passes records on with
:meth:`App.log`: ``logging.getLogger("myapp").addHandler(AgentLogHandler(app))``. A record
logged while one is being passed on (say, by a library the sending path uses) is skipped, so
the handler can never recurse.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Final, Protocol, cast

import attrs
import msgspec
import trio

from .protocol import LOG_LEVELS, MAX_LOG_DATA_BYTES, LogLevel, LogMessage


class _Sends(Protocol):
    """What :class:`AgentLogHandler` needs of an :class:`~app_client.App`: its ``log``."""

    def log(self, level: str, data: Any, logger: str | None = None) -> None: ...

__all__ = ["LOG_BURST", "LOG_RATE", "AgentLogHandler", "LogBucket", "log_message"]

#: What the broker forwards per app connection (protocol.md section 12): a burst ...
LOG_BURST: Final = 100
#: ... then this many per second.
LOG_RATE: Final = 20.0
_LOGGER_CHARS: Final = 128
_encoder: Final = msgspec.json.Encoder(enc_hook=str)


def log_message(level: str, data: Any, logger: str | None = None, correlation_id: int | None = None) -> LogMessage:
    """A ``log`` message within the protocol's bounds (see the module docstring).

    Raises ValueError for a level that is not one of ``debug``, ``info``, ``notice``,
    ``warning``, ``error``, ``critical``, ``alert``, ``emergency``.
    """
    if level not in LOG_LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(LOG_LEVELS)} (MCP's levels)")
    encoded = _encoder.encode(data)
    if len(encoded) > MAX_LOG_DATA_BYTES:
        encoded = _shortened(data, len(encoded))
    name = logger[:_LOGGER_CHARS] if isinstance(logger, str) and logger else None
    return LogMessage(cast(LogLevel, level), msgspec.Raw(encoded), logger=name, correlation_id=correlation_id)


def _shortened(data: Any, size: int) -> bytes:
    """Data within the bound: a string cut (and marked), anything else replaced by a note."""
    note = f" [... cut: the log data was {size} bytes, over the {MAX_LOG_DATA_BYTES}-byte limit]"
    if isinstance(data, str):
        keep = MAX_LOG_DATA_BYTES // 2
        while True:  # escapes can make the JSON up to six times the characters: shrink until it fits
            encoded = _encoder.encode(data[:keep] + note)
            if len(encoded) <= MAX_LOG_DATA_BYTES:
                return encoded
            keep //= 2
    return _encoder.encode(f"[log data of {size} bytes omitted: over the {MAX_LOG_DATA_BYTES}-byte limit]")


@attrs.define
class LogBucket:
    """The broker's flood bound, applied before sending (``burst`` at once, ``rate`` per second)."""

    burst: int = LOG_BURST
    rate: float = LOG_RATE
    tokens: float = float(LOG_BURST)
    stamp: float | None = None
    #: Messages this side dropped (over the rate, or the outgoing queue was full).
    dropped: int = 0

    def take(self) -> bool:
        """Whether one more message may go now (trio thread: uses trio's clock)."""
        now = trio.current_time()
        if self.stamp is not None:
            self.tokens = min(float(self.burst), self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens < 1:
            self.dropped += 1
            return False
        self.tokens -= 1
        return True


def level_of(levelno: int) -> str:
    """The MCP level of a :mod:`logging` level number."""
    if levelno >= logging.CRITICAL:
        return "critical"
    if levelno >= logging.ERROR:
        return "error"
    if levelno >= logging.WARNING:
        return "warning"
    if levelno >= logging.INFO:
        return "info"
    return "debug"


class AgentLogHandler(logging.Handler):
    """A :class:`logging.Handler` that sends each record to agents with :meth:`App.log`.

    The record's logger name becomes the message's logger and its formatted text the data;
    ``logging`` levels map to MCP's (``CRITICAL`` → ``critical``, ``ERROR`` → ``error``,
    ``WARNING`` → ``warning``, ``INFO`` → ``info``, below → ``debug``). Safe from any thread;
    never blocks; does nothing while the app is not connected.
    """

    def __init__(self, app: _Sends, level: int = logging.NOTSET) -> None:
        super().__init__(level)
        self._app = app
        self._busy = threading.local()

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(self._busy, "active", False):
            return  # logged while passing a record on: never recurse
        self._busy.active = True
        try:
            self._app.log(level_of(record.levelno), self.format(record), logger=record.name)
        except Exception:
            self.handleError(record)
        finally:
            self._busy.active = False
