"""The session's tools: ``tools/list`` and ``tools/call`` (app tools, the meta-tools, code mode).

A ``tools/call`` of an app tool runs without a task: :func:`start_tool_call` builds its origin,
a :class:`ToolRequest` (where and how to answer), and hands the call to the router; the router's
``Call`` record waits in ``Session.requests`` under the request id, and the router tells the
origin the outcome (:func:`tool_call_done` answers). In a one-app scope the name is the
app's own (:func:`start_scoped_call`). The ``search_tools`` meta-tool is answered at once
(or, with a semantic index in a worker thread, by a task); code mode's two tools are answered
by ``code`` in a task, so a cancellation reaches them. This is the hot path: one function call
from the dispatch, no task, no extra objects beyond the origin.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol

import attrs
import structlog
import trio

from ..core import elicitation as core_elicitation
from ..core.applog import AppLogRecord, wants
from ..core.calls import Call, DeadlineQueue
from ..core.elicitation import PendingElicitation
from ..core.outcome import CallerInfo, CallOutcome, OutcomeKind
from ..discovery import CALL_TOOL, SEARCH_TOOLS
from . import bigresults, elicitation, protocol
from .code import CODE_TOOL_NAMES, RUN_CODE, code_mode, code_tools
from .jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    SERVER_ERROR,
    Request,
    RequestId,
    RpcError,
    encode_error,
    encode_notification,
    encode_result,
)
from .meta import unknown_tool_result, unwrap_call
from .request_context import INTERNAL, SESSION_ENDED, InFlight, Outbox, RequestContext, completed
from .scope import unknown_tool_error
from .server import McpServer
from .results import call_result
from .session_logging import log_notification

log = structlog.get_logger("toolbridge.mcp")


class AnsweringSession(elicitation.Session, bigresults.LinkSession, Protocol):
    """What a :class:`ToolRequest` uses of ``session.Session``, itself and through ``elicitation``
    and ``bigresults`` (structural: ``session`` imports this module)."""

    @property
    def server(self) -> McpServer: ...

    @property
    def log_level(self) -> str | None: ...

    last_activity: float

    @property
    def requests(self) -> dict[RequestId, InFlight | Call]: ...


class ToolSession(AnsweringSession, Protocol):
    """What the handlers here use of ``session.Session``."""

    @property
    def code(self) -> bool: ...

    @property
    def discovery(self) -> bool: ...

    def run_task(self, handler: Callable[[Any, Request, RequestContext, Outbox, InFlight], Awaitable[dict[str, Any]]],
                 request: Request, context: RequestContext, outbox: Outbox, *, name: str) -> None: ...

    def caller(self, context: RequestContext) -> CallerInfo: ...

    def deadline_queue(self) -> DeadlineQueue: ...


#: Why a ``tools/call`` ends without a tool result (``ToolRequest.ending``).
CANCELLED: Final = "cancelled"  # by the client: it wants no answer
ENDED: Final = "session_ended"  # with its session: a best-effort error


@attrs.define(eq=False)
class ToolRequest:
    """A ``tools/call`` in flight, as MCP sees it: the origin of the router's :class:`Call`.

    There is no task. The :class:`Call` is the one record of the call (request id, correlation
    id, deadline) and is what ``Session.requests`` holds; this holds only what answering needs
    (where the answer goes and how) and is told the end by the router.
    """

    session: AnsweringSession
    modern: bool
    outbox: Outbox
    progress_token: str | int | None
    #: Reached through the ``call_tool`` meta-tool: an unknown name gets discovery's answer.
    via_meta: bool
    #: Set just before the session ends the call itself: ``CANCELLED`` or ``ENDED``.
    ending: str | None = None
    #: The name the agent called it by, when not the agent-facing one (a one-app scope).
    own_name: str | None = None
    #: 2026-07-28: the request's log level (handshake era: the session's, read when a message comes).
    log_level: str | None = None

    def app_log(self, record: AppLogRecord) -> None:
        """A log message the app tied to this call: on this request's stream, before its
        response, if the request (2026-07-28) or its session (handshake era) asked for its level."""
        if wants(self.log_level if self.modern else self.session.log_level, record):
            self.outbox.send_nowait(record.encoded(own_names=self.session.app is not None, encode=log_notification))

    #: 2026-07-28: the request's client capabilities (the handshake era's are the session's).
    capabilities: Any = None

    def call_elicit(self, call: Call, pending: PendingElicitation) -> None:
        """The app asks the user (``broker.core.elicitation``): ask this request's agent."""
        elicitation.ask(self, call, pending)

    #: 2026-07-28: answers the ``tools/call`` carried up front (``inputResponses``, by key).
    input_responses: dict[str, Any] | None = None
    #: Large results (``bigresults.prepare``): the call asked for its result inline rather than
    #: as a link.
    inline: bool = False

    def call_progress(self, call: Call, progress: float, total: float | None, message: str | None) -> None:
        note: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            note["total"] = total
        if message is not None:
            note["message"] = message
        self.outbox.send_nowait(encode_notification("notifications/progress", note))

    def call_done(self, call: Call, outcome: CallOutcome) -> None:
        assert call.request_id is not None
        core_elicitation.call_ended(call.elicitation)
        tool_call_done(self.session, call.request_id, self.own_name or call.name, self, outcome, call)


