"""What a call's caller is told: who called (:class:`CallerInfo`) and how it ended (:class:`CallOutcome`).

Theory of operation
-------------------
Every tool call, whichever door it came in by, ends as one :class:`CallOutcome`, delivered
once to its caller by the router (``broker.core.router``). The correlation map, the call log,
the MCP results and the uplink all read it; they import it from here, a leaf module, so none
of them needs the router to describe a call. :func:`format_seconds` and :func:`seconds_to_ms`
are the two ways a duration leaves the daemon: in a message for people and models, and in
the wire's ``timeoutMs``.
"""

from __future__ import annotations

import math

import attrs

from app_client.wire import ToolResult

__all__ = ["CallOutcome", "CallerInfo", "format_seconds", "seconds_to_ms"]


@attrs.frozen
class CallerInfo:
    """Who is calling, for the audit trail and the call log."""

    client_name: str | None = None
    client_version: str | None = None
    session: str | None = None
    transport: str = "internal"

    @property
    def agent(self) -> str:
        if self.client_name is None:
            return "unknown"
        return f"{self.client_name}/{self.client_version}" if self.client_version else self.client_name


@attrs.frozen
class CallOutcome:
    kind: str
    message: str = ""
    result: ToolResult | None = None
    retry_after_ms: int | None = None
    correlation_id: int | None = None
    #: What the daemon's log shows instead of ``message`` when that may quote argument values.
    log_message: str | None = None

    @property
    def is_error(self) -> bool:
        return self.kind != "ok"


def format_seconds(seconds: float) -> str:
    return f"{seconds:.3g} s" if seconds < 10 else f"{round(seconds)} s"


def seconds_to_ms(seconds: float) -> int:
    """A duration as the wire's whole milliseconds, rounded up and at least 1."""
    return max(1, math.ceil(seconds * 1000))
