"""structlog configuration for the daemon and the CLI (libraries only call get_logger).

Console rendering on a TTY, one JSON object per line otherwise (or as chosen). Logs always go
to stderr: stdout belongs to MCP in ``toolbridge stdio`` and to results in the CLI.

The daemon logs a line per tool call (the audit trail), so its JSON lines are cheap:
rendered by msgspec, time-stamped from a cached second, and — with ``batched=True``, which
``toolbridge serve`` uses — written without a flush each: :func:`flush_periodically` flushes
every 50 ms, and a warning or worse is flushed at once. A daemon killed with SIGKILL can lose
the last 50 ms of info lines (the call log, SQLite, is the durable record).
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
import time
from typing import IO, Any, Final

import msgspec
import structlog

_encoder = msgspec.json.Encoder(enc_hook=str)


#: How long an info line may wait in the buffer before it is flushed.
FLUSH_INTERVAL: Final = 0.05
_MAX_BUFFERED_BYTES: Final = 256 * 1024


def _encode_json(event: Any, **_: Any) -> bytes:
    return _encoder.encode(event)


_second: tuple[int, str] = (0, "")


def _timestamp(logger: Any, method_name: str, event_dict: Any) -> Any:
    """structlog's ``TimeStamper(fmt="iso", utc=True)`` format, formatting each second once."""
    global _second
    now = time.time()
    whole = int(now)
    if whole != _second[0]:
        _second = (whole, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)))
    event_dict["timestamp"] = f"{_second[1]}.{int((now - whole) * 1_000_000):06d}Z"
    return event_dict


class BufferedLineLogger:
    """structlog logger: lines are kept until :func:`flush_periodically` writes them in one go
    (a warning or worse, or a full buffer, writes at once). Our own buffer, not the stream's:
    stderr may be unbuffered (``PYTHONUNBUFFERED``). The call-log thread logs too: a lock."""

    def __init__(self, file: IO[bytes]) -> None:
        self._file = file
        self._lines: list[bytes] = []
        self._size = 0
        self._lock = threading.Lock()

    @property
    def unflushed(self) -> bool:
        return bool(self._lines)

    def msg(self, message: bytes) -> None:
        with self._lock:
            self._lines.append(message)
            self._size += len(message)
            full = self._size >= _MAX_BUFFERED_BYTES
        if full:
            self.flush()

    def warning(self, message: bytes) -> None:
        self.msg(message)
        self.flush()

    def flush(self) -> None:
        with self._lock:
            lines, self._lines, self._size = self._lines, [], 0
            if not lines:
                return
            lines.append(b"")
            try:
                self._file.write(b"\n".join(lines))
                self._file.flush()
            except (OSError, ValueError):  # stderr closed or gone: nothing to keep logging to
                pass

    debug = info = msg
    warn = error = err = critical = exception = fatal = failure = warning


_batched: BufferedLineLogger | None = None
#: The batched logger when info lines are enabled: :func:`info_line` writes to it directly.
_info_sink: BufferedLineLogger | None = None


def info_line(event: str, fields: dict[str, Any]) -> bool:
    """Log an info line as the configured JSON chain renders it, byte for byte, without the chain.

    For the daemon's per-call audit line: structlog's bound logger and processors cost ~8 µs a
    line, this ~2.5 µs. Takes ownership of ``fields``. Returns False (and logs nothing) unless
    ``configure_logging`` set up batched JSON lines at info level; the caller then logs through
    structlog, so console output, other levels and ``capture_logs`` behave as usual.
    """
    sink = _info_sink
    if sink is None:
        return False
    fields["event"] = event
    fields["level"] = "info"
    sink.msg(_encode_json(_timestamp(None, "info", fields)))
    return True


async def flush_periodically() -> None:
    """Flush the batched log every ``FLUSH_INTERVAL`` while there is something to flush."""
    import trio

    try:
        while True:
            await trio.sleep(FLUSH_INTERVAL)
            if _batched is not None and _batched.unflushed:
                _batched.flush()
    finally:
        if _batched is not None:
            _batched.flush()


def configure_logging(log_format: str = "auto", level: str = "info", *, batched: bool = False) -> None:
    """``batched``: JSON lines are flushed by :func:`flush_periodically` (the daemon runs it)."""
    global _batched, _info_sink
    _batched = _info_sink = None
    if log_format == "auto":
        log_format = "console" if sys.stderr.isatty() else "json"
    renderer: structlog.typing.Processor
    logger_factory: Any
    if log_format == "console":
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
        logger_factory = structlog.PrintLoggerFactory(file=sys.stderr)
    else:
        # msgspec renders a call's audit line several times faster than the json module;
        # anything it cannot encode natively is logged by its str().
        stream = getattr(sys.stderr, "buffer", None)
        if stream is not None:
            renderer = structlog.processors.JSONRenderer(serializer=_encode_json)
            if batched:
                _batched = BufferedLineLogger(stream)
                atexit.register(_batched.flush)  # the lines logged after the daemon's last flush
                logger_factory = lambda *args: _batched  # noqa: E731
                if getattr(logging, level.upper()) <= logging.INFO:
                    _info_sink = _batched
            else:
                logger_factory = structlog.BytesLoggerFactory(file=stream)
        else:  # a replaced stderr with no byte stream under it
            renderer = structlog.processors.JSONRenderer(serializer=lambda e, **_: _encode_json(e).decode())
            logger_factory = structlog.PrintLoggerFactory(file=sys.stderr)
    # No merge_contextvars: nothing binds context variables, and info_line renders the chain.
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            _timestamp,
            structlog.processors.format_exc_info if log_format == "json" else structlog.dev.set_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=logger_factory,
        cache_logger_on_first_use=True,
    )


def app_text_for_log(text: str) -> str:
    """What the daemon's log says of an app's error text: its length, not the text, which may
    quote argument values (the agent gets the text; the call log keeps it unless redacted)."""
    return f"the app's error message ({len(text)} chars; not logged, it may quote arguments)"
