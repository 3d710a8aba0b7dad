"""One agent's MCP session: both protocol eras, requests in flight, cancellation, progress.

Theory of operation
-------------------
A :class:`Session` is transport-free: a transport decodes a message (``jsonrpc``) and calls
:meth:`Session.handle` with it and an :class:`Outbox` — where that request's messages go.
On stdio every request shares the connection's outbox; on HTTP each POST brings its own, and
the session's unsolicited handshake-era notifications go to ``notify_outbox`` (the GET
stream), when there is one.

The era is decided per request (see ``protocol``): ``_meta`` with a protocol version makes a
request modern (2026-07-28, stateless: version, capabilities and client info come with it);
anything else needs the session's ``initialize`` first. Quick requests (initialize, ping,
server/discover, tools/list, the ``search_tools`` meta-tool) are answered inline, in the order
they arrived. A ``tools/call`` of an app tool runs without a task: the router's ``Call`` record
(which owns the request id) waits in ``Session.requests`` under that id, and its origin, a
``session_tools.ToolRequest`` (where and how to answer), is told the outcome by the router (deadlines
come from the session's one ``DeadlineQueue`` task).
``subscriptions/listen`` runs as a task in the session's own nursery, inside a cancel scope kept
in ``Session.requests``. ``notifications/cancelled`` (or, on modern HTTP, the response stream closing
— the transport then closes the session) cancels either kind: the router tells the app
(``toolCancel``) and no response is sent. Every other request gets exactly one response — a
response that finds no room in its outbox waits for it in a task — and a request cut short
because its session ended gets a best-effort error, so nobody waits in silence.

Progress: a request's ``_meta.progressToken`` gives the router a callback that queues
``notifications/progress`` on the request's outbox without blocking (the router drops
non-increasing values and anything after the call ended). Tool-list changes are coalesced:
after a change the watcher waits ``coalesce`` seconds and sends one notification for the
burst — to ``notify_outbox`` once initialized (handshake era), and on every
``subscriptions/listen`` stream that asked for them (modern era).

Discovery mode (``Session.discovery``, chosen by the transport: ``agentConnect`` with
``discovery: true`` on stdio, the ``/mcp/discovery`` path on HTTP) lists only the meta-tools
``search_tools`` and ``call_tool`` (see ``meta``). Since that list never changes, such a
session sends no ``list_changed`` and declares ``listChanged: false``; a
``subscriptions/listen`` there honours nothing and just stays open. Calls are the same in
both modes: meta-tools and app tools can be called by name either way.

Resources and prompts (apps' wire protocol v2): ``session_resources``; their list_changed and
update notifications, like the tools', are ``session_watch``'s. An app's ``resourceUpdated``
reaches a session's agent at most once per URI per window, the last one at the window's end
(``updates.UpdateThrottle``), however fast the app sends them.

Elicitation (``elicitation``; apps' protocol v2, section 13): an app's ``elicit`` reaches
its call's origin, the ``ToolRequest`` (``call_elicit``): in the handshake era the session
sends ``elicitation/create`` on the call's outbox and the agent's response comes back through
:meth:`Session.handle`; in 2026-07-28 the ``tools/call`` is answered with an input-required
result, the call is detached (:meth:`Session.detach`) and held by ``McpServer.paused`` until the
client's retry (a ``tools/call`` with ``requestState``) is attached to it
(:meth:`Session.attach_resumed`). The session keeps ``initialize``'s client capabilities for it.

Code mode (``Session.code``: ``agentConnect`` with ``code: true``, from ``toolbridge stdio
--code``; the ``/mcp/code`` path on HTTP) is discovery mode with a different pair of tools, ``search_tools`` (with TypeScript
signatures) and ``run_code``, both answered by ``code`` in a task of the session, so a
cancellation reaches them (a run's sandbox is killed, its calls cancelled at the apps).

Completions and log messages (apps' protocol v2, section 12): ``session_logging``. A call's own
log messages go on its stream (``session_tools.ToolRequest.app_log``): handshake era if the
session sent ``logging/setLevel``; 2026-07-28 if the request's ``_meta`` carries
``io.modelcontextprotocol/logLevel`` — and nothing else, ever.

Large results (``bigresults``): a ``tools/call`` result of ``result_link_bytes`` or more is
answered with a ``resource_link`` to a daemon-held copy (``broker.core.result_store``) unless the
call opts out in its ``_meta``; ``resources/read`` of such a link is answered from that store, for
the same principal only (also in a one-app scope). A large result that is sent keeps the app's
content bytes and is written in parts, never re-encoded.

One-app scope (``Session.app``, a label; chosen by the transport: ``agentConnect`` with
``app``, the ``/mcp/apps/NAME`` path on HTTP; see ``scope``): tools/list holds that app's tools
under their own names, calls resolve against that app alone (no meta-tools), and
``list_changed`` is sent only when the scope's list itself changed (its digest, compared after
each registry change). Its resources and prompts are that app's alone, under the app's own URIs
and names: ``Session.resources`` is then a ``ScopedResources`` view (``scope``) with the
directory's face, so the handlers above serve both; the call log still records the
agent-facing URI or prompt name. A scope is never in discovery or code mode too.

Where the parts live: this module holds the dispatch tables, the request lifecycle, the
bookkeeping of requests in flight and cancellation; ``request_context`` what they all share;
``server`` the shared :class:`~broker.mcp.server.McpServer`; the method families are plain
functions of the session, typed by Protocols (this module imports them, never the reverse):
``session_tools``, ``session_resources``, ``session_logging``, ``session_watch``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Final

import attrs
import structlog
import trio

from ..version import CLI_CLIENT_NAME
from ..core.calls import Call, DeadlineQueue
from ..core.outcome import CallerInfo, CallOutcome
from ..core.applog import AppLogRecord
from ..core.resources import ResourceDirectory
from . import protocol
from .jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    SERVER_ERROR,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
    RpcError,
    encode_error,
    encode_notification,
    encode_result,
    is_request_id,
)
from . import elicitation
from .code import CODE_INSTRUCTIONS
from .scope import ScopedResources, scope_instructions
from .updates import UpdateThrottle
from .request_context import INTERNAL, SESSION_ENDED, InFlight, Outbox, RequestContext
from . import session_logging, session_resources, session_tools, session_watch
from .session_tools import CANCELLED, ENDED, ToolRequest, start_tool_call, tool_call_done
from .server import McpServer

log = structlog.get_logger("toolbridge.mcp")

__all__ = ["Session", "open_session"]

#: Methods that exist only in the modern era: they always need the per-request envelope.
_MODERN_ONLY: Final = frozenset({"server/discover", "subscriptions/listen"})
_KNOWN_ELSEWHERE: Final = frozenset[str]()

Handler = Callable[["Session", Request, RequestContext, Outbox, InFlight], Awaitable[dict[str, Any]]]


class Session:
    """The MCP state of one agent connection (stdio) or one ``Mcp-Session-Id`` (HTTP).

    Create it with :func:`open_session`, which owns the nursery its requests run in.
    """

    def __init__(
        self,
        server: McpServer,
        nursery: trio.Nursery,
        *,
        transport: str,
        label: str | None,
        reinitialize: bool,
        discovery: bool = False,
        app: str | None = None,
        code: bool = False,
        principal: str | None = None,
        token: str | None = None,
    ) -> None:
        self.server = server
        #: The name of the token the agent presented (``Grant.name``): large-result links made
        #: by this session's calls are readable by sessions of the same token only (``bigresults``).
        self.token = token
        #: Who the client is, for 2026-07-28 request states (the HTTP token's name; else the label).
        self.principal = principal or f"session:{label}"
        #: Handshake era: ``initialize``'s client capabilities (elicitation looks at them).
        self.client_capabilities: dict[str, Any] = {}
        #: Handshake era: our ``elicitation/create`` requests waiting for the agent, by id.
        self.elicit_asks: dict[str, Any] = {}
        #: One-app scope: the label of the app whose tools alone are served (see ``scope``).
        self.app = app
        #: Code mode: tools/list holds search_tools and run_code (see the module docstring).
        self.code = code
        #: Discovery mode: tools/list holds only the meta-tools (see the module docstring).
        #: Code mode behaves as discovery mode (a fixed list) apart from its tools.
        self.discovery = discovery or code
        if self.discovery:  # both search: warm the model (if any) now
            server.meta.discovery_session_started()
        self._nursery = nursery
        self.transport = transport
        self.label = label
        self._reinitialize = reinitialize
        self.protocol_version: str | None = None
        self.client_name: str | None = None
        self.client_version: str | None = None
        self.initialized = trio.Event()
        self.client_ready = False
        self.tools_seen = 0
        self.scope_seen: bytes | None = None
        #: Requests in flight by id: a task's scope, or the router's record of a ``tools/call``.
        self.requests: dict[RequestId, InFlight | Call] = {}
        self._deadlines: DeadlineQueue | None = None
        self._last_caller: CallerInfo | None = None
        #: Where handshake-era notifications (list_changed) go; None drops them.
        self.notify_outbox: Outbox | None = None
        self.last_activity = trio.current_time()
        self.closed = trio.Event()
        #: Handshake era: the agent-facing resource URIs this session subscribed to.
        self.resource_subs: set[str] = set()
        #: Where each ``resourceUpdated`` goes besides the handshake-era subscriptions: each
        #: listen stream, with the URIs it asked for.
        self.update_sinks: dict[Callable[[str], None], frozenset[str]] = {}
        #: At most one ``resources/updated`` per URI per window (``updates``).
        self._updates = UpdateThrottle(self._send_resource_updated, lambda: nursery.start_soon(
            self._updates.run, name="mcp resource updates"))
        #: The resources and prompts this session sees: every app's, or its one-app scope's own.
        self.resources: ResourceDirectory | ScopedResources = (
            server.registry.resources if app is None
            else ScopedResources(server.app_scopes, server.registry.resources, server.registry, app))
        #: Ends this session's ``resourceUpdated`` listening (``open_session`` calls it at the end).
        self.stop_listening = server.registry.resources.on_updated(self._resource_updated)
        #: Handshake era: the level ``logging/setLevel`` asked for (None: no log messages).
        self.log_level: str | None = None

    def _resource_updated(self, uri: str) -> None:
        if self.closed.is_set():
            return
        if isinstance(self.resources, ScopedResources):  # only its app's, by the app's own URI
            own = self.resources.own_uri(uri)
            if own is None:
                return
            uri = own
        if uri in self.resource_subs or any(uri in uris for uris in self.update_sinks.values()):
            self._updates.offer(uri)  # now, or folded into one at the end of the URI's window

    def _send_resource_updated(self, uri: str) -> None:
        if uri in self.resource_subs and self.notify_outbox is not None:
            self.notify_outbox.send_nowait(encode_notification("notifications/resources/updated", {"uri": uri}))
        for sink in list(self.update_sinks):
            sink(uri)

    # --- the transport's face ------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return len(self.requests)

    @property
    def busy(self) -> bool:
        """A request in flight or a task running in the session's nursery (a hook for
        ``stateless``, which reuses a stateless session only when it is not busy)."""
        return bool(self.requests) or bool(self._nursery.child_tasks)

    async def handle(self, message: Message, outbox: Outbox) -> None:
        """Handle one message from the agent; replies go to ``outbox`` (closed when done)."""
        self.last_activity = trio.current_time()
        if isinstance(message, Request):
            await self._on_request(message, outbox)
            return
        if isinstance(message, Notification):
            self._on_notification(message)
        elif isinstance(message, Response):
            if not elicitation.on_response(self, message):
                log.debug("mcp_unexpected_response", session=self.label, id=message.id)
        outbox.close()

    def cancel(self, request_id: RequestId, reason: str = "") -> bool:
        """Cancel a request in flight as asked by the client (no response). False if unknown."""
        entry = self.requests.get(request_id)
        if entry is None or entry.done:
            return False
        log.info("mcp_request_cancelled", session=self.label, id=request_id, reason=reason[:200])
        if isinstance(entry, Call):
            self._end_call(entry, CANCELLED, "cancelled by the agent")
        else:
            entry.cancel()
        return True

    def close(self) -> None:
        """End the session: requests in flight are cancelled (their apps are told)."""
        self.closed.set()
        self.end_calls()
        self._nursery.cancel_scope.cancel()

    def end_calls(self) -> None:
        """The session is ending: every ``tools/call`` in flight ends with it (its app is told)."""
        for entry in list(self.requests.values()):
            if isinstance(entry, Call):
                self._end_call(entry, ENDED, "the agent's MCP session ended")

    def _end_call(self, call: Call, ending: str, message: str) -> None:
        """End a ``tools/call`` from this side (the app is told); its answer follows ``ending``."""
        if isinstance(call.origin, ToolRequest):
            call.origin.ending = ending
        self.server.router.cancel(call, message)

    # --- dispatch ------------------------------------------------------------------------

    async def _on_request(self, request: Request, outbox: Outbox) -> None:
        try:
            if request.id in self.requests:
                raise RpcError(
                    INVALID_REQUEST, f"Invalid Request: id {request.id!r} is already used by a request in flight"
                )
            context = self._context(request)
            table = _MODERN if context.modern else _HANDSHAKE
            handler = table.get(request.method)
            if handler is None:
                raise RpcError(METHOD_NOT_FOUND, _method_not_found(request.method, context.modern))
            if isinstance(handler, _ToolsCall):
                result = start_tool_call(self, request, context, outbox)
                if result is None:
                    return  # answered by session_tools.tool_call_done
                data = encode_result(request.id, result)
            elif isinstance(handler, _Inline):
                data = encode_result(request.id, handler.fn(self, request, context))
            else:
                self.run_task(handler, request, context, outbox, name=f"mcp {request.method}")
                return
        except RpcError as exc:
            data = exc.encode(request.id)
        except Exception:
            log.exception("mcp_internal_error", session=self.label, method=request.method)
            data = encode_error(request.id, INTERNAL_ERROR, INTERNAL)
        await outbox.send(data, final=True)
        outbox.close()

    def _context(self, request: Request) -> RequestContext:
        params = request.params
        if protocol.modern_version_of(params) is not None or request.method in _MODERN_ONLY:
            envelope = protocol.read_envelope(params)
            name, version = protocol.client_identity(envelope.client_info)
            return RequestContext(True, envelope.protocol_version, name, version, protocol.progress_token_of(params),
                                  log_level=protocol.log_level_of(params),
                                  capabilities=envelope.client_capabilities)
        if request.method not in ("initialize", "ping") and not self.initialized.is_set():
            raise RpcError(
                INVALID_REQUEST,
                "Invalid Request: the session is not initialized. Send initialize first "
                "(protocol 2025-11-25 and older), or put io.modelcontextprotocol/protocolVersion "
                "and io.modelcontextprotocol/clientCapabilities in params._meta (protocol 2026-07-28).",
            )
        return RequestContext(
            False, self.protocol_version, self.client_name, self.client_version, protocol.progress_token_of(params)
        )

    async def _run(
        self, handler: Handler, request: Request, context: RequestContext, outbox: Outbox, entry: InFlight
    ) -> None:
        data: bytes | None = None
        responded = False
        try:
            with entry.scope:
                try:
                    data = encode_result(request.id, await handler(self, request, context, outbox, entry))
                except RpcError as exc:
                    data = exc.encode(request.id)
                except Exception:
                    log.exception("mcp_internal_error", session=self.label, method=request.method)
                    data = encode_error(
                        request.id, INTERNAL_ERROR, INTERNAL
                    )
            if data is None:  # cancelled by the client: it wants no answer
                return
            entry.done = True
            await outbox.send(data, final=True)
            responded = True
        finally:
            self.last_activity = trio.current_time()
            if self.requests.get(request.id) is entry:
                del self.requests[request.id]
            if not responded and not entry.cancelled:
                outbox.send_nowait(encode_error(request.id, SERVER_ERROR, SESSION_ENDED))
            outbox.close()

    def run_task(self, handler: Handler, request: Request, context: RequestContext, outbox: Outbox, *,
                 name: str) -> None:
        """Answer ``request`` from a task in the session's nursery (in flight until it ends)."""
        entry = InFlight()
        self.requests[request.id] = entry
        self._nursery.start_soon(self._run, handler, request, context, outbox, entry, name=name)

    def finish_request(self, outbox: Outbox, data: bytes) -> None:
        """Send a ``tools/call``'s final response and close its outbox: at once if it has room
        (or holds it beside a full queue), else from a task that waits for room."""
        if outbox.send_final_nowait(data):
            outbox.close()
        else:
            self._send_later(outbox, data)

    def _send_later(self, outbox: Outbox, data: bytes) -> None:
        """A response found no room in its outbox: a task waits for room."""

        async def send() -> None:
            try:
                await outbox.send(data, final=True)
            finally:
                outbox.close()

        try:
            self._nursery.start_soon(send)
        except RuntimeError:  # the session has ended: its transport is gone too
            outbox.close()

    def _on_notification(self, note: Notification) -> None:
        if note.method == "notifications/cancelled":
            request_id = note.params.get("requestId")
            if is_request_id(request_id):
                reason = note.params.get("reason")
                self.cancel(request_id, reason if isinstance(reason, str) else "")
        elif note.method == "notifications/initialized":
            self.client_ready = True
        else:
            log.debug("mcp_notification_ignored", session=self.label, method=note.method)

    # --- handlers ------------------------------------------------------------------------

    def _initialize(self, request: Request, context: RequestContext) -> dict[str, Any]:
        requested = request.params.get("protocolVersion")
        if not isinstance(requested, str):
            raise RpcError(INVALID_PARAMS, 'Invalid params: initialize needs a string "protocolVersion"')
        if self.initialized.is_set() and not self._reinitialize:
            raise RpcError(
                INVALID_REQUEST,
                "Invalid Request: this session is already initialized; start a new session "
                "(POST initialize without Mcp-Session-Id) to initialize again",
            )
        self.protocol_version = protocol.negotiate_handshake(requested)
        self.client_name, self.client_version = protocol.client_identity(request.params.get("clientInfo"))
        capabilities = request.params.get("capabilities")
        self.client_capabilities = capabilities if isinstance(capabilities, dict) else {}
        if not self.initialized.is_set():
            self.tools_seen = self.server.registry.version
            self.scope_seen = self.scope_digest()
            self.initialized.set()
        log.log(
            logging.DEBUG if self.client_name == CLI_CLIENT_NAME else logging.INFO,
            "mcp_initialized", session=self.label, transport=self.transport, requested=requested,
            version=self.protocol_version, client=self.client_name, client_version=self.client_version,
            discovery=self.discovery, app=self.app,
        )
        return self._with_instructions(self.server.initialize_result(self.protocol_version, discovery=self.discovery))

    def _ping(self, request: Request, context: RequestContext) -> dict[str, Any]:
        return {}

    def _discover(self, request: Request, context: RequestContext) -> dict[str, Any]:
        return self._with_instructions(self.server.discover_result(discovery=self.discovery))

    def _with_instructions(self, result: dict[str, Any]) -> dict[str, Any]:
        """``initialize``'s or ``server/discover``'s result, with a scope's or code mode's own instructions."""
        if self.app is not None:
            result["instructions"] = scope_instructions(self.app)
        if self.code:
            result["instructions"] = CODE_INSTRUCTIONS
        return result

    # --- elicitation (``elicitation``; the app's side is ``broker.core.elicitation``) -----

    def start_task(self, fn: Callable[..., Awaitable[None]], *args: Any, name: str) -> None:
        """Run ``fn(*args)`` in the session's nursery (it ends with the session)."""
        self._nursery.start_soon(fn, *args, name=name)

    def detach(self, call: Call) -> None:
        """``call`` is paused (2026-07-28): no longer this session's request in flight."""
        if call.request_id is not None and self.requests.get(call.request_id) is call:
            del self.requests[call.request_id]

    def attach_resumed(
        self, call: Call | None, request: Request, context: RequestContext, outbox: Outbox, via_meta: bool,
        own_name: str | None, *, outcome: CallOutcome | None = None,
    ) -> ToolRequest:
        """The retry ``request`` of a paused call becomes the call's origin (its answer goes
        there); with ``outcome`` (the call ended while paused) it is answered with it at once."""
        origin = ToolRequest(self, True, outbox, context.progress_token, via_meta, own_name=own_name,
                              capabilities=context.capabilities)
        if call is None:
            assert outcome is not None
            tool_call_done(self, request.id, own_name or str(request.params.get("name")), origin, outcome, None)
            return origin
        call.origin = origin
        call.request_id = request.id
        call.wants_progress = context.progress_token is not None
        self.requests[request.id] = call
        self.deadline_queue().add(call)
        return origin

    def scope_digest(self) -> bytes | None:
        """The one-app scope's list digest (None outside a scope): what list_changed follows."""
        return None if self.app is None else self.server.app_scopes.view(self.app).digest

    # --- log messages (apps' protocol v2, section 12; ``session_logging``) --------------

    def hear_app_log(self, record: AppLogRecord) -> None:
        """An app-wide log message (registered by ``logging/setLevel``: a bound method, held weakly)."""
        session_logging.app_log(self, record)

    def caller(self, context: RequestContext) -> CallerInfo:
        caller = self._last_caller
        if (caller is None or caller.client_name != context.client_name
                or caller.client_version != context.client_version):
            caller = CallerInfo(context.client_name, context.client_version, self.label, self.transport)
            self._last_caller = caller
        return caller

    def deadline_queue(self) -> DeadlineQueue:
        """The session's deadline queue, started (in the session's nursery) on first use."""
        if self._deadlines is None:
            self._deadlines = DeadlineQueue(self.server.router.expire)
            self._nursery.start_soon(self._deadlines.run, name="mcp call deadlines")
        return self._deadlines