def up_front(context: RequestContext, params: dict[str, Any]) -> dict[str, Any] | None:
    """2026-07-28: a new ``tools/call``'s ``inputResponses`` (a copy: they are used up)."""
    responses = params.get("inputResponses") if context.modern else None
    return dict(responses) if isinstance(responses, dict) else None


def list_tools(session: ToolSession, request: Request, context: RequestContext) -> dict[str, Any]:
    if session.app is not None:
        return session.server.list_app_tools(session.app, request.params, modern=context.modern)
    if session.code:
        listed: dict[str, Any] = {"tools": code_tools()}
        if context.modern:  # the same fields as any modern tools/list
            listed.update(session.server._modern_fields(ttl=True))
        return listed
    return session.server.list_tools(request.params, modern=context.modern, discovery=session.discovery)


def start_tool_call(
    session: ToolSession, request: Request, context: RequestContext, outbox: Outbox
) -> dict[str, Any] | None:
    """Answer a meta-tool call at once (its result), or start an app tool's call or a
    semantic search (None: answered when done)."""
    params = request.params
    name = params.get("name")
    if not isinstance(name, str):
        raise RpcError(INVALID_PARAMS, 'Invalid params: tools/call needs a string "name"')
    arguments = params.get("arguments")
    if context.modern and "requestState" in params:
        # 2026-07-28: the retry of a call paused for an elicitation (``elicitation``). With
        # inputResponses but no requestState it is a new call, which asks again (mrtr).
        elicitation.resume(session, request, context, outbox, name)
        return None
    if session.app is not None:
        start_scoped_call(session, request, context, outbox, name, arguments)
        return None
    if session.code and name in CODE_TOOL_NAMES:  # answered by broker.mcp.code, in a task
        session.run_task(code_tool, request, context, outbox, name=f"mcp {name}")
        return None
    if name == SEARCH_TOOLS:
        if session.server.meta.threaded:  # searched in a worker thread: a task waits for it
            session.run_task(search_in_thread, request, context, outbox, name="mcp search_tools")
            return None
        return completed(session.server.meta.search_tools(arguments, session=session.label), context.modern)
    via_meta = name == CALL_TOOL
    if via_meta:  # the same pipeline as a direct call, once unwrapped
        unwrapped = unwrap_call(arguments)
        if isinstance(unwrapped, dict):
            return completed(unwrapped, context.modern)
        name, arguments = unwrapped
    origin = ToolRequest(session, context.modern, outbox, context.progress_token, via_meta,
                          log_level=context.log_level, capabilities=context.capabilities,
                          input_responses=up_front(context, params))
    bigresults.prepare(origin, params)
    call = session.server.router.start_call(
        name,
        arguments,
        origin=origin,
        deadlines=session.deadline_queue(),
        caller=session.caller(context),
        timeout=protocol.timeout_of(params),
        request_id=request.id,
        progress=context.progress_token is not None,
    )
    if isinstance(call, CallOutcome):  # refused at once: the router did not tell the origin
        tool_call_done(session, request.id, name, origin, call, None)
    elif not call.done:
        session.requests[request.id] = call
    return None


