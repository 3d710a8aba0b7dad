"""MCP over Streamable HTTP: an ASGI-style app at ``/mcp``, served by ``http_server`` (h11 on trio).

Theory of operation
-------------------
Every request passes the same gate first, in this order: ``Host`` must be a loopback name
or configured (421 otherwise: DNS rebinding), the path must be ``/mcp``,
``/mcp/discovery`` or ``/mcp/code`` (the others serve discovery mode and code mode, see
``session``; other paths go to the status page and ``/metrics``, ``status_page``, or get
404), a present ``Origin`` must be loopback or configured (403), and
``Authorization: Bearer <token>`` must be the daemon's token or a named token with the
``agent`` scope (403 for a missing or unknown token too: never 401, which MCP clients take as
"start OAuth"; 403 for one without that scope; checked by ``tokens.Authenticator``, in
constant time, on every request, so a revoked token stops working at once). With
``tls_cert`` / ``tls_key`` the port serves HTTPS. Then:

* ``POST`` carries one JSON-RPC message (``Content-Type: application/json``, 415; ``Accept``
  listing JSON and SSE, 406; body under ``max_http_body_bytes``, 413). A request whose
  ``MCP-Protocol-Version`` header or ``_meta`` names the 2026-07-28 revision is *modern*:
  its headers are checked against the body (400, -32020), it runs in a session of its own
  (one left idle by an earlier request of the same token, mode and scope, or a new one:
  ``stateless``), and closing the response stream cancels it. Anything else is
  *legacy* (2025-11-25 and older): ``initialize`` without ``Mcp-Session-Id`` starts a session
  (the id comes back in that header); other messages need the id (400 without, 404 when
  unknown) and run in that session, where ``notifications/cancelled`` cancels (in that era a
  dropped connection is not a cancellation: the call finishes and its answer is dropped).
  JSON-RPC errors are HTTP 200 in the legacy era and 400/404 in the modern one, as the
  specification of each asks.
* ``/mcp/apps/NAME`` serves the one-app scope of the app labelled ``NAME`` (see ``scope``),
  in both eras, behind the same gate: a ``NAME`` that cannot be a label is 404 at the path
  step; a named token needs the ``agent`` scope or an ``agent:<pattern>`` scope matching
  ``NAME`` (403). A legacy session belongs to the path it was started at: its id is unknown
  (404) at any other path, so a session cannot change scope.
* ``GET`` with a session id opens the session's SSE stream for ``list_changed``; ``DELETE``
  ends the session. Without a session id both are 405 (the 2026-07-28 rule).

A request's messages come out of its session through a bounded channel (see
:class:`http_outbox.ResponseOutbox`). The reply is ``application/json`` when the response is the first
message; it switches to ``text/event-stream`` when a notification (progress, a listen
acknowledgement) comes first or the request runs longer than :data:`SSE_AFTER_SECONDS`,
after which SSE comments keep the connection alive. A modern request watches for the client
closing its connection (that cancels it) once it has gone unanswered for
:data:`WATCH_AFTER_SECONDS` or its response has become a stream; a legacy request, where a
dropped connection is no cancellation, watches once its response has become a stream. So the
common JSON exchange costs no task and no nursery beyond the connection's own (and, for a
modern request, its short-lived session's), and the calls of modern requests share one
deadline queue (:meth:`HttpApp.run_deadlines`) instead of a task each. Legacy
sessions run in a nursery owned by the HTTP server, so nothing outlives it; how many there may
be, which one goes to make room (an idle one, even with a GET stream open) and each token's
share of GET streams are ``http_sessions``'s business.
"""

from __future__ import annotations

import functools
import secrets
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

import structlog
import trio

from ..config.fdlimit import descriptor_limit, http_connection_cap
from ..config.net import port_in_use, port_taken_error
from ..config.tls import server_context
from ..errors import BrokerError, StartupError
from ..config.tokens import Grant
from . import jsonrpc, protocol
from .gate import Headers, accepts, host_allowed, media_types, origin_allowed
from .headers import check_modern_headers
from .http_server import Limits, Receive, Scope, Send, serve_app
from .jsonrpc import (
    INVALID_REQUEST,
    SERVER_ERROR,
    Notification,
    Request,
    Response,
    RpcError,
    encode_error,
)
from .scope import APPS_PATH_PREFIX, check_app_name
from .http_outbox import NullOutbox as _NullOutbox, ResponseOutbox as _ResponseOutbox
from .http_sessions import HttpSession, SessionTable
from .stateless import StatelessSessions
from .server import McpServer
from .session import Session, open_session

