"""The status page and ``/metrics``, served on the HTTP port beside ``/mcp``.

Theory of operation
-------------------
``http.HttpApp`` checks the ``Host`` header (loopback or configured, against DNS rebinding)
and then hands every path other than ``/mcp`` to :meth:`StatusPages.serve`, which answers:

``GET /``               the page (``static/index.html``), with a session cookie; else a page
                        saying how to log in (403)
``GET /login``          the login page: its script reads the ticket from the URL's fragment
``POST /login``         redeems a ticket (``broker.config.web_login``): sets the cookie
``GET /static/<file>``  the page's script and style (nothing secret)
``GET /api/status``     the daemon's state as JSON (:meth:`Monitor.state`), with the cookie
``POST /api/calls/<id>/cancel``  cancels a call in flight, with the cookie and CSRF proof
``GET /api/inspect/catalog``     the tools this login may call, for the tool inspector
``POST /api/inspect/call``       calls one from the page, with the cookie and CSRF proof
``POST /api/inspect/mcp``        lists, reads and gets an app's resources and prompts, likewise
                        (``broker.mcp.inspector``: the router's whole pipeline, agent ``status-page``)
``GET /metrics``        Prometheus text format, with the bearer token (as ``/mcp`` takes it)

Access. ``toolbridge open`` mints a one-time ticket valid for a minute and opens
``/login#<ticket>``: browsers never send a fragment, so neither the token nor the ticket is
in any request line or log. The login page posts the ticket and gets a random session id in
a cookie that is ``HttpOnly`` (no script reads it), ``SameSite=Strict``, ``Path=/`` and, with
TLS, ``Secure``; sessions live :data:`SESSION_SECONDS` in memory (a restart logs everyone out)
and at most :data:`MAX_SESSIONS` at once. A login by ticket may call every tool (the ticket
comes from the default token); a script may instead log in with ``Authorization: Bearer
<named token>`` and its session may then only call what that token's ``agent`` scopes allow. The cookie is named after the port, so two daemons
on one machine do not overwrite each other's (cookies ignore ports).

Requests from other pages. Any ``Origin`` a browser sends must be this page's own origin
exactly (scheme, host and port): other local servers share our *site* (so ``SameSite`` does
not keep the cookie from them) but not our origin. A state-changing request (a POST) must also
carry the origin (browsers always send it on POST), a custom header (which a cross-origin page
cannot add without a CORS preflight, which we never grant) and, for cancel, the session's CSRF
token, which only the page's own script can read from ``/api/status``. Every response forbids
framing and sniffing and sets a strict Content-Security-Policy (scripts from ``/static`` only).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
import structlog
import trio

from ..config.tokens import Grant
from ..config.tokens import DEFAULT_GRANT_SCOPES
from ..config.web_login import TicketBook, login_label
from . import inspector
from .gate import Headers
from .scope import check_app_name
from .monitor import Monitor
from .server import McpServer

log = structlog.get_logger("toolbridge.status_page")

__all__ = ["StatusPages", "SESSION_SECONDS", "MAX_SESSIONS", "CSRF_HEADER", "cookie_name"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

#: How long a browser stays logged in.
SESSION_SECONDS: Final = 8 * 3600.0
MAX_SESSIONS: Final = 32
#: The header a state-changing request carries (its value: the session's CSRF token, or "1"
#: for the login, which has no session yet).
CSRF_HEADER: Final = "x-toolbridge-csrf"
_MAX_BODY: Final = 4096
_STATIC: Final = Path(__file__).parent / "static"
_FILES: Final = {
    "index.html": "text/html; charset=utf-8",
    "login.html": "text/html; charset=utf-8",
    "status.js": "text/javascript; charset=utf-8",
    "login.js": "text/javascript; charset=utf-8",
    "status.css": "text/css; charset=utf-8",
    "inspector.js": "text/javascript; charset=utf-8",
    "uPlot.iife.min.js": "text/javascript; charset=utf-8",  # uPlot 1.6.32 (MIT, uPlot.LICENSE)
    "uPlot.min.css": "text/css; charset=utf-8",
    "uPlot.LICENSE": "text/plain; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
_SECURITY_HEADERS: Final = [
    (b"content-security-policy", b"default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                                 b"img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
]
_LOGIN_NEEDED: Final = (
    "<!doctype html><meta charset=utf-8><title>toolbridge</title>"
    "<p>Not logged in (or the login expired). Run <code>toolbridge open</code> to open this page, or "
    "<code>toolbridge open --print</code> for a one-time link to paste here.</p>"
).encode()


def cookie_name(port: int | None) -> str:
    """The session cookie's name for the daemon on ``port``."""
    return "toolbridge_session" if port is None else f"toolbridge_session_{port}"


