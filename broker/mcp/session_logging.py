"""The session's completions and the apps' log messages (apps' protocol v2, section 12).

``completion/complete`` runs as a task of the session like ``prompts/get``: the directory maps
its reference back to the owning app (``ResourceDirectory.resolve_completion``; in a one-app
scope only the instance it serves now), the app's link asks the app (an app that registered no
``completions`` is answered empty here), and a call-log row ``completion`` is written (the
prompt or template and the argument's name, never the value). Handshake era,
``logging/setLevel`` sets the session's level and from then on it hears the app-wide messages
(:func:`app_log`, on ``notify_outbox``); a call's own messages go on its stream
(``session_tools.ToolRequest.app_log``).
"""

from __future__ import annotations

from typing import Any, Final, Protocol

import trio

from app_client.protocol import LOG_LEVELS

from ..core.applog import AppLogRecord, wants
from ..core.outcome import CallOutcome, OutcomeKind
from ..core.resources import ResourceError
from . import protocol
from .jsonrpc import INVALID_PARAMS, Request, RpcError, encode_notification
from .request_context import InFlight, Outbox, RequestContext
from .scope import ScopedResources
from .request_context import audit_request
from .session_resources import ResourceSession

#: Default deadline of a ``completion/complete``: a user is typing (the ``_meta`` timeout wins).
COMPLETION_TIMEOUT: Final = 5.0


class LoggingSession(ResourceSession, Protocol):
    """What this module uses of ``session.Session`` (structural: ``session`` imports this one)."""

    log_level: str | None

    @property
    def app(self) -> str | None: ...

    @property
    def notify_outbox(self) -> Outbox | None: ...

    def hear_app_log(self, record: AppLogRecord) -> None: ...


async def complete(
    session: LoggingSession, request: Request, context: RequestContext, outbox: Outbox, entry: InFlight
) -> dict[str, Any]:
    """``completion/complete``: the reference mapped back to its app, then relayed to it."""
    params = request.params
    argument = params.get("argument")
    if not isinstance(argument, dict) or not isinstance(argument.get("name"), str) \
            or not isinstance(argument.get("value"), str):
        raise RpcError(INVALID_PARAMS, 'Invalid params: completion/complete needs "argument": '
                       '{"name": string, "value": string}')
    given = params.get("context")
    chosen = given.get("arguments") if isinstance(given, dict) else None
    chosen = {} if chosen is None else chosen
    if not isinstance(chosen, dict) or not all(isinstance(v, str) for v in chosen.values()):
        raise RpcError(INVALID_PARAMS, 'Invalid params: completion/complete "context.arguments" maps names '
                       "to strings")
    name: str = argument["name"]
    started = trio.current_time()
    label = "?"
    ref = params.get("ref")
    audited = {"ref": str(ref.get("name") or ref.get("uri"))[:256] if isinstance(ref, dict) else "?",
               "argument": name[:128]}  # never the value: it is what the user typed
    outcome = CallOutcome(OutcomeKind.CANCELLED, "cancelled by the agent")
    try:
        # A one-app scope: the instance it serves now (a restarted copy during the old one's grace).
        scope = session.resources.serving() if isinstance(session.resources, ScopedResources) else None
        target = session.server.registry.resources.resolve_completion(ref, scope)
        label = target.label
        known = target.check(name, argument["value"], chosen)
        if target.port.completions:
            timeout = protocol.timeout_of(params) or COMPLETION_TIMEOUT
            completion = await target.port.complete((target.kind, target.own), name, argument["value"], known,
                                                    timeout)
        else:  # the app offers no completions: nothing to suggest (MCP allows an empty answer)
            completion = {"values": [], "total": 0, "hasMore": False}
        outcome = CallOutcome(OutcomeKind.OK)
    except ResourceError as exc:
        outcome = CallOutcome(exc.kind, exc.message)
        raise RpcError(exc.code, exc.message) from None
    finally:
        audit_request(session, "completion", audited, label, context, outcome, started)
    result: dict[str, Any] = {"completion": completion}
    if context.modern:
        result.update(session.server._modern_fields(ttl=False))
    return result


def set_level(session: LoggingSession, request: Request, context: RequestContext) -> dict[str, Any]:
    """Handshake era ``logging/setLevel``: this session's level for the apps' log messages."""
    level = request.params.get("level")
    if level not in LOG_LEVELS:
        raise RpcError(INVALID_PARAMS, f'Invalid params: logging/setLevel "level" must be one of '
                       f"{', '.join(LOG_LEVELS)}")
    if session.log_level is None:  # from now on this session hears app-wide messages
        session.server.registry.app_logs.on_message(session.hear_app_log)
    session.log_level = str(level)
    return {}


def app_log(session: LoggingSession, record: AppLogRecord) -> None:
    """An app-wide log message: to this handshake-era session if it asked for the level (a
    one-app scope: only its app's)."""
    if isinstance(session.resources, ScopedResources) and record.label != session.resources.serving():
        return  # another app's (the scope follows its app to a restarted copy, as for tools)
    if wants(session.log_level, record) and session.notify_outbox is not None:
        session.notify_outbox.send_nowait(record.encoded(own_names=session.app is not None, encode=log_notification))


def log_notification(params: dict[str, Any]) -> bytes:
    return encode_notification("notifications/message", params)
