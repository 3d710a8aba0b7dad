"""What a call's caller is told: who called (:class:`CallerInfo`) and how it ended (:class:`CallOutcome`).

Theory of operation
-------------------
Every tool call, whichever door it came in by, ends as one :class:`CallOutcome`, delivered
once to its caller by the router (``broker.core.router``). The correlation map, the call log,
the MCP results and the uplink all read it; they import it from here, a leaf module, so none
of them needs the router to describe a call. :func:`format_seconds` and :func:`seconds_to_ms`
are the two ways a duration leaves the daemon: in a message for people and models, and in
the wire's ``timeoutMs``.

:class:`OutcomeKind` is the one list of the ways a call can end, with what each one means
elsewhere (the audit event, whether an app may report it, whether its message is free of
argument values). It is a ``StrEnum``: a kind is its string (``"ok"``), so the call log's
``error_kind`` column, the audit lines and MCP's ``_meta["toolbridge/errorKind"]`` carry the
same text as before the enum.
"""

from __future__ import annotations

import enum
import math
from typing import Final

import attrs

from app_client.protocol import ToolResult

__all__ = ["CallOutcome", "CallerInfo", "OutcomeKind", "format_seconds", "seconds_to_ms"]


class OutcomeKind(enum.StrEnum):
    """How a call ended. The value is the string the wire, the logs and the call log carry."""

    OK = "ok"
    UNKNOWN_TOOL = "unknown_tool"
    INVALID_ARGUMENTS = "invalid_arguments"
    GUARD_REJECTED = "guard_rejected"
    BUSY = "busy"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    APP_DISCONNECTED = "app_disconnected"
    APP_ERROR = "app_error"
    INTERNAL_ERROR = "internal_error"
    SHUTDOWN = "shutdown"

    @property
    def audit_event(self) -> str:
        """The audit log's event name for a call that ended so."""
        return _AUDIT_EVENTS.get(self, "tool_execution_error")

    @property
    def app_reportable(self) -> bool:
        """Whether an app's ``toolResponse`` may report this kind in ``errorKind`` (anything else,
        and no kind at all, is ``app_error``). ``unknown_tool`` may not: the tool was found here."""
        return self in _APP_REPORTABLE

    @property
    def value_free(self) -> bool:
        """Whether the daemon composes this kind's message from tool names, paths, kinds and
        numbers, never from an argument value or an app's text: a redacted call-log row keeps
        such messages (they say why a call failed) when the outcome carries no app result.
        Every other message, ``invalid_arguments`` (schema errors quote the value) and
        ``app_error`` included, is redacted; a kind added later is redacted until it is listed."""
        return self in _VALUE_FREE


_AUDIT_EVENTS: Final[dict[OutcomeKind, str]] = {
    OutcomeKind.OK: "tool_executed",
    OutcomeKind.UNKNOWN_TOOL: "unknown_tool",
    OutcomeKind.INVALID_ARGUMENTS: "tool_arg_validation_failure",
    OutcomeKind.GUARD_REJECTED: "tool_guard_rejected",
    OutcomeKind.TIMEOUT: "tool_timeout",
    OutcomeKind.CANCELLED: "tool_cancelled",
}
_APP_REPORTABLE: Final = frozenset({
    OutcomeKind.INVALID_ARGUMENTS, OutcomeKind.GUARD_REJECTED, OutcomeKind.BUSY, OutcomeKind.TIMEOUT,
    OutcomeKind.CANCELLED, OutcomeKind.APP_DISCONNECTED, OutcomeKind.INTERNAL_ERROR, OutcomeKind.SHUTDOWN,
})
_VALUE_FREE: Final = frozenset({
    OutcomeKind.TIMEOUT, OutcomeKind.CANCELLED, OutcomeKind.BUSY, OutcomeKind.APP_DISCONNECTED,
    OutcomeKind.SHUTDOWN, OutcomeKind.INTERNAL_ERROR, OutcomeKind.UNKNOWN_TOOL, OutcomeKind.GUARD_REJECTED,
})


def _to_kind(kind: str) -> OutcomeKind:
    """``CallOutcome.kind`` from a member or its string (ValueError for any other string)."""
    return kind if type(kind) is OutcomeKind else OutcomeKind(kind)


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
    kind: OutcomeKind = attrs.field(converter=_to_kind)
    message: str = ""
    result: ToolResult | None = None
    retry_after_ms: int | None = None
    correlation_id: int | None = None
    #: What the daemon's log shows instead of ``message`` when that may quote argument values.
    log_message: str | None = None

    @property
    def is_error(self) -> bool:
        return self.kind is not OutcomeKind.OK


def format_seconds(seconds: float) -> str:
    return f"{seconds:.3g} s" if seconds < 10 else f"{round(seconds)} s"


def seconds_to_ms(seconds: float) -> int:
    """A duration as the wire's whole milliseconds, rounded up and at least 1."""
    return max(1, math.ceil(seconds * 1000))
