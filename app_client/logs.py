"""app_client's loggers: structlog's, but never on standard output.

Theory of operation
-------------------
The library logs, the application configures (structlog's own advice): app_client never calls
``structlog.configure``. A host that never configures structlog gets structlog's defaults,
whose ``PrintLogger`` writes to **stdout** — and a program's stdout is often not ours to
write: an MCP server speaking stdio, a tool whose output is piped, Blender's or LibreOffice's
console. So :func:`get_logger` returns a small proxy that decides at each call: once the host
has configured structlog (``structlog.is_configured()``), messages go wherever it said;
until then they go to **stderr**, formatted by structlog's default processors.

They reach stderr through :data:`_STDERR`, which looks ``sys.stderr`` up at each write: a host
may replace ``sys.stderr`` at any time (FreeCAD puts its report view there), and its object
need not take a weak reference, which structlog's ``PrintLogger`` makes of its file (one
lock per file) — FreeCAD's does not, and logging raised ``TypeError``.
"""

from __future__ import annotations

import sys
from typing import Any

import structlog

__all__ = ["get_logger"]


class _StderrForwarder:
    """Whatever ``sys.stderr`` is at the moment of each write (see the module docstring)."""

    def write(self, text: str) -> int:
        stream = sys.stderr
        if stream is None:  # pythonw, or a host that closed it: nowhere to log
            return len(text)
        return stream.write(text) or 0

    def flush(self) -> None:
        stream = sys.stderr
        if stream is not None:
            stream.flush()


_STDERR = _StderrForwarder()


class _Logger:
    """A structlog logger resolved at each call (see the module docstring)."""

    __slots__ = ("_context", "_name")

    def __init__(self, name: str, context: dict[str, Any] | None = None) -> None:
        self._name = name
        self._context = context or {}

    def _resolve(self) -> Any:
        if structlog.is_configured():
            logger = structlog.get_logger(self._name)
        else:
            logger = structlog.wrap_logger(structlog.PrintLogger(_STDERR))  # type: ignore[arg-type]
        return logger.bind(**self._context) if self._context else logger

    def bind(self, **values: Any) -> _Logger:
        return _Logger(self._name, {**self._context, **values})

    def __getattr__(self, method: str) -> Any:
        return getattr(self._resolve(), method)


def get_logger(name: str) -> Any:
    """The logger app_client's module ``name`` logs through: the host's structlog set-up once
    it made one, stderr before that (never stdout)."""
    return _Logger(name)