if TYPE_CHECKING:
    from .status_page import StatusPages

log = structlog.get_logger("toolbridge.http")

__all__ = ["HttpApp", "serve_http", "bind_socket", "SSE_AFTER_SECONDS"]

PATH: Final = "/mcp"
#: The same endpoint in discovery mode: tools/list holds only search_tools and call_tool.
DISCOVERY_PATH: Final = "/mcp/discovery"
#: The same endpoint in code mode: tools/list holds search_tools and run_code (``code``).
CODE_PATH: Final = "/mcp/code"
#: A request silent for this long switches to SSE, and SSE streams get a comment this often.
SSE_AFTER_SECONDS: Final = 15.0
#: A 2026-07-28 request still unanswered after this long starts watching for its client closing
#: the connection (which cancels it); one answered sooner costs no watcher (see ``_exchange_modern``).
WATCH_AFTER_SECONDS: Final = 0.1
#: HTTP status for a JSON-RPC error on a modern request (as the SDK's server maps them).
_MODERN_STATUS: Final = {
    jsonrpc.PARSE_ERROR: 400,
    jsonrpc.INVALID_REQUEST: 400,
    jsonrpc.INVALID_PARAMS: 400,
    jsonrpc.HEADER_MISMATCH: 400,
    jsonrpc.MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
    jsonrpc.UNSUPPORTED_PROTOCOL_VERSION: 400,
    jsonrpc.METHOD_NOT_FOUND: 404,
}
_SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]
_KEEPALIVE: Final = b": keepalive\n\n"


class _Reply(BrokerError):
    """Stop handling a request and answer with this status (and JSON-RPC error body)."""

    def __init__(self, status: int, message: str = "", code: int = INVALID_REQUEST,
                 headers: list[tuple[bytes, bytes]] | None = None, request_id: Any = None,
                 data: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = headers or []
        self.request_id = request_id
        self.data = data


async def _send_json(send: Send, status: int, body: bytes, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), *headers]})
    await send({"type": "http.response.body", "body": body})


