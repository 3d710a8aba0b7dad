"""A small HTTP/1.1 server on trio and h11: the daemon's HTTP port (``/mcp``, the status page).

Theory of operation
-------------------
h11 (sans-IO, see STYLE.md 1) parses requests and frames responses; this module owns the
sockets, the deadlines and the calls into the application. The application is an ASGI-style
callable, ``app(scope, receive, send)``, of which only the HTTP subset is used (what
``http.HttpApp`` and ``status_page.StatusPages`` need): a ``scope`` of type ``http``,
``receive()`` giving the body as ``http.request`` messages and then, once the body is read,
waiting until the client goes away and returning ``http.disconnect``; ``send()`` taking
``http.response.start`` and ``http.response.body`` (``more_body`` for a streamed response).

One trio task per connection does everything for it, in order: read a request's head (and,
when the application asks, its body), run the application *in that same task* (no task or
channel per request), write the response, then read the next request on the same
connection (keep-alive). A response whose body comes in one message (every JSON answer) is
written with one ``send_all``: head, body and end together. Requests pipelined on one
connection are answered one after another (h11 keeps the next request's bytes until the
current exchange ends); while the application waits for a disconnect, at most
:data:`_MAX_PIPELINED` bytes of a next request are read ahead, then reading pauses.

Limits (a client that is slow or hostile costs a connection, never the loop):

* a request's head (request line and headers) must be complete within
  ``Limits.head_seconds`` of the connection's start or of the previous response's end (the
  keep-alive idle time and the slowloris bound at once; hypercorn, which served this port
  before, counted its 5 s keep-alive the same way); with TLS the handshake falls in it too;
* a head over ``Limits.max_head_bytes`` is refused with 431; a malformed one with 400;
* a body must arrive within ``Limits.body_seconds`` of its head (408 otherwise); its size
  limit is the application's (``max_http_body_bytes``, 413); a body the application did not
  read (it answered first) is read and dropped after the answer, up to
  ``Limits.max_drain_bytes`` within the body deadline, so the client gets to read the answer
  (see ``_drain_body``);
* a response the application leaves unfinished, an error in it (500), a body it did not
  read beyond that bound, or ``Connection: close`` end the connection after the exchange.

HTTP/1.1 only (and 1.0): no HTTP/2, with or without TLS (hypercorn offered h2 through ALPN;
MCP clients use HTTP/1.1, and nothing here needs h2). A send to a client that has gone away
is dropped silently, as hypercorn did; the application learns of the disconnect through
``receive()``.

Connections: at most ``Limits.max_connections`` are open at once. One past it is accepted and
closed at once (no byte read or written: the cheapest refusal, and one that frees its
descriptor at once); the condition is logged at most once per :data:`WARN_INTERVAL` with the
count refused, never a traceback. Should accepting fail for want of descriptors or memory
anyway (``EMFILE``: other descriptors in use), the server waits a moment and tries again,
logged the same way (trio's own ``serve_listeners`` logged a traceback at every retry).

Shutdown: when ``shutdown`` is set the listener closes, idle connections close at once, and
exchanges in progress get ``Limits.drain_seconds`` to finish (their responses say
``Connection: close``) before they are cancelled.
"""

from __future__ import annotations

import email.utils
import errno
import socket
import ssl
import time
import urllib.parse
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final

import attrs
import h11
import structlog
import trio

log = structlog.get_logger("toolbridge.http")

