"""What every part of an MCP session shares about one request: where its messages go
(:class:`Outbox`, the transport's), what is known of it (:class:`RequestContext`), and the
record of one running as a task (:class:`InFlight`). Below ``session`` and its families
(``session_tools``, ``session_resources``, ``session_logging``, ``session_watch``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Protocol

import attrs
import structlog
import trio

from ..core.outcome import CallOutcome, OutcomeKind

if TYPE_CHECKING:
    from ..core.router import Router

log = structlog.get_logger("toolbridge.mcp")

INTERNAL: Final = "toolbridge hit an internal error; the daemon log has the details"
SESSION_ENDED: Final = (
    "the MCP session ended before this request completed (the daemon is stopping or the session "
    "was closed); the call was cancelled at the app"
)

__all__ = ["Outbox", "RequestContext", "InFlight", "completed", "audit_request"]


class Outbox(Protocol):
    """Where the messages for one request (or one session) go; the transport implements it."""

    async def send(self, data: bytes, *, final: bool = False) -> None:
        """Send one encoded message, waiting for room; ``final`` marks the request's response.

        Never raises for a peer that went away (the message is dropped).
        """

    def send_nowait(self, data: bytes) -> bool:
        """Queue a notification if there is room right now; False if it was dropped."""

    def send_final_nowait(self, data: bytes) -> bool:
        """Queue a request's response without waiting; False if there is no room right now.

        A response is never dropped for want of room: on False the session sends it with
        :meth:`send` from a task. (A peer that went away counts as sent.)
        """

    def close(self) -> None:
        """No more messages for this request."""


@attrs.frozen
class RequestContext:
    """What a handler knows about the request besides its params."""

    modern: bool
    protocol_version: str | None
    client_name: str | None
    client_version: str | None
    progress_token: str | int | None = None
    #: 2026-07-28: the request's ``_meta`` log level (None: it wants no log messages).
    log_level: str | None = None
    #: 2026-07-28: the request's ``_meta`` client capabilities (elicitation looks at them).
    capabilities: Any = None


@attrs.define(eq=False)
class InFlight:
    """A request that runs as a task (``subscriptions/listen``, a semantic ``search_tools``)."""

    scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    #: The client cancelled it: no response.
    cancelled: bool = False
    #: The response is being sent: no more progress.
    done: bool = False

    def cancel(self) -> None:
        self.cancelled = True
        self.scope.cancel()


def completed(result: dict[str, Any], modern: bool) -> dict[str, Any]:
    """A ``tools/call`` result, with the 2026-07-28 era's ``resultType`` when ``modern``."""
    if modern:
        result["resultType"] = "complete"
    return result


class _AuditServer(Protocol):
    @property
    def router(self) -> Router: ...


class Audited(Protocol):
    """What :func:`audit_request` uses of a session."""

    @property
    def label(self) -> str | None: ...

    @property
    def server(self) -> _AuditServer: ...


class _Caller(Protocol):
    @property
    def client_name(self) -> str | None: ...


def audit_request(session: Audited, kind: str, arguments: dict[str, str], label: str, context: _Caller,
                   outcome: CallOutcome, started: float) -> None:
    """One log line and one call-log row (tool ``resource_read`` with the URI as its argument,
    ``prompt_get`` with the prompt's name, or ``completion`` with the prompt or template and the
    argument's name; a prompt's own arguments and a completion's value are not recorded)."""
    duration_ms = round((trio.current_time() - started) * 1000, 1)
    if outcome.kind is OutcomeKind.OK:
        log.info(kind, session=session.label, app=label, outcome="ok", duration_ms=duration_ms)
    else:  # not the message: an app's error may quote what it read
        log.warning(kind, session=session.label, app=label, outcome=outcome.kind.value, duration_ms=duration_ms)
    call_log = session.server.router.call_log
    if call_log is not None:
        call_log.record(tool=kind, app=label, instance=None, agent=context.client_name,
                        session=session.label, arguments=arguments, outcome=outcome, duration_ms=duration_ms)