async def _send_empty(send: Send, status: int, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    await send({"type": "http.response.start", "status": status, "headers": list(headers)})
    await send({"type": "http.response.body", "body": b""})


def _sse(data: bytes) -> bytes:
    return b"event: message\ndata: " + data + b"\n\n"


# --- the app -------------------------------------------------------------------------------


class HttpApp:
    """The ASGI application. ``nursery`` runs the legacy sessions (owned by the server)."""

    def __init__(self, server: McpServer, nursery: trio.Nursery, *, sse_after: float = SSE_AFTER_SECONDS,
                 watch_after: float = WATCH_AFTER_SECONDS) -> None:
        self.server = server
        self.sse_after = sse_after
        self.watch_after = watch_after
        #: The sessions of 2026-07-28 requests, reused once idle (``stateless``; the server
        #: runs the pool).
        self.stateless = StatelessSessions(server)
        self.settings = server.settings
        self._nursery = nursery
        #: The legacy sessions (``http_sessions``: how many, whose, which one goes).
        self._sessions = SessionTable()
        # Imported here: the stdio relay imports this module, and need not load prometheus_client.
        from .status_page import StatusPages

        #: Everything on this port but /mcp: the status page and /metrics (``status_page``).
        self.pages: StatusPages = StatusPages(server, self._grant)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        headers = Headers(scope["headers"])
        try:
            await self._route(scope, headers, receive, send)
        except _Reply as reply:
            body = encode_error(reply.request_id, reply.code, reply.message, reply.data)
            await _send_json(send, reply.status, body, reply.headers)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _route(self, scope: Scope, headers: Headers, receive: Receive, send: Send) -> None:
        settings = self.settings
        if not host_allowed(headers.get("host"), settings.allowed_hosts):
            log.warning("http_rejected", reason="host", host=headers.get("host"))
            raise _Reply(421, "Misdirected Request: the Host header must name 127.0.0.1 or localhost "
                         "(add other names to allowed_hosts in the daemon's config)")
        path = scope["path"].rstrip("/")
        app = _app_of(scope["path"])
        if path not in (PATH, DISCOVERY_PATH, CODE_PATH) and app is None:
            if await self.pages.serve(scope, headers, receive, send):  # the status page, /metrics
                return
            raise _Reply(404, f"Not Found: the MCP endpoint is {PATH} ({DISCOVERY_PATH} for discovery mode, "
                         f"{CODE_PATH} for code mode, {APPS_PATH_PREFIX}<app label> for one app's tools)")
        discovery = path == DISCOVERY_PATH
        code = path == CODE_PATH
        if not origin_allowed(headers.get("origin"), settings.allowed_origins):
            log.warning("http_rejected", reason="origin", origin=headers.get("origin"))
            raise _Reply(403, "Forbidden: requests from this Origin are not allowed "
                         "(add it to allowed_origins in the daemon's config)")
        authorization = headers.get("authorization")
        grant = self._grant(authorization)
        if grant is None:
            log.warning("http_rejected", reason="token")
            # 403, not 401: to an MCP client a 401 means "do OAuth" (the spec's authorization
            # section), whatever its WWW-Authenticate says, so OAuth-capable clients (the SDKs,
            # Claude Code) would start discovery and registration and show *their* failure
            # instead of this message. toolbridge's token is a static key set in the client's
            # config; a 403 without a challenge reaches the user as this JSON-RPC error.
            raise _Reply(403, no_token_message(authorization), SERVER_ERROR)
        if not grant.allows_agent_to(app):
            log.warning("http_rejected", reason="token scope", token=grant.name, app=app)
            raise _Reply(403, f"Forbidden: the token {grant.name!r} may not connect agents"
                         + (f" to the app {app!r}" if app is not None else "")
                         + f" (its scopes: {grant.describe()})", SERVER_ERROR)
        method = scope["method"]
        if method == "POST":
            await self._post(headers, receive, send, discovery, code=code, app=app, token=grant.name)
        elif method == "GET":
            await self._get(headers, receive, send, app)
        elif method == "DELETE":
            await self._delete(headers, send, app)
        else:
            raise _Reply(405, f"Method Not Allowed: {method}", headers=[(b"allow", b"POST, GET, DELETE")])

    def _grant(self, value: str | None) -> Grant | None:
        """What the bearer token may do (the daemon's one check, ``tokens.Authenticator``)."""
        if value is None:
            return None
        scheme, _, credentials = value.strip().partition(" ")
        if scheme.lower() != "bearer":
            return None
        return self.server.auth.check(credentials.strip())

    # --- POST --------------------------------------------------------------------------------

    async def _read_body(self, headers: Headers, receive: Receive) -> bytes:
        limit = self.settings.max_http_body_bytes

        def too_big() -> _Reply:
            return _Reply(413, f"Payload Too Large: the limit is {limit} bytes")

        length = headers.get("content-length")
        if length is not None and length.strip().isdigit() and int(length) > limit:
            raise too_big()
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Disconnected()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise too_big()
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _post(self, headers: Headers, receive: Receive, send: Send, discovery: bool, *,
                    code: bool = False, app: str | None = None, token: str | None = None) -> None:
        if "application/json" not in media_types(headers.get("content-type")):
            raise _Reply(415, "Unsupported Media Type: the body must be application/json")
        wants_json, wants_sse = accepts(headers.get("accept"))
        if not (wants_json and wants_sse):
            raise _Reply(406, "Not Acceptable: the Accept header must list application/json and text/event-stream")
        try:
            body = await self._read_body(headers, receive)
        except _Disconnected:
            return
        try:
            message = jsonrpc.parse_message(body)
        except RpcError as exc:
            raise _Reply(400, exc.message, exc.code, request_id=exc.request_id) from None

        header_version = headers.get("mcp-protocol-version")
        modern = header_version in protocol.MODERN_VERSIONS or (
            isinstance(message, Request) and protocol.modern_version_of(message.params) is not None
        )
        if modern:
            await self._post_modern(headers, message, receive, send, discovery, code=code, app=app,
                                    token=token)
        else:
            await self._post_legacy(headers, message, receive, send, discovery, code=code, app=app, token=token)

    async def _post_modern(self, headers: Headers, message: Any, receive: Receive, send: Send, discovery: bool, *,
                           code: bool = False, app: str | None = None, token: str | None = None) -> None:
        if not isinstance(message, Request):
            # 2026-07-28 defines no client notifications over HTTP (closing a stream cancels).
            await _send_empty(send, 202)
            return
        try:
            envelope = protocol.read_envelope(message.params, check_version=False)
            # A discovery-mode client never saw app tools' schemas in tools/list, so it cannot
            # mirror their x-mcp-header arguments: only the routing headers are checked there.
            schema = None if discovery or code else self._input_schema(message, app)
            check_modern_headers(headers, message, envelope.protocol_version, schema)
            protocol.check_modern_version(envelope.protocol_version)
        except RpcError as exc:
            raise _Reply(_MODERN_STATUS.get(exc.code, 400), exc.message, exc.code,
                         request_id=message.id, data=exc.data) from None
        # The token: whose 2026-07-28 request states (``elicitation``) and large-result links
        # (``bigresults``) this request may redeem.
        session = await self.stateless.take(discovery=discovery, code=code, app=app, token=token)
        if session is None:  # the pool does not run (an HttpApp driven without serve_http)
            async with open_session(self.server, transport="http", stateful=False, discovery=discovery,
                                    code=code, app=app, principal=f"token:{token}", token=token) as session:
                await self._exchange_modern(session, message, receive, send)
            return
        reusable = False
        try:
            reusable = await self._exchange_modern(session, message, receive, send)
        finally:
            self.stateless.give_back(session, reusable=reusable)

    async def _post_legacy(self, headers: Headers, message: Any, receive: Receive, send: Send, discovery: bool, *,
                           code: bool = False, app: str | None = None, token: str | None = None) -> None:
        session_id = headers.get("mcp-session-id")
        if session_id is None:
            if isinstance(message, Request) and message.method == "initialize":
                # The session keeps the mode of the path it was started at.
                await self._initialize(message, receive, send, discovery, code=code, app=app, token=token)
                return
            raise _Reply(
                400, "Bad Request: missing Mcp-Session-Id header. Start a session with initialize "
                "(protocol 2025-11-25 and older), or send 2026-07-28 requests with their _meta.",
                request_id=message.id if isinstance(message, Request) else None,
            )
        entry = self._lookup(session_id, app)
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in protocol.HANDSHAKE_VERSIONS:
            raise _Reply(
                400, f"Bad Request: unsupported MCP-Protocol-Version {version!r}; supported: "
                + ", ".join(protocol.SUPPORTED_VERSIONS),
                request_id=message.id if isinstance(message, Request) else None,
            )
        if isinstance(message, Notification | Response):
            await entry.session.handle(message, _NullOutbox())
            await _send_empty(send, 202)
            return
        await self._exchange(entry.session, message, receive, send)

    def _input_schema(self, request: Request, app: str | None = None) -> Any:
        if request.method != "tools/call" or not isinstance(request.params.get("name"), str):
            return None
        name = request.params["name"]
        # In a one-app scope the name is the app's own (see ``scope``).
        tool = self.server.app_scopes.view(app).tools.get(name) if app is not None else self.server.registry.lookup(name)
        return tool.spec.input_schema if tool is not None else None

    def _lookup(self, session_id: str, app: str | None = None) -> HttpSession:
        entry = self._sessions.get(session_id)
        # A one-app scope's session is unknown anywhere but at its own path (and vice versa).
        if entry is None or entry.session.app != app:
            raise _Reply(404, "Not Found: unknown or expired Mcp-Session-Id; start a new session with initialize")
        return entry

    async def _initialize(self, request: Request, receive: Receive, send: Send, discovery: bool, *,
                          code: bool = False, app: str | None = None, token: str | None = None) -> None:
        if not self._sessions.make_room():
            raise _Reply(503, "Service Unavailable: too many MCP sessions have calls in flight; try again when "
                         "some have ended", SERVER_ERROR, request_id=request.id)
        session_id = secrets.token_urlsafe(24)
        session: Session = await self._nursery.start(
            functools.partial(self._run_session, session_id, discovery, code=code, app=app, token=token))
        try:
            await self._exchange(session, request, receive, send, session_header=session_id.encode())
        finally:
            if not session.initialized.is_set():
                session.close()
        if session.initialized.is_set():
            log.info("http_session_started", session=session.label, sessions=len(self._sessions))

    async def _run_session(
        self, session_id: str, discovery: bool, *, task_status: trio.TaskStatus[Session], code: bool = False,
        app: str | None = None, token: str | None = None,
    ) -> None:
        label = self.server.next_label("http")
        try:
            async with open_session(
                self.server, transport="http", label=label, stateful=True, discovery=discovery, code=code, app=app,
                token=token,  # the initializing request's: the session is that token's
            ) as session:
                self._sessions.add(session_id, session)
                task_status.started(session)
                await session.closed.wait()
        finally:
            self._sessions.remove(session_id)

    async def expire_idle(self) -> None:
        """Drop legacy sessions nobody has used for a long time (``SessionTable.expire_idle``)."""
        await self._sessions.expire_idle()

    async def _exchange(
        self,
        session: Session,
        request: Request,
        receive: Receive,
        send: Send,
        *,
        session_header: bytes | None = None,
    ) -> None:
        """Run one handshake-era request in ``session`` and stream what it produces into the
        HTTP response (2026-07-28 requests: :meth:`_exchange_modern`).

        ``session_header`` is the new session's id, sent if ``initialize`` succeeded.
        """
        outbox = _ResponseOutbox()
        try:
            # Handshake era: a dropped connection is not a cancellation (the call finishes
            # and its answer is dropped), so nothing watches for one while the answer is
            # awaited; a response that turns into a stream watches (``_pump``).
            await session.handle(request, outbox)
            await self._pump(outbox, receive, send, self._new_session(session, session_header))
        finally:
            outbox.drop()

    async def _exchange_modern(self, session: Session, request: Request, receive: Receive, send: Send) -> bool:
        """Run one 2026-07-28 request in its own ``session``; closing the response stream
        cancels it (that era's cancellation).

        The disconnect watcher (a task reading the socket) starts only when the response is
        not a prompt JSON answer: once :attr:`watch_after` has passed without one, or when the
        response turns into a stream. A request answered sooner costs no task, no nursery and
        no socket registration beyond the connection's own; a client that closes its
        connection during that first moment has its request cancelled when the moment ends
        (or gets nothing of an answer that came first, as with any answer crossing a close).
        True when no watcher was started (the session may serve another request).
        """
        outbox = _ResponseOutbox()
        try:
            await session.handle(request, outbox)
            watch_after = min(self.watch_after, self.sse_after)
            first, ended = await _first_message(outbox, watch_after)
            if first is not None and first[0]:
                await _send_json(send, _status_of(first[1]), first[1])
                return True
            with trio.CancelScope() as exchange:

                async def watch_disconnect() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    session.cancel(request.id, "the client closed the response stream")
                    exchange.cancel()

                # In the session's nursery: it ends with the session, right after this exchange.
                session.start_task(watch_disconnect, name="mcp http disconnect watcher")
                if first is None and not ended:
                    first, ended = await _first_message(outbox, self.sse_after - watch_after)
                if first is not None and first[0]:
                    await _send_json(send, _status_of(first[1]), first[1])
                else:
                    await self._stream(outbox, send, [], first, ended)
            return False
        finally:
            outbox.drop()

    @staticmethod
    def _new_session(session: Session, session_header: bytes | None) -> list[tuple[bytes, bytes]]:
        if session_header is not None and session.initialized.is_set():
            return [(b"mcp-session-id", session_header)]
        return []

    async def _pump(
        self,
        channel: _ResponseOutbox,
        receive: Receive,
        send: Send,
        headers: list[tuple[bytes, bytes]],
    ) -> None:
        """A handshake-era response: JSON when the answer comes first, else SSE (see the
        module docstring); once it is a stream, a closed stream stops the keep-alives."""
        first, ended = await _first_message(channel, self.sse_after)
        if first is not None and first[0]:
            await _send_json(send, 200, first[1], headers)
            return
        async with trio.open_nursery() as nursery:

            async def watch_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch_disconnect)
            await self._stream(channel, send, headers, first, ended)
            nursery.cancel_scope.cancel()

    async def _stream(
        self,
        channel: _ResponseOutbox,
        send: Send,
        headers: list[tuple[bytes, bytes]],
        first: tuple[bool, bytes] | None,
        ended: bool,
    ) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [*_SSE_HEADERS, *headers]})
        # The head goes out with the first event, or with a keep-alive comment when the request
        # has been silent (the server writes a head together with the body that follows it).
        await send({"type": "http.response.body", "body": _KEEPALIVE if first is None else _sse(first[1]),
                    "more_body": True})
        while not ended:
            item = None
            with trio.move_on_after(self.sse_after):
                try:
                    item = await channel.receive()
                except trio.EndOfChannel:
                    ended = True
            if item is None and not ended:
                await send({"type": "http.response.body", "body": _KEEPALIVE, "more_body": True})
            elif item is not None:
                final, data = item
                await send({"type": "http.response.body", "body": _sse(data), "more_body": not final})
                if final:
                    return
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    # --- GET and DELETE ----------------------------------------------------------------------

    async def _get(self, headers: Headers, receive: Receive, send: Send, app: str | None = None) -> None:
        session_id = headers.get("mcp-session-id")
        if session_id is None:
            raise _Reply(405, "Method Not Allowed: GET needs an Mcp-Session-Id (2026-07-28 clients use "
                         "subscriptions/listen instead)", headers=[(b"allow", b"POST")])
        entry = self._lookup(session_id, app)
        if not accepts(headers.get("accept"))[1]:
            raise _Reply(406, "Not Acceptable: the GET stream is text/event-stream")
        if entry.streaming:
            raise _Reply(409, "Conflict: this session already has a GET stream open")
        if not self._sessions.make_stream_room(entry):
            raise _Reply(429, "Too Many Requests: this token's other GET streams all have calls in flight; "
                         "close some sessions (DELETE) first")
        session = entry.session
        outbox = _ResponseOutbox()
        entry.streaming = True
        session.notify_outbox = outbox
        try:
            await send({"type": "http.response.start", "status": 200, "headers": list(_SSE_HEADERS)})
            await send({"type": "http.response.body", "body": b"", "more_body": True})  # the head, now
            async with trio.open_nursery() as nursery:

                async def end_when(event: Callable[[], Awaitable[Any]]) -> None:
                    await event()
                    nursery.cancel_scope.cancel()

                async def disconnected() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass

                nursery.start_soon(end_when, disconnected)
                nursery.start_soon(end_when, session.closed.wait)
                nursery.start_soon(end_when, self.server.shutdown.wait)
                while True:
                    item = None
                    with trio.move_on_after(self.sse_after):
                        item = await outbox.receive()
                    body = _KEEPALIVE if item is None else _sse(item[1])
                    await send({"type": "http.response.body", "body": body, "more_body": True})
        finally:
            outbox.drop()
            entry.streaming = False
            if session.notify_outbox is outbox:
                session.notify_outbox = None
        with trio.move_on_after(1) as cleanup:
            cleanup.shield = True
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _delete(self, headers: Headers, send: Send, app: str | None = None) -> None:
        session_id = headers.get("mcp-session-id")
        if session_id is None:
            raise _Reply(405, "Method Not Allowed: DELETE needs an Mcp-Session-Id", headers=[(b"allow", b"POST")])
        entry = self._lookup(session_id, app)
        self._sessions.remove(session_id)
        entry.session.close()
        log.info("http_session_closed", session=entry.session.label)
        await _send_empty(send, 200)