@attrs.define
class _WebSession:
    expires: float
    csrf: str
    #: What the login may call from the inspector.
    grant: Grant
    #: The ``session`` the call log shows for its calls (not the cookie: that stays secret).
    label: str


class StatusPages:
    """The routes above, for one HTTP server. ``grant`` checks an ``Authorization`` header."""

    def __init__(self, server: McpServer, grant: Callable[[str | None], Grant | None]) -> None:
        self.server = server
        self.router = server.router
        self.monitor = Monitor(server)
        self._login_key = server.auth.derive_key(login_label(server.auth.instance))  # this start's (web_login)
        self._grant = grant
        self._tickets = TicketBook()
        self._sessions: dict[str, _WebSession] = {}
        self._files = {name: (_STATIC / name).read_bytes() for name in _FILES}

    async def serve(self, scope: Scope, headers: Headers, receive: Receive, send: Send) -> bool:
        """Answer the request if its path is one of ours; False (nothing sent) if not."""
        path, method = scope["path"], scope["method"]
        if path == "/metrics":
            await self._metrics(headers, method, send)
            return True
        route = _ROUTES.get((method, path))
        cancel_id = _cancel_id(path) if method == "POST" else None
        static = path.removeprefix("/static/") if path.startswith("/static/") and method == "GET" else None
        if route is None and cancel_id is None and static not in _FILES:
            if path in ("/", "/login", "/api/status") or path.startswith(("/static/", "/api/")):
                await _send(send, 405 if path in ("/", "/login", "/api/status") else 404,
                            b'{"error": "not here"}', "application/json")
                return True
            return False
        own_origin = f"{scope.get('scheme', 'http')}://{headers.get('host')}"
        origin = headers.get("origin")
        if origin is not None and origin != own_origin:
            log.warning("status_page_rejected", reason="origin")
            await _send(send, 403, b'{"error": "requests from other origins are not allowed"}', "application/json")
            return True
        if method == "POST" and (origin is None or headers.get(CSRF_HEADER) is None):
            await _send(send, 403, b'{"error": "a state-changing request needs its Origin and CSRF header"}',
                        "application/json")
            return True
        if static is not None:
            await _send(send, 200, self._files[static], _FILES[static])
        elif route is not None:
            await route(self, scope, headers, receive, send)
        else:
            assert cancel_id is not None
            await self._cancel(scope, headers, cancel_id, send)
        return True

    # --- sessions ----------------------------------------------------------------------------

    def _session(self, scope: Scope, headers: Headers) -> _WebSession | None:
        name = cookie_name(_port(scope))
        now = trio.current_time()
        for value in _cookies(scope, name):
            session = self._sessions.get(value)
            if session is not None and session.expires > now:
                return session
        return None

    def _new_session(self, grant: Grant) -> tuple[str, _WebSession]:
        now = trio.current_time()
        for key in [k for k, s in self._sessions.items() if s.expires <= now]:
            del self._sessions[key]
        while len(self._sessions) >= MAX_SESSIONS:  # the oldest goes (dicts keep insertion order)
            del self._sessions[next(iter(self._sessions))]
        value = secrets.token_urlsafe(32)
        session = self._sessions[value] = _WebSession(now + SESSION_SECONDS, secrets.token_urlsafe(24), grant,
                                                      f"page-{secrets.token_hex(4)}")
        return value, session

    # --- handlers ----------------------------------------------------------------------------

    async def _index(self, scope: Scope, headers: Headers, receive: Receive, send: Send) -> None:
        if self._session(scope, headers) is None:
            await _send(send, 403, _LOGIN_NEEDED, "text/html; charset=utf-8")
        else:
            await _send(send, 200, self._files["index.html"], _FILES["index.html"])

    async def _login_page(self, scope: Scope, headers: Headers, receive: Receive, send: Send) -> None:
        await _send(send, 200, self._files["login.html"], _FILES["login.html"])

    async def _login(self, scope: Scope, headers: Headers, receive: Receive, send: Send) -> None:
        body = await _read_body(receive)
        bearer = headers.get("authorization")
        grant: Grant | None = None
        if bearer is not None:  # a script, with a (named) token: its scopes bound the inspector
            grant = self._grant(bearer)
            if grant is not None and not any(s.kind in ("all", "agent") for s in grant.scopes):
                grant = None
        else:
            try:
                ticket = json.loads(body)["ticket"] if body is not None else None
            except (ValueError, KeyError, TypeError):
                ticket = None
            if isinstance(ticket, str) and self._tickets.redeem(self._login_key, ticket, time.time()):
                grant = Grant("default", DEFAULT_GRANT_SCOPES)
        if grant is None:
            log.warning("status_page_login_failed")
            await _send(send, 403, json.dumps({"error": "this login link is not valid: it works once, for a "
                                               "minute. Run `toolbridge open` again."}).encode(), "application/json")
            return
        value, _ = self._new_session(grant)
        cookie = (f"{cookie_name(_port(scope))}={value}; Path=/; Max-Age={int(SESSION_SECONDS)}; HttpOnly; "
                  "SameSite=Strict" + ("; Secure" if scope.get("scheme") == "https" else ""))
        log.info("status_page_login", sessions=len(self._sessions))
        await _send(send, 200, b"{}", "application/json", [(b"set-cookie", cookie.encode())])

    async def _status(self, scope: Scope, headers: Headers, receive: Receive, send: Send) -> None:
        session = self._session(scope, headers)
        if session is None:
            await _send(send, 403, b'{"error": "not logged in: run `toolbridge open`"}', "application/json")
            return
        state = self.monitor.state()
        state["csrf"] = session.csrf
        await _send(send, 200, json.dumps(state).encode(), "application/json")

    async def _proven_session(self, scope: Scope, headers: Headers, send: Send) -> _WebSession | None:
        """The session of a state-changing request that carries its CSRF token; else None (403 sent)."""
        session = self._session(scope, headers)
        if session is None or not secrets.compare_digest(headers.get(CSRF_HEADER) or "", session.csrf):
            await _send(send, 403, b'{"error": "not logged in, or the CSRF token is wrong: reload the page"}',
                        "application/json")
            return None
        return session

    async def _catalog(self, scope: Scope, headers: Headers, receive: Receive, send: Send) -> None:
        session = self._session(scope, headers)
        if session is None:
            await _send(send, 403, b'{"error": "not logged in: run `toolbridge open`"}', "application/json")
            return
        body = json.dumps(inspector.catalog(self.router.list_tools(),
                                            [i.label for i in self.router.registry.instances()], session.grant)).encode()
        await _send(send, 200, body, "application/json")

    async def _inspect_call(self, scope: Scope, headers: Headers, receive: Receive, send: Send) -> None:
        session = await self._proven_session(scope, headers, send)
        if session is None:
            return
        request = inspector.parse_call(await _read_body(receive, inspector.MAX_CALL_BODY))
        if isinstance(request, str):
            await _send(send, 400, json.dumps({"error": request}).encode(), "application/json")
            return
        name, arguments = request
        tool = self.router.registry.lookup(name)
        if tool is not None and not inspector.may_call(session.grant, tool):
            log.warning("status_page_rejected", reason="scope")
            await _send(send, 403, json.dumps({"error": f"this login's token may not call {name}"}).encode(),
                        "application/json")
            return
        await inspector.run_call(self.router, name, arguments, session.label, receive, send, _SECURITY_HEADERS)

    async def _inspect_mcp(self, scope: Scope, headers: Headers, receive: Receive, send: Send) -> None:
        session = await self._proven_session(scope, headers, send)
        if session is None:
            return
        request = inspector.parse_mcp(await _read_body(receive, inspector.MAX_CALL_BODY))
        if isinstance(request, str):
            await _send(send, 400, json.dumps({"error": request}).encode(), "application/json")
            return
        app, method, params = request
        if check_app_name(app) is not None or not session.grant.allows_agent_to(app):
            log.warning("status_page_rejected", reason="scope")
            await _send(send, 403, json.dumps({"error": f"this login's token may not use the app {app!r}"}).encode(),
                        "application/json")
            return
        answer = await inspector.mcp_request(self.server, app, method, params, session.label, receive)
        await _send(send, 200, json.dumps(answer).encode(), "application/json")

    async def _cancel(self, scope: Scope, headers: Headers, correlation_id: int, send: Send) -> None:
        if await self._proven_session(scope, headers, send) is None:
            return
        # Not ``calls.get``: that finds only calls given to an app, and the page lists (and may
        # cancel) calls still waiting for an admission slot too.
        call = next((c for c in self.router.calls if c.correlation_id == correlation_id), None)
        cancelled = call is not None and self.router.cancel(call, "cancelled from the status page")
        if cancelled:
            log.info("status_page_cancel", correlation_id=correlation_id)
        await _send(send, 200 if cancelled else 404, json.dumps({"cancelled": cancelled}).encode(), "application/json")

    async def _metrics(self, headers: Headers, method: str, send: Send) -> None:
        if method != "GET":
            await _send(send, 405, b"GET only\n", "text/plain; charset=utf-8", [(b"allow", b"GET")])
            return
        grant = self._grant(headers.get("authorization"))
        if grant is None or not grant.allows_agent:
            # 403 and no challenge, as for /mcp (see http._route).
            await _send(send, 403, b"Forbidden: /metrics needs 'Authorization: Bearer <token>' with the token "
                        b"printed by `toolbridge token` (or a named token with the agent scope)\n",
                        "text/plain; charset=utf-8")
            return
        from prometheus_client.exposition import CONTENT_TYPE_LATEST

        await _send(send, 200, self.monitor.exposition(), CONTENT_TYPE_LATEST)