def start_scoped_call(
    session: ToolSession, request: Request, context: RequestContext, outbox: Outbox, name: str, arguments: Any
) -> None:
    """A ``tools/call`` in a one-app scope: ``name`` is the app's own; the router gets the
    tool's agent-facing name (and so its whole pipeline). Unknown: a -32602 error."""
    assert session.app is not None
    tool = session.server.app_scopes.view(session.app).tools.get(name)
    if tool is None:
        raise unknown_tool_error(session.server.app_scopes.view(session.app), name)
    origin = ToolRequest(session, context.modern, outbox, context.progress_token, False, own_name=name,
                          log_level=context.log_level, capabilities=context.capabilities,
                          input_responses=up_front(context, request.params))
    bigresults.prepare(origin, request.params)
    call = session.server.router.start_call(
        tool.agent_name,
        arguments,
        origin=origin,
        deadlines=session.deadline_queue(),
        caller=session.caller(context),
        timeout=protocol.timeout_of(request.params),
        request_id=request.id,
        progress=context.progress_token is not None,
    )
    if isinstance(call, CallOutcome):
        tool_call_done(session, request.id, name, origin, call, None)
    elif not call.done:
        session.requests[request.id] = call


async def code_tool(
    session: ToolSession, request: Request, context: RequestContext, outbox: Outbox, entry: InFlight
) -> dict[str, Any]:
    mode = code_mode(session.server)
    arguments = request.params.get("arguments")
    if request.params.get("name") == RUN_CODE:
        result = await mode.run(arguments, caller=session.caller(context), session=session.label or "session",
                                timeout=protocol.timeout_of(request.params))
    else:
        result = await mode.search(arguments, session=session.label)
    return completed(result, context.modern)


async def search_in_thread(
    session: ToolSession, request: Request, context: RequestContext, outbox: Outbox, entry: InFlight
) -> dict[str, Any]:
    result = await session.server.meta.search_tools_async(request.params.get("arguments"), session=session.label)
    return completed(result, context.modern)


def tool_call_done(
    session: AnsweringSession, request_id: RequestId, name: str, request: ToolRequest, outcome: CallOutcome,
    call: Call | None,
) -> None:
    """A ``tools/call`` has its outcome (``call``: its record, None if it was refused before
    it had one): it is no longer in flight, and its answer goes out — unless it was
    cancelled by the client (none) or ended with the session (a best-effort error)."""
    if call is not None and session.requests.get(request_id) is call:
        del session.requests[request_id]
    session.last_activity = trio.current_time()
    outbox = request.outbox
    if request.ending == CANCELLED:
        outbox.close()
        return
    if request.ending == ENDED:
        outbox.send_nowait(encode_error(request_id, SERVER_ERROR, SESSION_ENDED))
        outbox.close()
        return
    try:
        if request.via_meta and outcome.kind is OutcomeKind.UNKNOWN_TOOL:
            result = unknown_tool_result(session.server.registry, name)
        else:
            result = bigresults.linked(session, request, name, outcome, call_result(outcome, name))
        answer = completed(result, request.modern)
        parts = bigresults.response_parts(request_id, answer)  # large raw content: no copy
        if parts is not None:
            bigresults.send_parts(session, outbox, parts)
            return
        data = encode_result(request_id, answer)
    except RpcError as exc:  # an unknown tool is a JSON-RPC error, not a tool result
        data = exc.encode(request_id)
    except Exception:
        log.exception("mcp_internal_error", session=session.label, method="tools/call")
        data = encode_error(request_id, INTERNAL_ERROR, INTERNAL)
    session.finish_request(outbox, data)