def no_token_message(authorization: str | None) -> str:
    """Why a request without a valid token is refused, and what to do (see ``_route``)."""
    what = "no 'Authorization' header" if authorization is None else "the 'Authorization' header holds no valid token"
    return (f"Forbidden: {what}. toolbridge does not use OAuth: configure your MCP client to send the header "
            "'Authorization: Bearer <token>' with the token printed by `toolbridge token` (it changes when "
            "the token is rotated).")


def _app_of(raw_path: str) -> str | None:
    """The label in ``/mcp/apps/<label>`` (one trailing slash allowed); None for other paths.

    Raises a 404 :class:`_Reply` when the path is under ``/mcp/apps`` but names no valid label
    (empty, too long, a ``/`` or ``..`` in it, characters a label never has)."""
    if raw_path.rstrip("/") == APPS_PATH_PREFIX.rstrip("/"):
        name = ""
    elif raw_path.startswith(APPS_PATH_PREFIX):
        name = raw_path[len(APPS_PATH_PREFIX):]
        if name.endswith("/"):
            name = name[:-1]
    else:
        return None
    problem = check_app_name(name)
    if problem is not None:
        log.warning("http_rejected", reason="app name", length=len(name))
        raise _Reply(404, f"Not Found: {APPS_PATH_PREFIX}<app label> serves one app; {problem}")
    return name