@attrs.frozen
class _Inline:
    fn: Callable[[Session, Request, RequestContext], dict[str, Any]]


class _ToolsCall:
    """``tools/call``: started by ``session_tools.start_tool_call``, answered by a callback."""


_TOOLS_CALL: Final = _ToolsCall()


_HANDSHAKE: Final[dict[str, _Inline | _ToolsCall | Handler]] = {
    "initialize": _Inline(Session._initialize),
    "ping": _Inline(Session._ping),
    "tools/list": _Inline(session_tools.list_tools),
    "tools/call": _TOOLS_CALL,
    "resources/list": _Inline(session_resources.list_resources),
    "resources/templates/list": _Inline(session_resources.list_resource_templates),
    "resources/read": session_resources.read_resource,
    "resources/subscribe": session_resources.subscribe,
    "resources/unsubscribe": _Inline(session_resources.unsubscribe),
    "prompts/list": _Inline(session_resources.list_prompts),
    "prompts/get": session_resources.get_prompt,
    "completion/complete": session_logging.complete,
    "logging/setLevel": _Inline(session_logging.set_level),
}
_MODERN: Final[dict[str, _Inline | _ToolsCall | Handler]] = {
    "server/discover": _Inline(Session._discover),
    "tools/list": _Inline(session_tools.list_tools),
    "tools/call": _TOOLS_CALL,
    "subscriptions/listen": session_watch.listen,
    "resources/list": _Inline(session_resources.list_resources),
    "resources/templates/list": _Inline(session_resources.list_resource_templates),
    "resources/read": session_resources.read_resource,
    "prompts/list": _Inline(session_resources.list_prompts),
    "prompts/get": session_resources.get_prompt,
    "completion/complete": session_logging.complete,
}


