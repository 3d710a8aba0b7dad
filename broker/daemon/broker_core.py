"""The broker's shared state and the front of every TCP connection.

Theory of operation
-------------------
One :class:`BrokerCore` lives for the daemon's lifetime and owns the registry, the correlation
map and the router. Every connection to the app port starts in :meth:`handle_connection`: its
first line decides what it is — ``register`` (an app; see ``links``), ``agentConnect`` (the
``toolbridge stdio`` relay: MCP JSON-RPC lines from then on) or ``admin`` (one request from
the CLI, one answer). A connection that starts with anything else gets a fatal ``error`` and
is closed.

Until its first line is in, a connection is a *waiter* (:meth:`BrokerCore._first_message`):
it has ``first_byte_timeout`` (1 s) to send its first byte and ``register_timeout`` (5 s) for
the whole line, and at most ``max_unregistered_connections`` (128) wait at once, each able to
buffer up to a line's worth of memory. A newcomer that finds them all taken is not refused:
it evicts the oldest waiter that has sent nothing yet (else the oldest waiter), which gets a
fatal ``too_many_connections``. Real clients send their first line as soon as they connect,
so a flood of idle or reconnecting peers (no token needed) only ever evicts itself, and a
real client gets in. Connections over the daemon's Unix socket (``broker.daemon.local_socket``) wait
in a set of their own, so a TCP flood cannot touch them (only the home's owner can connect
there). Per-peer limits would not help on loopback, where every peer is 127.0.0.1.

Every token is checked by :attr:`BrokerCore.auth` (``broker.config.tokens``): ``agentConnect`` needs
the default token or the ``agent`` scope, ``admin`` the default token; connections made with
a named token are dropped when it is revoked.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import structlog
import trio

from app_client.protocol import AdminRequest, AdminResponse, AgentConnect, BadLine, Error, Message, Register, RemoteProtocolError
from app_client.transport import is_unix_stream

from ..core.calls import CorrelationMap
from ..core.outcome import OutcomeKind
from .connection import Connection, PeerClosed
from .links import AppLink, AppLinks, LinkEnd
from ..core.registry import Registry
from ..core.router import Router
from ..config.tokens import Authenticator
from ..federation.rules import FederationState
from .watchdog import LoopWatchdog
from ..version import VERSION as VERSION  # re-exported for one release: import it from broker.version

if TYPE_CHECKING:
    from ..core.calllog import CallLog
    from ..config.settings import Settings

log = structlog.get_logger("toolbridge.core")

#: Serves one ``agentConnect`` connection (``broker.mcp.front_door.install`` makes it).
AgentHandler = Callable[[Connection, AgentConnect], Awaitable[None]]
AdminHandler = Callable[["BrokerCore", AdminRequest], Awaitable[Any]]


@attrs.define
class Addresses:
    """Where the daemon listens: owned by ``run_daemon``, which fills it in as it binds; read
    by :meth:`BrokerCore.status`."""

    #: The app port (TCP).
    port: int | None = None
    #: The MCP Streamable HTTP port, once it is bound (None without HTTP).
    http_port: int | None = None
    #: The Unix socket's path, if the daemon listens on one.
    socket: str | None = None


@attrs.define(eq=False)
class _Waiter:
    """A connection that has not sent its first message yet (see ``_first_message``)."""

    conn: Connection
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    evicted: bool = False


class BrokerCore:
    """What a connection to the app port is served by (see the module docstring).

    Its parts come in through the constructor; every keyword has a default, so a test can
    build a bare core with ``BrokerCore(settings, token)``. The two parts that are built
    *from* the core (the MCP front door's agent handler, the uplink) come in through
    :meth:`attach`, once, right after. Nothing else writes its attributes from outside.
    """

    def __init__(
        self,
        settings: Settings,
        token: str,
        call_log: CallLog | None = None,
        *,
        federation: FederationState | None = None,
        addresses: Addresses | None = None,
        admin_handlers: Mapping[str, AdminHandler] | None = None,
        agent_handler: AgentHandler | None = None,
        uplink: Any = None,
    ) -> None:
        self.settings = settings
        self.token = token
        #: Checks the default token and the named, scoped tokens of the home (``tokens``).
        self.auth = Authenticator(token, settings.home)
        #: Federation (``federation``, ``uplink``): this daemon's id and the ids of the brokers
        #: it is uplinked into (nearest first, while connected; the uplink keeps them), and its
        #: uplink, if any.
        self.federation = federation if federation is not None else FederationState()
        self.uplink: Any = uplink
        #: Its NATS membership (``broker.federation.nats_link``), set by ``run_daemon`` with ``--nats``.
        self.nats: Any = None
        self.registry = Registry(settings)
        self.calls = CorrelationMap()
        self.call_log = call_log
        self.router = Router(settings, self.registry, self.calls, call_log)
        #: What app connections run in (``links``); ``links`` are the live ones, by link id.
        self.app_links = AppLinks(settings, self.auth, self.registry, self.router, self.calls, self.federation)
        self.links: dict[int, AppLink] = self.app_links.live
        self.started_at = time.time()
        #: Where the daemon listens (``run_daemon`` fills it in; ``status`` shows it).
        self.addresses = addresses if addresses is not None else Addresses()
        #: Serves ``agentConnect`` connections (the MCP front door); None: agents are refused.
        self.agent_handler: AgentHandler | None = agent_handler
        #: Admin commands other than ``status``, by name (``broker.daemon.admin``).
        self.admin_handlers: dict[str, AdminHandler] = dict(admin_handlers or {})
        self.agent_sessions = 0
        #: Pulsed when calls, the registry, ``agent_sessions`` or the connections waiting to
        #: send their first message change (``core.signals``):
        #: ``await core.changed.wait_until(predicate)`` waits for a state of the core.
        self.changed = self.registry.changed
        #: Connections that have not sent their first message yet, oldest first: one set for
        #: TCP, one for the Unix socket (``_first_message``).
        self._waiting: dict[int, _Waiter] = {}
        self._waiting_local: dict[int, _Waiter] = {}
        #: Set when a graceful stop begins (front doors end their long-lived streams).
        self.shutdown_started = trio.Event()
        #: How responsive the event loop is (the daemon runs it; ``status`` shows it).
        self.watchdog = LoopWatchdog()

    @property
    def broker_id(self) -> str:
        return self.federation.broker_id

    @property
    def upstream(self) -> tuple[str, ...]:
        return self.federation.upstream

    def attach(self, *, agent_handler: AgentHandler | None = None, uplink: Any = None,
               admin_handlers: Mapping[str, AdminHandler] | None = None) -> None:
        """Take the parts that are built from the core itself: the MCP front door's agent
        handler and admin commands (``broker.mcp.front_door.install``; a command the
        constructor was given already keeps its handler) and the uplink. ``run_daemon`` calls
        this once, before it serves anything."""
        if agent_handler is not None:
            self.agent_handler = agent_handler
        for name, handler in (admin_handlers or {}).items():
            self.admin_handlers.setdefault(name, handler)
        if uplink is not None:
            self.uplink = uplink

    def begin_shutdown(self) -> int:
        """Refuse new calls and fail those in flight; return how many were failed."""
        self.router.begin_shutdown()
        self.shutdown_started.set()
        failed = self.router.fail_all(
            OutcomeKind.SHUTDOWN, "toolbridge is shutting down; the call did not complete"
        )
        # Each app has its toolCancel (reason "shutdown") queued: send it, then close the link
        # (protocol.md section 6), rather than leave apps waiting for the drain to run out.
        for link in list(self.app_links.live.values()):
            link.conn.close_after_flush("toolbridge is shutting down")
        return failed

    async def handle_connection(self, stream: trio.abc.Stream) -> None:
        settings = self.settings
        conn = Connection(
            stream,
            max_line_bytes=settings.max_line_bytes,
            outbound_queue=settings.outbound_queue,
            max_overflow=settings.max_pending_calls,
            write_timeout=settings.write_timeout,
        )
        ended = LinkEnd()  # an app link's grace period, run once the connection is closed
        try:
            try:
                with conn.scope:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(conn.writer_loop)
                        try:
                            await self._serve(conn, ended)
                        finally:
                            conn.finish_sending()
            finally:
                await conn.close()
            await self.app_links.grace(ended)
        except Exception:
            # A bug met by one connection ends that connection, never the daemon
            # (trio.serve_listeners would pass the exception on to the daemon's nursery).
            log.exception("connection_failed", conn_id=conn.id)

    async def _serve(self, conn: Connection, ended: LinkEnd) -> None:
        first = await self._first_message(conn)
        # Anything but these three was refused by the connection's protocol machine already.
        if isinstance(first, Register):
            await self.app_links.serve_app(conn, first, ended)
        elif isinstance(first, AgentConnect):
            await self._serve_agent(conn, first)
        elif isinstance(first, AdminRequest):
            await self._serve_admin(conn, first)

    async def _first_message(self, conn: Connection) -> Message | BadLine | None:
        """The connection's first message; None if it did not come (the peer was told why).

        ``conn.protocol`` judges it: a bad line, or a message other than ``register``,
        ``agentConnect`` or ``admin``, is refused with a fatal error.

        See the module docstring: the connection waits among at most
        ``max_unregistered_connections`` others, evicting the oldest silent one when they are
        all taken; it has ``first_byte_timeout`` for its first byte, ``register_timeout`` for
        the whole line.
        """
        settings = self.settings
        waiting = self._waiting_local if is_unix_stream(conn.stream) else self._waiting
        if waiting and len(waiting) >= settings.max_unregistered_connections:
            self._evict_one(waiting)
        waiter = waiting[conn.id] = _Waiter(conn)
        self.changed.pulse()  # the waiters changed (tests wait for a count of them)
        start = trio.current_time()
        try:
            while not waiter.evicted:
                silent = conn.bytes_received == 0
                timeout = min(settings.first_byte_timeout, settings.register_timeout) if silent \
                    else settings.register_timeout
                with trio.CancelScope(deadline=start + timeout) as waiter.scope:
                    try:
                        return await conn.next_event()
                    except PeerClosed:
                        return None
                    except RemoteProtocolError as exc:  # fatal: the machine worded it
                        log.warning("connection_rejected", conn_id=conn.id, code=exc.code, detail=exc.message)
                        await conn.send(Error(exc.code, exc.message, fatal=True))
                        return None
                if waiter.evicted:
                    break
                if silent and conn.bytes_received:
                    continue  # its first bytes came in time: the rest of the line gets register_timeout
                log.warning("connection_rejected", conn_id=conn.id, reason="no register in time", silent=silent)
                await conn.send(Error(
                    "register_timeout",
                    f"nothing received within {timeout:g} s of connecting" if silent
                    else f"no complete register message within {timeout:g} s", fatal=True))
                return None
        finally:
            waiting.pop(conn.id, None)
            self.changed.pulse()
        log.warning("connection_evicted", conn_id=conn.id, silent=conn.bytes_received == 0)
        await conn.send(Error(
            "too_many_connections",
            f"{settings.max_unregistered_connections} newer connections are waiting to register, so this "
            "one was closed; connect again and send register at once", fatal=True))
        return None

    def _evict_one(self, waiting: dict[int, _Waiter]) -> None:
        """Make room in ``waiting``: evict its oldest waiter that sent nothing, else its oldest."""
        victim = next((w for w in waiting.values() if w.conn.bytes_received == 0), None)
        if victim is None:
            victim = next(iter(waiting.values()))
        del waiting[victim.conn.id]
        victim.evicted = True
        victim.scope.cancel()
        self.changed.pulse()

    async def _serve_agent(self, conn: Connection, hello: AgentConnect) -> None:
        grant = self.auth.check(hello.token)
        if grant is None:
            await conn.send(Error("unauthorized", "wrong token: read it with `toolbridge token`", fatal=True))
            return
        if not grant.allows_agent_to(hello.app):  # ``app``: a one-app scope (broker.mcp.scope)
            await conn.send(Error("forbidden", f"the token {grant.name!r} may not connect agents"
                                  + (f" to the app {hello.app!r}" if hello.app is not None else "")
                                  + f" (its scopes: {grant.describe()})", fatal=True))
            return
        self.auth.track(grant, conn)
        if self.agent_handler is None:
            await conn.send(Error("unavailable", "this daemon does not serve agents", fatal=True))
            return
        self.agent_sessions += 1
        self.changed.pulse()
        try:
            await self.agent_handler(conn, hello)
        finally:
            self.agent_sessions -= 1
            self.changed.pulse()

    async def _serve_admin(self, conn: Connection, request: AdminRequest) -> None:
        grant = self.auth.check(request.token)
        if grant is None or not grant.is_default:
            await conn.send(AdminResponse(ok=False, error="wrong token: admin needs the daemon's own token "
                                          "(`toolbridge token`)"))
            return
        handler = self.admin_handlers.get(request.command)
        if request.command == "status":
            await conn.send(AdminResponse(ok=True, result=self.status()))
        elif handler is None:
            await conn.send(AdminResponse(ok=False, error=f"unknown admin command {request.command!r}"))
        else:
            try:
                result = await handler(self, request)
            except Exception as exc:
                log.exception("admin_failed", command=request.command)
                await conn.send(AdminResponse(ok=False, error=f"{request.command} failed: {type(exc).__name__}"))
            else:
                await conn.send(AdminResponse(ok=True, result=result))

    def status(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "version": VERSION,
            "home": str(self.settings.home),
            "host": self.settings.host,
            "port": self.addresses.port,
            "httpPort": self.addresses.http_port,
            "uptimeSeconds": round(time.time() - self.started_at, 1),
            "apps": self.registry.summary(),
            "tools": len(self.registry.tools()),
            "callsInFlight": self.calls.sent,
            "agentSessions": self.agent_sessions,
            "brokerId": self.broker_id,
            "upstream": list(self.upstream),
            "uplink": None if self.uplink is None else self.uplink.status(),
            "nats": None if self.nats is None else self.nats.status(),
            "socket": self.addresses.socket,
            "eventLoop": self.watchdog.status(),
        }
