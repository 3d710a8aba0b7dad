"""Federation over NATS: brokers offer their apps' tools to each other through a NATS cluster.

Theory of operation
-------------------
``toolbridge serve --nats URL --broker-name NAME`` makes :meth:`NatsFederation.run` a task of
the daemon's nursery. The NATS client (nats-py, asyncio) runs on its own thread and loop
(``nats_bridge``); everything else here runs on trio. NATS messages reach trio through bounded
memory channels (full: a call is answered ``busy`` at once, an announcement dropped — the next
one repeats it), and trio runs NATS operations on the other loop without blocking its own.

Subjects (``NAME`` and tool names are ``[A-Za-z0-9_-]``, so each is one subject token; the
contract is protocol.md §14):

* ``toolbridge.call.<NAME>.<tool>`` — a call of this broker's tool ``<tool>`` (its agent-facing
  name here, ``WatchTower__ClickElement``), answered on its reply subject (keep-alives,
  progress, then a JSON ``ToolResult``); headers, deadlines and why the answers cannot be
  forged: ``nats_calls``, which carries the calls.
* ``toolbridge.cancel.<NAME>`` — the caller gave up on the call named by ``Toolbridge-Call-Id``.
* ``toolbridge.tools.<NAME>`` — an :class:`Announcement`: the broker is alive and the digest
  of its own tools (never the ones it learned over NATS, so nothing goes round), sent when they
  change and every ``nats_announce_interval`` seconds; the tools themselves travel inline when
  they changed and are small (:data:`INLINE_BYTES`), else a broker that lacks them fetches them
  page by page from ``toolbridge.list.<NAME>`` (``nats_catalog``: any size, each page within
  the server's ``max_payload``). The broker's name is the subject's last token: an
  announcement naming another broker inside is dropped (NATS permissions guard subjects).
  ``toolbridge.hello`` asks every broker to announce now (sent on each (re)connect),
  ``toolbridge.bye.<NAME>`` says a broker leaves.
* The NATS service ``toolbridge`` (``nats_service``): ``$SRV.PING/INFO/STATS`` list every
  broker, each of its tools as an endpoint (with its schemas as metadata) and their call counts.
* Replies reach this broker under the inbox prefix ``_INBOX.<NAME>`` (its calls' under
  ``_INBOX.<NAME>.r``); it may publish on no inbox but as ``allow_responses`` grants.

**Other brokers' tools.** Each other broker is registered here as one app instance named after
the broker, whose link is a :class:`RemotePort`; its tools get the names ``<NAME>__<tool>``
(cut and hashed to 64 characters by ``broker.core.names``, as every app's; the mapping back is
the registry's). So an agent's call of a remote tool goes through this broker's router pipeline
like any call (validation, guards, admission, audit and call log with the remote broker as the
app), and the router's ``toolInvocation`` to the port becomes a NATS request. The owning broker
runs it through its own pipeline (``transport="nats"``), so both call logs have it.
A broker is dropped — its tools leave, agents get list-changed — on its ``bye``, when it has
not announced for :data:`EXPIRE_INTERVALS` of its intervals (never sooner than a move to another
node takes, :data:`FAILOVER_SECONDS`; and not while this broker's own link is down: it hears
nobody then), and when a call to it finds **no
responders** for ``nats_calls.NO_RESPONDERS_GRACE`` (the call is published again meanwhile, then
fails with ``app_disconnected``, not after its deadline).
A ``toolCancel`` to the port publishes the cancel; the owner cancels its router call, which
tells the app.

Error kinds pass unchanged (the owner answers with the app's ``ToolResult``, or one carrying
the kind of the owner's own failure, ``at broker 'NAME': ...``).
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs
import msgspec
import structlog
import trio

from app_client.protocol import ToolSpec

from ..config.net import is_loopback
from ..core.names import is_valid_agent_name
from ..core.outcome import OutcomeKind
from ..core.registry import wake_link_waiters
from ..errors import ConfigError, RegistrationError, StartupError
from .nats_auth import REPEAT_SECONDS, NatsAuth, RepeatFilter, nats_auth, redacted, split_seeds, strip_userinfo
from .nats_bridge import AsyncioThread, open_asyncio_thread
from .nats_calls import H_CALL, H_DEADLINE, H_FROM, H_KIND, H_PROGRESS, H_TIMEOUT  # noqa: F401 (§14's names)
from .nats_calls import REPLY_GRANT_SECONDS, CallPath, RemotePort, _busy_reply, unheard_wait
from .nats_catalog import ENVELOPE_BYTES, PREFIX, Catalog, decode_tools, digest_of, list_subject, page_decoder
from .uplink import default_uplink_name

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..core.registry import Instance, Registry
    from ..core.router import Router
    from .rules import FederationState

log = structlog.get_logger("toolbridge.nats")

HELLO_SUBJECT: Final = f"{PREFIX}.hello"
#: Broker names are one NATS subject token and leave room in ``<NAME>__<app>__<tool>``.
MAX_BROKER_NAME: Final = 32
#: Control messages (announcements, cancels) waiting for the loop; beyond, dropped.
CONTROL_QUEUE: Final = 1024
#: A remote broker's calls in flight here at once (its instance's admission limit).
REMOTE_CONCURRENCY: Final = 64
#: A broker silent for this many of its announce intervals is dropped.
EXPIRE_INTERVALS: Final = 3.5
#: nats-py waits this long before trying a server again, and gives one connection attempt this long.
RECONNECT_WAIT: Final = 0.5
CONNECT_TIMEOUT: Final = 2.0
#: A broker whose node dies is silent while it moves to another node: it waits before trying
#: its old node again (refused at once) and then connects to the next. It is not dropped for
#: less (announce intervals under ~0.7 s would otherwise drop it during a failover).
FAILOVER_SECONDS: Final = RECONNECT_WAIT + CONNECT_TIMEOUT
#: Changes of the tool set within this long are announced together.
COALESCE_SECONDS: Final = 0.05
#: Retry a failed first connection after this long.
CONNECT_RETRY: Final = 2.0
#: A changed tool list up to this size travels inline in the announcement (bigger: fetched by pages).
INLINE_BYTES: Final = 256 * 1024
#: Tool lists fetched from other brokers at once.
FETCHES: Final = 8
#: One page of a tool list must arrive within this long.
FETCH_TIMEOUT: Final = 10.0
#: A tool list of more pages than this is refused (a page holds at least one whole tool, and a
#: broker counts as one app here, whose tools ``max_tools_per_app`` bounds anyway).
MAX_PAGES: Final = 4096

_encode = msgspec.json.Encoder().encode


def expiry_seconds(interval: float) -> float:
    """How long a broker announcing every ``interval`` seconds may be silent before it is dropped."""
    return max(EXPIRE_INTERVALS * interval, FAILOVER_SECONDS)


class Announcement(msgspec.Struct, forbid_unknown_fields=False, omit_defaults=True):
    """``toolbridge.tools.<NAME>``: a broker is alive, and which tools it has (protocol.md §14).

    ``digest``/``count`` name the broker's tool list; ``tools`` carries it inline (each tool
    as its owner encoded it) only when it changed and fits :data:`INLINE_BYTES`; otherwise a
    broker that does not have that digest fetches the list from ``toolbridge.list.<NAME>``.
    """

    broker: str
    broker_id: str
    digest: str
    count: int
    interval_ms: int = 5000
    tools: list[msgspec.Raw] | None = None


_announcement_decoder = msgspec.json.Decoder(Announcement)


def encode_announcement(catalog: Catalog, broker_id: str, interval_ms: int, *, inline: bool) -> bytes:
    """The announcement of ``catalog``, with its tools inline if asked and small enough."""
    tools = [msgspec.Raw(raw) for raw in catalog.raws] if inline and catalog.size <= INLINE_BYTES else None
    return _encode(Announcement(catalog.broker, broker_id, catalog.digest, len(catalog.raws), interval_ms, tools))


def inbox_prefix(name: str) -> str:
    """Where broker ``name`` gets its replies and progress: ``_INBOX.<NAME>``."""
    return f"_INBOX.{name}"


def broker_permissions(name: str) -> dict[str, Any]:
    """The NATS permissions broker ``name`` needs, and no more (README, SECURITY.md): it may
    publish only its own announcements and goodbye, and receive only its own calls, list
    requests, cancels and inbox, so another user of the account cannot speak for it, take its
    calls or read its replies. It publishes on no inbox but the reply subjects of requests
    delivered to it (``allow_responses``: any number of messages — keep-alives, progress, the
    result — for :data:`~broker.federation.nats_calls.REPLY_GRANT_SECONDS`), so it cannot answer
    a call made to another broker (``nats_calls``). The shape of a ``nats-server`` users block;
    a user JWT has ``pub``, ``sub`` and ``resp`` (``max``, ``ttl`` in ns) instead."""
    return {
        "publish": {"allow": [
            f"{PREFIX}.tools.{name}", f"{PREFIX}.bye.{name}", HELLO_SUBJECT,
            f"{PREFIX}.call.*.>", f"{PREFIX}.cancel.*", f"{PREFIX}.list.*",
        ]},
        "allow_responses": {"max": -1, "expires": f"{REPLY_GRANT_SECONDS // 60}m"},
        "subscribe": {"allow": [
            f"{PREFIX}.call.{name}.>", f"{PREFIX}.cancel.{name}", f"{PREFIX}.list.{name}",
            f"{PREFIX}.tools.*", f"{PREFIX}.bye.*", HELLO_SUBJECT,
            f"{inbox_prefix(name)}.>",
            "$SRV.*", f"$SRV.*.{PREFIX}", f"$SRV.*.{PREFIX}.*",  # the services API
        ]},
    }


def check_broker_name(name: str) -> str:
    if not (0 < len(name) <= MAX_BROKER_NAME) or not all(c.isascii() and (c.isalnum() or c in "-_") for c in name) \
            or "__" in name:
        raise ConfigError(f"invalid broker_name {name!r}: use 1-{MAX_BROKER_NAME} letters, digits, '-' or '_' "
                          "(no '__'); it is a NATS subject token and the prefix of this broker's tools elsewhere")
    return name


@attrs.frozen
class NatsOptions:
    #: The seed URLs, comma-separated, without credentials (those are in ``auth``).
    url: str
    name: str
    auth: NatsAuth = NatsAuth()
    ssl_context: ssl.SSLContext | None = None
    announce_interval: float = 5.0
    #: The most bytes another broker's tool list may take here (encoded, descriptions included),
    #: as an app's whole registration line may (``max_line_bytes``).
    max_list_bytes: int = 16 * 1024 * 1024

    @property
    def servers(self) -> list[str]:
        return self.url.split(",")

    @property
    def credentials(self) -> str | None:
        return self.auth.credentials


def nats_options(settings: Settings) -> NatsOptions | None:
    """The NATS options from the settings, or None without ``nats_url``. Checked before binding.

    Raises ConfigError (a bad value, nats-py missing) or StartupError (plain text off loopback).
    """
    if not settings.nats_url:
        return None
    try:
        import nats  # noqa: F401
    except ImportError:
        from ..extras import install_hint

        raise ConfigError(f"--nats needs the NATS client, the nats extra: {install_hint('nats')}") from None
    seeds = split_seeds(settings.nats_url)
    name = check_broker_name(settings.broker_name or default_uplink_name()[:MAX_BROKER_NAME].replace(".", "-"))
    auth = nats_auth(settings, seeds, lambda text: log.warning("nats_secret_in_url", hint=text))
    context: ssl.SSLContext | None = None
    if settings.nats_tls_ca:
        try:
            context = ssl.create_default_context(cafile=str(Path(settings.nats_tls_ca).expanduser()))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"cannot load nats_tls_ca {settings.nats_tls_ca}: {exc}") from None
    elif seeds[0].scheme == "tls":
        context = ssl.create_default_context()
    remote = [parts.hostname for parts in seeds if parts.hostname and not is_loopback(parts.hostname)]
    if context is None and remote:
        if not settings.allow_insecure_remote:
            raise StartupError(
                f"refusing to join NATS at {remote[0]} without TLS: credentials and every call would "
                "cross the network in clear. Use a tls:// URL (with --nats-tls-ca for a private CA), "
                "or --allow-insecure-remote if you must."
            )
        log.warning("nats_without_tls", host=remote[0])
    url = ",".join(strip_userinfo(parts).geturl() for parts in seeds)
    return NatsOptions(url=url, name=name, auth=auth, ssl_context=context,
                       announce_interval=settings.nats_announce_interval, max_list_bytes=settings.max_line_bytes)


@attrs.define(eq=False)
class Remote:
    name: str
    broker_id: str
    port: RemotePort
    instance: Instance | None = None
    #: The digest of the tool list registered here, and of the newest one announced.
    digest: str = ""
    wanted: str = ""
    fetching: bool = False
    #: "No responders" to the fetch of its list so far (asked again meanwhile, see _fetch_pages).
    list_unheard: int = 0
    last_heard: float = 0.0
    interval: float = 5.0
    #: The digest of a list refused here (too big), not fetched again.
    refused: str = ""


class NatsFederation(CallPath):
    """This broker's membership in a NATS cluster (see the module docstring)."""

    def __init__(self, router: Router, registry: Registry, federation: FederationState, options: NatsOptions,
                 default_timeout: float = 30.0, max_result_bytes: int = 16 * 1024 * 1024) -> None:
        self.router = router
        self.registry = registry
        self.federation = federation
        self.options = options
        self.name = options.name
        self.remotes: dict[str, Remote] = {}
        #: Brokers whose tool lists were refused here, and why (status).
        self.refused: dict[str, str] = {}
        #: Set when another broker announces under this one's name (status ``nameTaken``).
        self.name_taken: str | None = None
        self._others_named_alike: set[str] = set()
        self._default_timeout = default_timeout
        self._max_result_bytes = max_result_bytes
        #: Connected and subscribed (False while nats-py reconnects).
        self.connected = False
        #: Times the connection came back after a loss (nats-py moves to another server of the cluster).
        self.reconnects = 0
        #: Why the last attempt to connect (or reconnect) failed; None once connected.
        self.last_error: str | None = None
        self._aio: AsyncioThread | None = None
        self._error_filter = RepeatFilter(trio.current_time)
        self._nc: Any = None
        self._nursery: trio.Nursery | None = None
        self._announce_now = trio.Event()
        self._catalog = Catalog.build(self.name, [], 1 << 20)
        self._fetches = trio.CapacityLimiter(FETCHES)
        self._init_calls()
        self._control_in, self._control_out = trio.open_memory_channel[tuple[str, Any]](CONTROL_QUEUE)

    def status(self) -> dict[str, Any]:
        return {"url": redacted(self.options.url), "name": self.name, "connected": self.connected,
                "reconnects": self.reconnects, "brokers": sorted(self.remotes), "lastError": self.last_error,
                **({"refused": dict(self.refused)} if self.refused else {}),
                **({"nameTaken": self.name_taken} if self.name_taken else {})}

    # --- running --------------------------------------------------------------------------

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Join the cluster and stay in it until cancelled (reconnecting as nats-py does)."""
        async with open_asyncio_thread("toolbridge-nats") as aio:
            self._aio = aio
            try:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    await self._connect()
                    await self._subscribe()
                    self.connected = True  # subscribed: what others send now is heard
                    self.last_error = None
                    nursery.start_soon(self._run_calls)
                    nursery.start_soon(self._serve_control)
                    nursery.start_soon(self._announce_loop)
                    nursery.start_soon(self._expire_loop)
                    await self._publish(HELLO_SUBJECT, b"")
                    log.info("nats_joined", url=redacted(self.options.url), name=self.name,
                             broker_id=self.federation.broker_id)
                    task_status.started()
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(2):
                    await self._leave()

    async def _connect(self) -> None:
        import nats

        aio = self._aio
        assert aio is not None

        async def disconnected() -> None:
            aio.to_trio(lambda: self._control("disconnected", None))

        async def reconnected() -> None:
            aio.to_trio(lambda: self._control("reconnected", None))

        async def error(exc: Exception) -> None:
            close_failed_attempt(self._nc, exc)
            # nats-py reports every failed reconnect (every half second per server while revoked
            # or cut off): each reason is logged once a minute (nats_auth.RepeatFilter), however
            # they alternate; the status shows the newest.
            reason = (type(exc).__name__, redacted(str(exc)[:200]))
            aio.to_trio(lambda: self._on_nats_error(reason))

        options: dict[str, Any] = {
            "servers": self.options.servers, "name": f"toolbridge {self.name}", "allow_reconnect": True,
            "max_reconnect_attempts": -1, "reconnect_time_wait": RECONNECT_WAIT, "connect_timeout": CONNECT_TIMEOUT,
            "disconnected_cb": disconnected, "reconnected_cb": reconnected, "error_cb": error,
            # Replies and progress for this broker arrive under its own inbox prefix, so a NATS
            # permission can keep every other user from subscribing to them (SECURITY.md).
            "inbox_prefix": inbox_prefix(self.name),
            # The seeds in the order given (the first is the nearest, as a user lists them).
            "dont_randomize": True,
            # Credentials as options, not in a URL: nats-py sends them to every server, the ones
            # it learns from the cluster too, so a broker fails over to any node (nats_auth).
            **self.options.auth.connect_options(),
        }
        if self.options.ssl_context is not None:
            options["tls"] = self.options.ssl_context
        while True:
            try:
                self._nc = await aio.run(nats.connect(**options))
                return
            except Exception as exc:  # nats-py raises several kinds (OSError, NoServersError, auth errors)
                reason = (type(exc).__name__, redacted(str(exc)[:200]))
                self.last_error = f"{reason[0]}: {reason[1]}"
                if self._error_filter.admit(reason) is not None:  # each reason once a minute, not every retry
                    log.warning("nats_connect_failed", url=redacted(self.options.url), error=reason[0],
                                detail=reason[1], retry_every_s=CONNECT_RETRY,
                                hint="the daemon runs meanwhile; it joins once the NATS server answers")
            await trio.sleep(CONNECT_RETRY)

    def _on_nats_error(self, reason: tuple[str, str]) -> None:
        self.last_error = f"{reason[0]}: {reason[1]}"
        repeats = self._error_filter.admit(reason)
        if repeats is not None:
            log.warning("nats_error", error=reason[0], detail=reason[1], repeats_not_logged=repeats,
                        hint=f"each reason is logged at most once every {REPEAT_SECONDS:.0f} s")

    async def _subscribe(self) -> None:
        from .nats_service import start_tool_service

        aio, nc = self._aio, self._nc
        assert aio is not None
        self._catalog = Catalog.build(self.name, self._own_tools(), self._budget(), self._catalog)

        async def on_call(request: Any) -> None:
            if not aio.to_trio(lambda: self._offer_call(request)):
                await request.respond(_busy_reply(self.name))

        async def on_cancel(msg: Any) -> None:
            aio.to_trio(lambda: self._on_cancel(msg))  # in order with the calls (call_path)

        def forward(kind: str) -> Any:
            async def callback(msg: Any) -> None:
                aio.to_trio(lambda: self._control(kind, msg))
            return callback

        async def subscribe() -> Any:
            service = await start_tool_service(nc, name=self.name, broker_id=self.federation.broker_id,
                                               catalog=lambda: self._catalog, on_call=on_call)
            await nc.subscribe(f"{PREFIX}.tools.*", cb=forward("announce"))
            await nc.subscribe(f"{PREFIX}.bye.*", cb=forward("bye"))
            await nc.subscribe(HELLO_SUBJECT, cb=forward("hello"))
            await nc.subscribe(f"{PREFIX}.cancel.{self.name}", cb=on_cancel)
            await self._subscribe_calls(nc)
            await nc.flush()
            return service

        self._service = await aio.run(subscribe())

    def _budget(self) -> int:
        """The most a NATS message may carry here (the server's ``max_payload``)."""
        return int(getattr(self._nc, "max_payload", 0) or 1 << 20)

    async def _leave(self) -> None:
        for name in list(self.remotes):
            self._drop_remote(name, "this broker left the NATS cluster")
        aio, nc = self._aio, self._nc
        if aio is None or nc is None:
            return

        async def leave() -> None:
            try:
                if nc.is_connected:
                    await nc.publish(f"{PREFIX}.bye.{self.name}", b"")
                    await nc.flush(timeout=1)
            finally:
                await nc.close()

        try:
            await aio.run(leave())
        except Exception as exc:
            log.warning("nats_close_failed", error=type(exc).__name__)
        self.connected = False
        log.info("nats_left", name=self.name)

    async def _publish(self, subject: str, data: bytes, headers: dict[str, str] | None = None) -> None:
        assert self._aio is not None
        try:
            await self._aio.run(self._nc.publish(subject, data, headers=headers))
        except Exception as exc:  # disconnected for good, buffer full: the next announce repeats it
            log.warning("nats_publish_failed", subject=subject.split(".")[1], error=type(exc).__name__)

    # --- messages from the asyncio thread (called on trio, must not block) -------------------

    def _control(self, kind: str, msg: Any) -> None:
        try:
            self._control_in.send_nowait((kind, msg))
        except (trio.WouldBlock, trio.ClosedResourceError):
            log.warning("nats_control_dropped", kind=kind)

    def _aio_submit(self, coro: Any) -> None:
        if self._aio is not None:
            self._aio.submit(coro)
        else:
            coro.close()

    async def _serve_control(self) -> None:
        async for kind, msg in self._control_out:
            if kind == "announce":
                await self._on_announce(msg.subject, msg.data)
            elif kind == "bye":
                self._drop_remote(msg.subject.rsplit(".", 1)[-1], "it left the NATS cluster")
            elif kind == "hello":
                self._announce_now.set()
            elif kind == "disconnected":
                self.connected = False
                log.warning("nats_disconnected", url=redacted(self.options.url))
                self._link_down()
            elif kind == "reconnected":
                self.last_error = None
                self.connected = True
                self.reconnects += 1
                log.info("nats_reconnected", server=redacted(_url_text(getattr(self._nc, "connected_url", None))))
                # Nothing was heard while the link was down, through no fault of the others:
                # each gets its whole window again to answer the hello.
                now = trio.current_time()
                for remote in self.remotes.values():
                    remote.last_heard = now
                await self._publish(HELLO_SUBJECT, b"")
                self._announce_now.set()

    # --- what the others see -------------------------------------------------------------

    def _own_tools(self) -> list[ToolSpec]:
        broker_id = self.federation.broker_id
        specs = []
        for tool in self.registry.tools():
            if isinstance(tool.instance.link, RemotePort) or tool.instance.instance_id.startswith("nats:"):
                continue  # learned over NATS: its owner offers it
            spec = tool.spec
            via = [broker_id, *(spec.via or [])] if broker_id else list(spec.via or [])
            specs.append(msgspec.structs.replace(
                spec, name=tool.agent_name, via=via or None,
                description=spec.description or f"{spec.name} (from the app {tool.instance.label})"))
        return specs

    async def _announce_loop(self) -> None:
        """Announce this broker's tools at once, then when they change, when asked, and every interval.

        A change of the registry that leaves this broker's own tools as they were (another
        broker's tools arriving, which every broker sees) sends nothing: otherwise each broker
        joining would make every other one announce again. The tools travel inline only in the
        first announcement and when they changed (and are small enough); repeats and answers to
        ``hello`` carry the digest, and a broker without that list fetches it.
        """
        seen = -1
        inline = True
        interval_ms = int(self.options.announce_interval * 1000)
        self._announce_now.set()
        while True:
            changed_only = False
            with trio.move_on_after(self.options.announce_interval):
                async with trio.open_nursery() as waiters:
                    async def on_change() -> None:
                        nonlocal changed_only
                        await self.registry.wait_changed(seen)
                        await trio.sleep(COALESCE_SECONDS)
                        changed_only = True
                        waiters.cancel_scope.cancel()

                    async def on_hello() -> None:
                        await self._announce_now.wait()
                        waiters.cancel_scope.cancel()

                    waiters.start_soon(on_change)
                    waiters.start_soon(on_hello)
            if self._announce_now.is_set():
                changed_only = False
                self._announce_now = trio.Event()
            if self.registry.version != seen:
                seen = self.registry.version
                catalog = Catalog.build(self.name, self._own_tools(), self._budget(), self._catalog)
                if catalog.oversized:
                    log.warning("nats_tools_too_big", tools=len(catalog.oversized), budget=self._budget(),
                                hint="a tool whose schema alone exceeds the NATS server's max_payload is not "
                                     "offered to other brokers")
                if catalog.digest != self._catalog.digest:
                    self._catalog = catalog
                    inline = True
                elif changed_only:
                    continue  # others' tools changed, not ours
            fits = self._catalog.size + ENVELOPE_BYTES <= self._budget()  # a server with a small max_payload
            await self._publish(f"{PREFIX}.tools.{self.name}", encode_announcement(
                self._catalog, self.federation.broker_id, interval_ms, inline=inline and fits))
            inline = False

    async def _on_announce(self, subject: str, data: bytes) -> None:
        name = subject.rsplit(".", 1)[-1]
        try:
            announcement = _announcement_decoder.decode(data)
            check_broker_name(name)
        except (msgspec.DecodeError, ConfigError) as exc:
            log.warning("nats_bad_announcement", error=str(exc)[:200])
            return
        if announcement.broker != name:
            # The subject is what NATS permissions guard (SECURITY.md): a broker allowed to
            # publish only on its own subject must not speak for another by naming it inside.
            log.warning("nats_bad_announcement", broker=name, claimed=announcement.broker[:64],
                        error="the broker named in the announcement is not the one of its subject")
            return
        if name == self.name:
            if announcement.broker_id != self.federation.broker_id:
                self._name_taken(announcement.broker_id[:64])
            return
        remote = self.remotes.get(name)
        if remote is None:
            remote = Remote(name, announcement.broker_id, RemotePort(self, name))
            self.remotes[name] = remote
        remote.last_heard = trio.current_time()
        remote.interval = max(announcement.interval_ms / 1000, 0.05)
        remote.broker_id = announcement.broker_id
        remote.wanted = announcement.digest
        if remote.digest == announcement.digest:
            return
        if remote.refused == announcement.digest:
            return  # refused as it is: asked again when its list changes
        if announcement.tools is not None and digest_of(announcement.tools) == announcement.digest:
            size = sum(len(raw) for raw in announcement.tools)
            if size > self.options.max_list_bytes:
                self._refuse(remote, f"its tool list is over {self.options.max_list_bytes} bytes ({size}), the "
                                     "most one app's registration may take here (max_line_bytes)")
                return
            try:
                tools = decode_tools(announcement.tools)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                log.warning("nats_bad_announcement", broker=name, error=str(exc)[:200])
                return
            await self._register(remote, tools, announcement.digest)
        elif not remote.fetching:
            remote.fetching = True
            assert self._nursery is not None
            self._nursery.start_soon(self._fetch_tools, remote)

    async def _fetch_tools(self, remote: Remote) -> None:
        """Fetch ``remote``'s tool list by pages until the one it announced last is registered."""
        try:
            async with self._fetches:
                for _ in range(3):  # the list may change while it is fetched: try again, a few times
                    if self.remotes.get(remote.name) is not remote or remote.digest == remote.wanted:
                        return
                    fetched = await self._fetch_pages(remote)
                    if fetched is None:
                        return
                    digest, tools = fetched
                    await self._register(remote, tools, digest)
        finally:
            remote.fetching = False

    async def _fetch_pages(self, remote: Remote) -> tuple[str, list[ToolSpec]] | None:
        import nats.errors

        aio = self._aio
        assert aio is not None
        raws: list[msgspec.Raw] = []
        digest = ""
        number = pages = restarts = 0
        unheard_since = 0.0
        remote.list_unheard = 0
        while True:
            try:
                reply = await aio.run(self._nc.request(list_subject(remote.name), _encode({"page": number}),
                                                       timeout=FETCH_TIMEOUT))
                page = page_decoder.decode(reply.data)
                remote.list_unheard = 0
            except nats.errors.NoRespondersError:
                # Not yet "gone", as for calls (nats_calls): nobody subscribed at that instant,
                # which is also a broker moving between nodes, or this request sent late by
                # nats-py once this broker's own link was back and before the other's was.
                # Asked again after 50, 100, 200, 400 and 800 ms, as a call is; only then dropped.
                now = trio.current_time()
                if not remote.list_unheard:
                    unheard_since = now
                wait = unheard_wait(remote.list_unheard, unheard_since, now)
                if wait is None:
                    self._drop_remote(remote.name, "no responders for its tool list")
                    return None
                remote.list_unheard += 1
                await trio.sleep(wait)
                if self.remotes.get(remote.name) is not remote:
                    return None  # dropped meanwhile
                continue
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                log.warning("nats_bad_tool_page", broker=remote.name, error=str(exc)[:200])
                return None
            except Exception as exc:  # timeout, connection lost: the next announcement tries again
                log.warning("nats_tool_list_failed", broker=remote.name, error=type(exc).__name__)
                return None
            if number == 0:
                digest, pages = page.digest, page.pages
                if not 0 < pages <= MAX_PAGES:
                    log.warning("nats_bad_tool_page", broker=remote.name, error=f"{pages} pages")
                    return None
            elif page.digest != digest:  # the list changed meanwhile: start over (a few times)
                restarts += 1
                if restarts > 3:
                    return None  # the next announcement tries again
                raws, number, digest, pages = [], 0, "", 0
                continue
            raws.extend(page.tools)
            size = sum(len(raw) for raw in raws)
            if size > self.options.max_list_bytes:  # refused before fetching the rest
                self._refuse(remote, f"its tool list is over {self.options.max_list_bytes} bytes "
                                     f"({size} in the first {number + 1} of {pages} pages), the most one app's "
                                     "registration may take here (max_line_bytes)")
                return None
            number += 1
            if number >= pages:
                break
        if digest_of(raws) != digest:
            log.warning("nats_bad_tool_page", broker=remote.name, error="the pages do not add up to their digest")
            return None
        try:
            return digest, decode_tools(raws)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.warning("nats_bad_tool_page", broker=remote.name, error=str(exc)[:200])
            return None

    def _name_taken(self, other: str) -> None:
        """Another broker announces under this broker's name: they share calls and hide each
        other's tools. Reported in the status and logged once per other broker."""
        if other in self._others_named_alike:
            return
        self._others_named_alike.add(other)
        self.name_taken = (f"another broker (id {other}) also uses the broker name {self.name!r}: the two share "
                           "calls and hide each other's tools; give each its own --broker-name (two daemons on "
                           "one host both default to the host name)")
        log.error("nats_name_taken", name=self.name, other=other, error=self.name_taken)

    def _refuse(self, remote: Remote, why: str) -> None:
        """Refuse ``remote``'s tool list as announced (its old tools leave): logged, in the status."""
        log.warning("nats_broker_refused", broker=remote.name, error=why,
                    hint="its tools are not listed here until its list changes; raise max_line_bytes to accept it")
        self.refused[remote.name] = why
        remote.refused = remote.wanted
        if remote.instance is not None and self.registry.unlink(remote.instance, remote.port):
            self.registry.expire(remote.instance)
        remote.instance, remote.digest = None, ""

    async def _register(self, remote: Remote, tools: list[ToolSpec], digest: str) -> None:
        bad = [tool.name for tool in tools if not is_valid_agent_name(tool.name)]
        if bad:
            # An owner offers its tools under their agent names; any other name (``a..b``, a
            # trailing ``.``, a space) is no valid call subject: calling it would only meet a
            # permissions violation and wait out its deadline. Left out, and said so.
            log.warning("nats_bad_tool_name", broker=remote.name, tools=len(bad), first=[n[:80] for n in bad[:3]],
                        hint="a tool name over NATS is [A-Za-z0-9_-], at most 64 characters; these are not listed")
            tools = [tool for tool in tools if is_valid_agent_name(tool.name)]
        if not tools:  # a broker without apps: nothing to list (it stays known, for its liveness)
            if remote.instance is not None and self.registry.unlink(remote.instance, remote.port):
                self.registry.expire(remote.instance)
            remote.instance, remote.digest = None, digest
            return
        try:
            compiled = await self.registry.compile_tools(tools)
            instance, _ = self.registry.register(
                remote.port, app_name=remote.name, instance_id=f"nats:{remote.name}", tools=tools,
                max_concurrency=REMOTE_CONCURRENCY, compiled=compiled,
                app_version=f"toolbridge broker {remote.broker_id} over NATS",
            )
        except RegistrationError as exc:
            log.warning("nats_broker_refused", broker=remote.name, code=exc.code, error=exc.message)
            # Not asked again until its list changes; its old tools leave (they are not its list any more).
            if remote.instance is not None and self.registry.unlink(remote.instance, remote.port):
                self.registry.expire(remote.instance)
            remote.instance, remote.digest = None, digest
            return
        if self.remotes.get(remote.name) is not remote:  # dropped while compiling
            self.registry.unlink(instance, remote.port)
            self.registry.expire(instance)
            return
        remote.instance, remote.digest = instance, digest
        self.refused.pop(remote.name, None)
        wake_link_waiters(instance)
        log.info("nats_broker_tools", broker=remote.name, tools=len(tools), label=instance.label)

    async def _expire_loop(self) -> None:
        while True:
            await trio.sleep(max(min(self.options.announce_interval, 1.0), 0.05))
            if not self.connected:
                continue  # their silence is this broker's own: it hears nobody (see "reconnected")
            now = trio.current_time()
            for remote in list(self.remotes.values()):
                if now - remote.last_heard > expiry_seconds(remote.interval):
                    self._drop_remote(remote.name, "it stopped announcing its tools")

    def _drop_remote(self, name: str, why: str) -> None:
        remote = self.remotes.pop(name, None)
        self.refused.pop(name, None)
        if remote is None:
            return
        port = remote.port
        failed = self.router.fail_link(
            port.id, OutcomeKind.APP_DISCONNECTED,
            f"the broker {name} left the NATS cluster ({why}); its tools were withdrawn. List the tools again.")
        self._calls_to_dropped(port)
        if remote.instance is not None and self.registry.unlink(remote.instance, port):
            self.registry.expire(remote.instance)
        log.info("nats_broker_gone", broker=name, reason=why, calls_failed=failed)


def close_failed_attempt(nc: Any, exc: Exception) -> None:
    """Close the socket of a reconnect attempt that failed after it connected.

    nats-py (2.16) opens each attempt's socket on the same transport object, replacing the one
    before without closing it; a server that refuses the login (a revoked user, every half
    second) leaves that socket open until the garbage collector finds it. Its error callback
    runs while the client is still (re)connecting, with the refused socket as its transport,
    and with one of the errors its reconnect loop catches. A live connection's errors (status
    connected), and a subscription's (a slow consumer, at any time), are left alone."""
    import asyncio

    import nats.errors

    if nc is None or not (nc.is_connecting or nc.is_reconnecting):
        return
    if isinstance(exc, nats.errors.SlowConsumerError) or not isinstance(
            exc, (OSError, asyncio.TimeoutError, nats.errors.Error)):
        return
    transport = getattr(nc, "_transport", None)
    if transport is not None:
        transport.close()


def _url_text(url: Any) -> str:
    return url.geturl() if hasattr(url, "geturl") else str(url or "")[:200]