class _Disconnected(BrokerError):
    """The client went away while we were reading its request."""


async def _first_message(channel: _ResponseOutbox, seconds: float) -> tuple[tuple[bool, bytes] | None, bool]:
    """The first message of a response if it comes within ``seconds``, and whether the
    messages ended (without one) meanwhile."""
    with trio.move_on_after(seconds):
        try:
            return await channel.receive(), False
        except trio.EndOfChannel:
            return None, True
    return None, False


def _status_of(data: bytes) -> int:
    """The HTTP status for a modern JSON response: errors map like the SDK's server maps them."""
    if b'"error"' not in data:
        return 200
    try:
        message = jsonrpc.parse_message(data)
    except RpcError:
        return 200
    if isinstance(message, Response) and isinstance(message.error, dict):
        return _MODERN_STATUS.get(message.error.get("code"), 200)  # type: ignore[arg-type]
    return 200


# --- serving -------------------------------------------------------------------------------


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket (exclusive on Windows). Raises StartupError if the port is taken."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise StartupError(f"cannot listen on {host}:{port} for MCP over HTTP: {exc.strerror}") from None
    sock = socket.socket(family, kind, proto)
    try:
        if hasattr(socket, "SO_EXCLUSIVEADDRUSE"):  # Windows: SO_REUSEADDR would allow port theft
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_EXCLUSIVEADDRUSE, 1)
        else:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if port_in_use(exc):
            raise
        raise StartupError(f"cannot listen on {host}:{port} for MCP over HTTP: {exc.strerror}") from None
    return sock