def _method_not_found(method: str, modern: bool) -> str:
    if method in _KNOWN_ELSEWHERE:
        return f"Method not found: {method} (toolbridge offers tools, resources and prompts only)"
    if modern and method in _HANDSHAKE:
        return f"Method not found: {method} does not exist in protocol 2026-07-28"
    if not modern and method in _MODERN:
        return f"Method not found: {method} (handshake-era session; it is a 2026-07-28 method)"
    return f"Method not found: {method}"


@asynccontextmanager
async def open_session(
    server: McpServer,
    *,
    transport: str,
    label: str | None = None,
    notify: Outbox | None = None,
    stateful: bool = True,
    reinitialize: bool = False,
    discovery: bool = False,
    app: str | None = None,
    code: bool = False,
    principal: str | None = None,
    token: str | None = None,
    deadlines: DeadlineQueue | None = None,
) -> AsyncIterator[Session]:
    """A session whose requests run in a nursery owned by this context; leaving it cancels them.

    ``stateful`` sessions (stdio, a legacy HTTP session) watch the tool list for the
    handshake era's ``list_changed``; a stateless one serves one modern HTTP request.
    ``discovery`` selects discovery mode, ``code`` code mode, ``app`` a one-app scope (see the
    module docstring; a scope is neither of the others: the transports refuse that before they
    get here). ``deadlines``: a deadline queue someone else runs, shared instead of the
    session's own (HTTP's stateless requests: no deadline task per request; see ``stateless``).
    """
    if (discovery or code) and app is not None:
        raise ValueError("a session is in discovery mode, code mode or a one-app scope, not two of them")
    async with trio.open_nursery() as nursery:
        session = Session(
            server, nursery, transport=transport, label=label, reinitialize=reinitialize, discovery=discovery,
            app=app, code=code, principal=principal, token=token,
        )
        session.notify_outbox = notify
        if deadlines is not None:  # the stateless sessions' shared queue (a hook for ``stateless``)
            session._deadlines = deadlines
        if stateful:
            nursery.start_soon(session_watch.watch_tools, session)
            nursery.start_soon(session_watch.watch_resources, session)
            nursery.start_soon(session_watch.watch_prompts, session)
            server.open_sessions.add(session)
        try:
            yield session
        finally:
            server.open_sessions.discard(session)
            session.stop_listening()
            session.closed.set()
            session.end_calls()
            if stateful:  # its paused calls (2026-07-28 over stdio) can be resumed by nobody else
                server.paused.end_session(session.principal)
            nursery.cancel_scope.cancel()