_Handler = Callable[[StatusPages, Scope, Headers, Receive, Send], Awaitable[None]]
_ROUTES: Final[dict[tuple[str, str], _Handler]] = {
    ("GET", "/"): StatusPages._index,
    ("GET", "/login"): StatusPages._login_page,
    ("POST", "/login"): StatusPages._login,
    ("GET", "/api/status"): StatusPages._status,
    ("GET", "/api/inspect/catalog"): StatusPages._catalog,
    ("POST", "/api/inspect/call"): StatusPages._inspect_call,
    ("POST", "/api/inspect/mcp"): StatusPages._inspect_mcp,
}


def _cancel_id(path: str) -> int | None:
    parts = path.split("/")  # "", "api", "calls", "<id>", "cancel"
    if len(parts) == 5 and parts[1:3] == ["api", "calls"] and parts[4] == "cancel" and parts[3].isdigit() \
            and len(parts[3]) < 19:
        return int(parts[3])
    return None


def _port(scope: Scope) -> int | None:
    server = scope.get("server")
    return server[1] if isinstance(server, (tuple, list)) and len(server) == 2 else None


def _cookies(scope: Scope, name: str) -> list[str]:
    found = []
    for key, header in scope["headers"]:
        if key.lower() != b"cookie":
            continue
        for part in header.decode("latin-1").split(";"):
            key, _, value = part.strip().partition("=")
            if key == name:
                found.append(value)
    return found


async def _read_body(receive: Receive, limit: int = _MAX_BODY) -> bytes | None:
    """The request body, or None if it is over ``limit`` bytes or the client left."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _send(send: Send, status: int, body: bytes, content_type: str,
                headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type.encode()), *_SECURITY_HEADERS, *headers]})
    await send({"type": "http.response.body", "body": body})