__all__ = ["Limits", "serve_app", "serve_connection", "App", "Scope", "Receive", "Send"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

_RECEIVE_SIZE: Final = 65536
#: Read-ahead of a pipelined next request while the application waits for a disconnect.
_MAX_PIPELINED: Final = 65536
_DISCONNECT: Final = {"type": "http.disconnect"}
#: At most one "connections at the cap" warning per this many seconds.
WARN_INTERVAL: Final = 10.0
#: What ``accept`` fails with when the process or the system is out of descriptors or memory.
_OUT_OF_RESOURCES: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
#: How long to wait before accepting again after such a failure (trio's own choice).
_ACCEPT_RETRY_SECONDS: Final = 0.1
_REASONS: Final = {400: b"Bad Request", 408: b"Request Timeout", 431: b"Request Header Fields Too Large",
                   500: b"Internal Server Error"}


@attrs.frozen
class Limits:
    """The server's deadlines and sizes (see the module docstring)."""

    head_seconds: float = 10.0
    body_seconds: float = 60.0
    max_head_bytes: int = 16 * 1024
    drain_seconds: float = 1.0
    #: The most of an unread request body (the app answered first: a 403, a 413) read and
    #: dropped after its response. Reading it is what lets the client see that response:
    #: closing a socket with unread bytes makes the kernel send a reset, which destroys the
    #: answer in flight (Python's ``http.client`` writes a whole body before it reads). A larger
    #: rest closes the connection anyway.
    max_drain_bytes: int = 64 * 1024 * 1024
    #: Connections open at once; past it a new one is closed as soon as it is accepted. The
    #: daemon sets it below its descriptor limit (``broker.config.fdlimit``), so a flood of
    #: connections cannot take the descriptors app links and the admin socket need.
    max_connections: int = 1024


class _Date:
    """The ``Date`` header value, formatted at most once a second."""

    def __init__(self) -> None:
        self._second = -1
        self._value = b""

    def value(self) -> bytes:
        now = int(time.time())
        if now != self._second:
            self._second = now
            self._value = email.utils.formatdate(now, usegmt=True).encode("ascii")
        return self._value


class _Server:
    def __init__(self, app: App, limits: Limits, tls: bool) -> None:
        self.app = app
        self.limits = limits
        self.scheme = "https" if tls else "http"
        self.date = _Date()
        self.stopping = False
        #: The cancel scopes of connections waiting for a request's head (closed at shutdown).
        self.idle: set[trio.CancelScope] = set()
        #: Connections open now (see ``Limits.max_connections``).
        self.connections = 0
        #: Refused (at the cap, or accept failed) since the last warning, and when the next may go.
        self.refused = 0
        self.next_warning = 0.0

    async def handle(self, stream: trio.abc.Stream) -> None:
        await _Connection(self, stream).run()

    async def serve(self, stream: trio.abc.Stream) -> None:
        """One accepted connection, counted while it is open; closed at the end."""
        self.connections += 1
        try:
            await self.handle(stream)
        finally:
            self.connections -= 1
            await trio.aclose_forcefully(stream)

    def at_cap(self) -> bool:
        return self.connections >= self.limits.max_connections

    def note_refused(self, reason: str) -> None:
        """Count a refused connection (or a failed accept); warn at most once per interval."""
        self.refused += 1
        now = trio.current_time()
        if now >= self.next_warning:
            log.warning("http_connections_at_cap", reason=reason, limit=self.limits.max_connections,
                        open=self.connections, refused=self.refused,
                        hint="HTTP clients hold too many connections open; new ones are closed until some end")
            self.refused = 0
            self.next_warning = now + WARN_INTERVAL

    def stop(self) -> None:
        self.stopping = True
        for scope in self.idle:
            scope.cancel()


def _addresses(stream: trio.abc.Stream) -> tuple[Any, Any]:
    transport = stream.transport_stream if isinstance(stream, trio.SSLStream) else stream
    sock = getattr(transport, "socket", None)
    try:
        peer, local = sock.getpeername(), sock.getsockname()  # type: ignore[union-attr]
    except (AttributeError, OSError):
        return None, None
    if sock.family in (socket.AF_INET, socket.AF_INET6):  # type: ignore[union-attr]
        return (peer[0], peer[1]), (local[0], local[1])
    return None, None


class _Connection:
    """One client connection: its h11 state machine and the exchange in progress."""

    def __init__(self, server: _Server, stream: trio.abc.Stream) -> None:
        self.server = server
        self.stream = stream
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=server.limits.max_head_bytes)
        self.client, self.local = _addresses(stream)
        self.eof = False  # the client closed its side (it may still read our answer)
        self.broken = False  # the socket broke, or the connection cannot be reused: nothing more to send
        # Per exchange:
        self.request: h11.Request | None = None
        self.start: MutableMapping[str, Any] | None = None
        self.response_started = False
        self.response_done = False
        self.body_done = False
        self.body_deadline = 0.0
        self.failure: int | None = None  # an HTTP status to answer with if the app sends nothing
        #: The client waited for ``100 Continue`` when the answer went out: it sends no body.
        self.body_withheld = False

    async def run(self) -> None:
        try:
            while not self.server.stopping:
                request = await self._read_head()
                if request is None:
                    return
                await self._exchange(request)
                if self.eof or self.broken or self.h11.our_state is not h11.DONE \
                        or self.h11.their_state is not h11.DONE:
                    return
                self.h11.start_next_cycle()
        except h11.RemoteProtocolError as exc:  # a malformed or oversized head
            await self._refuse(exc.error_status_hint)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    # --- reading ---------------------------------------------------------------------------

    async def _receive(self) -> None:
        """Read from the socket into h11 (``b""`` at the end of the stream)."""
        try:
            data = await self.stream.receive_some(_RECEIVE_SIZE)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""
        if not data:
            self.eof = True
        self.h11.receive_data(bytes(data) if isinstance(data, bytearray) else data)

    async def _read_head(self) -> h11.Request | None:
        """The next request's head; None when the client closes, times out or we stop."""
        scope = trio.CancelScope(deadline=trio.current_time() + self.server.limits.head_seconds)
        self.server.idle.add(scope)
        try:
            with scope:
                while True:
                    event = self.h11.next_event()
                    if event is h11.NEED_DATA:
                        await self._receive()
                    elif isinstance(event, h11.Request):
                        # h11 bounds only a head still incomplete; one that came whole in a
                        # single read is measured here.
                        size = len(event.target) + sum(len(n) + len(v) + 4 for n, v in event.headers.raw_items())
                        if size > self.server.limits.max_head_bytes:
                            raise h11.RemoteProtocolError("request head too large", error_status_hint=431)
                        return event
                    else:  # ConnectionClosed, or PAUSED after a protocol error
                        return None
        finally:
            self.server.idle.discard(scope)
        # The head deadline passed or we stop. A client idle between requests is just closed (a
        # 408 could cross its next request and be read as the answer); half a head gets a 408.
        if not self.server.stopping and self.h11.trailing_data[0]:
            await self._refuse(408)
        return None

    async def receive(self) -> MutableMapping[str, Any]:
        """ASGI ``receive``: the body in ``http.request`` messages, then ``http.disconnect``."""
        if self.body_done:
            return await self._wait_disconnect()
        if self.h11.they_are_waiting_for_100_continue:
            await self._send_raw(self.h11.send(h11.InformationalResponse(status_code=100, headers=[])))
        # Usually the whole body came with its head: no deadline to set up for it.
        message = self._buffered_body()
        if message is not None:
            return message
        with trio.move_on_at(self.body_deadline):
            while True:
                await self._receive()
                message = self._buffered_body()
                if message is not None:
                    return message
        self.failure = 408
        self.body_done = True
        return dict(_DISCONNECT)

    def _buffered_body(self) -> MutableMapping[str, Any] | None:
        """The next ``receive`` message from what h11 holds; None when it needs more data."""
        chunks: list[bytes] = []
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:  # a malformed body (chunked framing)
                self.failure = exc.error_status_hint
                self.body_done = True
                return dict(_DISCONNECT)
            if isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                self.body_done = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            elif event is h11.NEED_DATA and not self.eof:
                if chunks:  # what has come so far; the rest on the next call
                    return {"type": "http.request", "body": b"".join(chunks), "more_body": True}
                return None
            else:  # the client went away in the middle of its body
                self.eof = self.body_done = True
                return dict(_DISCONNECT)

    async def _wait_disconnect(self) -> MutableMapping[str, Any]:
        """Return once the client has closed its side of the connection."""
        read_ahead = 0
        while not self.eof:
            if read_ahead > _MAX_PIPELINED:
                await trio.sleep_forever()  # until the app stops waiting (it cancels)
            try:
                data = await self.stream.receive_some(_RECEIVE_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                self.eof = True
            else:  # a pipelined next request: h11 keeps it for the next exchange
                read_ahead += len(data)
                self.h11.receive_data(bytes(data) if isinstance(data, bytearray) else data)
        return dict(_DISCONNECT)

    # --- one exchange ----------------------------------------------------------------------

    async def _exchange(self, request: h11.Request) -> None:
        self.request = request
        self.start = None
        self.response_started = self.response_done = self.body_done = False
        self.failure = None
        self.body_withheld = False
        self.body_deadline = trio.current_time() + self.server.limits.body_seconds
        target, _, query = request.target.partition(b"?")
        try:
            path = target.decode("ascii")
            if "%" in path:
                path = urllib.parse.unquote(path, errors="strict")
        except UnicodeError:
            await self._refuse(400)
            return
        scope: Scope = {
            "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": request.http_version.decode("ascii"), "method": request.method.decode("ascii"),
            "scheme": self.server.scheme, "path": path, "raw_path": target, "query_string": query,
            "root_path": "", "headers": request.headers, "client": self.client, "server": self.local,
            "extensions": {},
        }
        try:
            await self.server.app(scope, self.receive, self.send)
        except Exception:
            log.exception("http_server_error", detail="the HTTP application failed")
            self.failure = 500
        if not self.response_started and not self.broken:
            await self._refuse(self.failure or 500)
        elif not self.response_done:
            self.broken = True  # a response cut short: the connection cannot be reused
        else:
            await self._drain_body()

    async def _drain_body(self) -> None:
        """Read and drop the rest of a request body the app did not read (it answered first: a
        403, a 413), so that the client reads the answer instead of a connection reset, and so
        the connection can be reused: a client that wrote its head and body in separate writes
        (Node's fetch does) would otherwise find its kept-alive connection closed under its
        next request. At most ``Limits.max_drain_bytes``, within the body deadline; past
        either the connection closes. A client that waited for ``100 Continue`` and got the
        answer instead sends no body: its connection closes at once."""
        if self.body_withheld:
            self.broken = True
            return
        if self.h11.their_state is not h11.SEND_BODY:  # the usual case: the app read it all
            return
        drained = 0
        limit = self.server.limits.max_drain_bytes
        try:
            with trio.move_on_at(self.body_deadline):
                while self.h11.their_state is h11.SEND_BODY:
                    event = self.h11.next_event()
                    if isinstance(event, h11.Data):
                        drained += len(event.data)
                        if drained > limit:
                            break
                    elif event is h11.NEED_DATA and not self.eof:
                        await self._receive()
                    elif not isinstance(event, h11.EndOfMessage):
                        break
        except h11.RemoteProtocolError:
            pass
        if self.h11.their_state is h11.SEND_BODY:
            self.broken = True

    # --- writing ---------------------------------------------------------------------------

    async def send(self, message: MutableMapping[str, Any]) -> None:
        """ASGI ``send``. A response's head waits for its first body message, to go out with it
        in one write (a stream that must show its head before it has data sends an empty
        ``more_body`` message to flush it)."""
        kind = message["type"]
        if kind == "http.response.start":
            if self.start is not None or self.response_started:
                raise RuntimeError("http.response.start sent twice")
            self.start = message
            return
        if kind != "http.response.body":
            raise RuntimeError(f"unexpected ASGI message {kind!r}")
        if self.response_done:
            return
        body: bytes = message.get("body", b"")
        more: bool = message.get("more_body", False)
        assert self.request is not None
        suppress = self.request.method == b"HEAD"
        out: list[bytes] = []
        try:
            if not self.response_started:
                if self.start is None:
                    raise RuntimeError("http.response.body before http.response.start")
                self.body_withheld = self.h11.they_are_waiting_for_100_continue
                out.append(self.h11.send(self._response(self.start, None if more else len(body))))
                self.response_started = True
            if body and not suppress:
                out.append(self.h11.send(h11.Data(data=body)))
            if not more:
                out.append(self.h11.send(h11.EndOfMessage()))
                self.response_done = True
        except h11.LocalProtocolError:
            self.broken = self.response_done = True  # h11 cannot frame it: drop the connection
            raise
        await self._send_raw(b"".join(out))

    def _response(self, start: MutableMapping[str, Any], length: int | None) -> h11.Response:
        headers: list[tuple[bytes, bytes]] = list(start.get("headers", ()))
        names = {name.lower() for name, _ in headers}
        if length is not None and b"content-length" not in names and b"transfer-encoding" not in names:
            headers.append((b"content-length", b"%d" % length))
        headers.append((b"date", self.server.date.value()))
        if self.server.stopping:
            headers.append((b"connection", b"close"))
        return h11.Response(status_code=start["status"], headers=headers)

    async def _send_raw(self, data: bytes) -> None:
        if self.broken or not data:
            return
        try:
            await self.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.broken = True  # dropped silently; the app learns of it through receive()

    async def _refuse(self, status: int) -> None:
        """An error response of our own (no app involved), then the connection closes."""
        if self.broken or self.h11.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        body = _REASONS.get(status, b"Error") + b"\n"
        try:
            data = self.h11.send(h11.Response(status_code=status, reason=_REASONS.get(status, b""), headers=[
                (b"content-type", b"text/plain; charset=utf-8"), (b"content-length", b"%d" % len(body)),
                (b"connection", b"close"), (b"date", self.server.date.value())]))
            data += self.h11.send(h11.Data(data=body)) + self.h11.send(h11.EndOfMessage())
        except h11.LocalProtocolError:
            return
        self.response_started = self.response_done = True
        with trio.move_on_after(1):
            await self._send_raw(data)
        self.broken = True


async def serve_connection(app: App, stream: trio.abc.Stream, *, limits: Limits = Limits()) -> None:
    """Serve one connection (any trio stream) until it ends, then close it. :func:`serve_app`
    does this for each connection it accepts; tests drive it over
    ``trio.testing.memory_stream_pair``."""
    try:
        await _Server(app, limits, isinstance(stream, trio.SSLStream)).handle(stream)
    finally:
        await trio.aclose_forcefully(stream)


async def _accept_loop(server: _Server, listener: trio.abc.Listener[trio.abc.Stream], nursery: trio.Nursery) -> None:
    """Accept connections into ``nursery`` for ever; past the cap each is closed at once."""
    while True:
        try:
            stream = await listener.accept()
        except OSError as exc:
            if exc.errno not in _OUT_OF_RESOURCES:
                raise
            server.note_refused(errno.errorcode.get(exc.errno or 0, "accept failed"))
            await trio.sleep(_ACCEPT_RETRY_SECONDS)
            continue
        if server.at_cap():
            server.note_refused("cap")
            await trio.aclose_forcefully(stream)
            continue
        nursery.start_soon(server.serve, stream)


async def serve_app(
    app: App,
    sock: socket.socket,
    *,
    shutdown: trio.Event,
    ssl_context: ssl.SSLContext | None = None,
    limits: Limits = Limits(),
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` on the listening socket ``sock`` (which this takes over) until ``shutdown``.

    Returns after the drain (see the module docstring); reports readiness through ``task_status``.
    """
    listener: trio.abc.Listener[trio.abc.Stream] = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
    if ssl_context is not None:
        ssl_context.set_alpn_protocols(["http/1.1"])
        listener = trio.SSLListener(listener, ssl_context, https_compatible=True)
    server = _Server(app, limits, ssl_context is not None)
    async with trio.open_nursery() as nursery:  # the connections
        accepting = trio.CancelScope()

        async def accept() -> None:
            with accepting:
                async with listener:
                    await _accept_loop(server, listener, nursery)

        nursery.start_soon(accept)
        task_status.started()
        await shutdown.wait()
        accepting.cancel()
        server.stop()
        nursery.cancel_scope.deadline = trio.current_time() + limits.drain_seconds