async def serve_http(
    server: McpServer,
    host: str,
    port: int,
    *,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve MCP at ``http://host:port/mcp`` until the daemon stops; reports the bound port.

    Raises :class:`StartupError` when the port is taken or cannot be bound.
    """
    settings = server.settings
    ssl_context = server_context(settings)  # HTTPS with tls_cert / tls_key (see broker.config.tls)
    try:
        sock = bind_socket(host, port)
    except OSError as exc:
        if port_in_use(exc):
            raise port_taken_error(host, port, "MCP HTTP", "--http-port", settings.home) from None
        raise
    bound = sock.getsockname()[1]
    # HTTP connections take at most half the descriptors (the daemon raised its limit at start).
    limits = Limits(max_connections=http_connection_cap(descriptor_limit()))
    async with trio.open_nursery() as nursery:
        app = HttpApp(server, nursery)

        async def run(*, task_status: trio.TaskStatus[Any]) -> None:
            try:
                await serve_app(app, sock, shutdown=server.shutdown, ssl_context=ssl_context, task_status=task_status,
                                limits=limits)
            finally:
                nursery.cancel_scope.cancel()  # legacy sessions end with the server

        await nursery.start(run)
        nursery.start_soon(app.expire_idle)
        nursery.start_soon(app.stateless.run)
        log.info("http_listening", host=host, port=bound, path=PATH)
        task_status.started(bound)
