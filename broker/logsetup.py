"""structlog configuration for the daemon and the CLI (libraries only call get_logger).

Console rendering on a TTY, one JSON object per line otherwise (or as chosen). Logs always go
to stderr: stdout belongs to MCP in ``toolbridge stdio`` and to results in the CLI.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import msgspec
import structlog

_encoder = msgspec.json.Encoder(enc_hook=str)


def _encode_json(event: Any, **_: Any) -> bytes:
    return _encoder.encode(event)


def configure_logging(log_format: str = "auto", level: str = "info") -> None:
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
            logger_factory = structlog.BytesLoggerFactory(file=stream)
        else:  # a replaced stderr with no byte stream under it
            renderer = structlog.processors.JSONRenderer(serializer=lambda e, **_: _encode_json(e).decode())
            logger_factory = structlog.PrintLoggerFactory(file=sys.stderr)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info if log_format == "json" else structlog.dev.set_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=logger_factory,
        cache_logger_on_first_use=True,
    )
