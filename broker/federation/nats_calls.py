"""Calls over NATS: this broker's calls of other brokers' tools, and other brokers' calls here.

Theory of operation
-------------------
:class:`CallPath` is the part of :class:`~broker.federation.nats_link.NatsFederation` (which
inherits it) that carries calls; the link itself joins the cluster, announces and learns tools.
The contract is protocol.md §14; what it defends against, SECURITY.md rows 82 and 86-89.

**Calling out.** Each other broker is one app instance here whose link is a :class:`RemotePort`;
the router's ``toolInvocation`` to it is published on ``toolbridge.call.<NAME>.<tool>`` with a
reply subject of its own, ``_INBOX.<this broker>.r.<128 random bits>``, and its ``toolCancel``
on ``toolbridge.cancel.<NAME>``. Everything about the call comes back on that reply subject:
keep-alives, progress (``Toolbridge-Kind``) and last the result. No call is a parked task: an
:class:`_Outgoing` record per call, one subscription (``_INBOX.<this broker>.r.*``) for all
of them, and one watcher (:meth:`CallPath._watch_outgoing`) that ends a call whose owner has
said nothing for :data:`LIVENESS` seconds (killed, cut off, or stalled: ``app_disconnected``
within ~2 s, and a cancel so a stalled owner does not run it later).

**"No responders" is not yet "gone".** NATS answers a call with "no responders" when nobody
subscribes to its subject at that instant, so nobody received it and it cannot have run. That
is also what a broker moving to another node of the cluster looks like for a moment (between
its old node's death and its subscriptions reaching the new one). So such a call is published
again, after 50, 100, 200, 400 and 800 ms (:data:`NO_RESPONDERS_GRACE` in all, never past its
deadline); only then does it fail (``app_disconnected``) and the broker's tools leave. Before,
the first "no responders" withdrew them until the broker's next announcement, and a call in
that instant failed though the broker was back a moment later.

Why replies cannot be forged (issue 27): nats-py's request inboxes are a counter plus 16 random
bits, and every broker could publish on ``_INBOX.>``, so a broker that saw one of its own
calls' reply subjects could spray the neighbours of it and answer calls to a third broker. Now
(1) a broker may not publish on any ``_INBOX`` subject at all: ``broker_permissions`` gives
``allow_responses`` instead, so the server lets a broker publish only on the reply subjects of
requests delivered to it (a call it was sent, a list page, a services-API request), for as long
as :data:`REPLY_GRANT_SECONDS`; and (2) each call's reply subject carries 128 random bits
(``secrets``), unrelated to any other, so even a broker with looser permissions cannot guess
one, and the progress of a call travels on that same subject (it used to be a bare counter
inbox). A MAC over each reply was the alternative; it needs a key shared per call pair, while
the two measures above make the server itself refuse the forged message, so no forged bytes
reach this broker at all.

**Deadlines.** A call carries its budget (``Toolbridge-Timeout-Ms``) and its absolute deadline
(``Toolbridge-Deadline``, Unix ms): an owner that gets to a call only after its deadline (a
stalled owner) answers ``timeout`` without running it, and runs it for no longer than what is
left. A cancel that arrives before its call is remembered (at most :data:`EARLY_CANCELS`, for
:data:`EARLY_CANCEL_SECONDS`), so the call never starts. A caller sends the cancel whenever it
gives up: its agent cancelled, its deadline passed, the owner fell silent or was dropped.

**Serving.** Calls from other brokers reach trio through a bounded channel (full: ``busy`` at
once) and run through this broker's own router pipeline (``transport="nats"``), at most
:data:`MAX_SERVING` at once. While this broker holds a call from another toolbridge broker it
sends a keep-alive every :data:`KEEPALIVE` seconds on its reply subject, itself with a reply
subject (``_INBOX.<this broker>.a.<token>``) that only the server uses: its "no responders"
there says nobody listens for the call any more (the caller died or lost its connection, and
sent no cancel), and the call is cancelled. The caller's name in
the call log is the broker whose inbox the reply goes to, marked ``(unverified)``: NATS
permissions make that the only broker that can read the answer, not the one that sent the call.
"""

from __future__ import annotations

import itertools
import math
import secrets
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Final

import attrs
import msgspec
import structlog
import trio

from app_client.protocol import Message, ToolCancel, ToolInvocation, ToolResult

from ..core.outcome import CallerInfo, CallOutcome, OutcomeKind
from ..core.passthrough import plain
from .nats_catalog import PREFIX, Catalog, call_subject
from .uplink import hop_budget

if TYPE_CHECKING:
    from ..core.registry import Registry
    from ..core.router import Router
    from .nats_bridge import AsyncioThread
    from .rules import FederationState

log = structlog.get_logger("toolbridge.nats")

H_TIMEOUT: Final = "Toolbridge-Timeout-Ms"
H_DEADLINE: Final = "Toolbridge-Deadline"
H_CALL: Final = "Toolbridge-Call-Id"
H_FROM: Final = "Toolbridge-From"
H_PROGRESS: Final = "Toolbridge-Progress"
H_KIND: Final = "Toolbridge-Kind"
#: nats-py's status header, and the status of "no responders".
_STATUS: Final = "Status"
_NO_RESPONDERS: Final = "503"
#: Calls from other brokers waiting for this broker's loop (beyond: answered ``busy``).
CALL_QUEUE: Final = 256
#: Calls from other brokers run at once here (each bounded further by its app's admission).
MAX_SERVING: Final = 512
#: An owner sends a keep-alive this often on each call it holds (after the first this long).
KEEPALIVE: Final = 0.5
#: A caller ends a call whose owner said nothing for this long (``app_disconnected``).
LIVENESS: Final = 2.0
#: A call that found no responders is published again for this long (see the module docstring),
#: first after :data:`NO_RESPONDERS_FIRST_RETRY`, each wait twice the one before.
NO_RESPONDERS_GRACE: Final = 1.6
NO_RESPONDERS_FIRST_RETRY: Final = 0.05
#: How long a broker may answer a request delivered to it (``allow_responses.expires`` in
#: ``broker_permissions``; the server forgets each grant after it): a call over NATS runs at
#: most this long, less a margin for the trip back.
REPLY_GRANT_SECONDS: Final = 15 * 60
MAX_REMOTE_BUDGET: Final = REPLY_GRANT_SECONDS - 30.0
#: Cancels remembered for calls not (yet) seen here, and for how long.
EARLY_CANCELS: Final = 4096
EARLY_CANCEL_SECONDS: Final = 60.0
#: A progress report from another broker larger than this is dropped.
MAX_PROGRESS_BYTES: Final = 64 * 1024

_port_ids = itertools.count(-1, -1)  # negative: never a daemon connection's id
_result_decoder = msgspec.json.Decoder(ToolResult)
_encode = msgspec.json.Encoder().encode
#: A progress report on the reply stream: ``[progress, total, message]``.
_progress_decoder = msgspec.json.Decoder(tuple[float, float | None, str | None])


def unheard_wait(unheard: int, since: float, now: float) -> float | None:
    """How long to wait before sending again what found no responders ``unheard`` times so far,
    the first of them at ``since`` (see the module docstring); None once that passes the grace."""
    wait = NO_RESPONDERS_FIRST_RETRY * 2 ** unheard
    return None if now + wait - since > NO_RESPONDERS_GRACE else wait


def reply_prefix(name: str) -> str:
    """Where broker ``name`` gets its calls' replies: ``_INBOX.<NAME>.r`` (one more token each)."""
    return f"_INBOX.{name}.r"


def alive_prefix(name: str) -> str:
    """The reply subjects of broker ``name``'s keep-alives: ``_INBOX.<NAME>.a`` (one more token
    each). Only the server's "no responders" comes there: the caller of that call is gone."""
    return f"_INBOX.{name}.a"


@attrs.define(eq=False)
class _Held:
    """A call from another broker held here (queued or running), for its keep-alives."""

    call_id: str
    #: Names it in the reply subject of its keep-alives.
    token: str
    since: float


class RemotePort:
    """Another broker's link, as this broker's core sees it (a ``broker.core.ports.AppPort``)."""

    def __init__(self, federation: CallPath, remote: str) -> None:
        self.id = next(_port_ids)
        self.remote = remote
        self._federation = federation

    @property
    def label(self) -> str:
        return self.remote

    def send_reliable_nowait(self, message: Message) -> bool:
        return self._federation._port_message(self, message)

    def replaced(self) -> None:
        pass  # the same port re-registers its own instance when the broker's tools change


@attrs.define(eq=False)
class _Outgoing:
    """A call of another broker's tool in flight (keyed by its reply token)."""

    port: RemotePort
    cid: int
    call_id: str
    token: str
    #: ``time.monotonic()`` when the owner was last heard from about this call (or it was sent).
    heard: float
    #: Publishes the call (again: a "no responders" means nobody received it).
    publish: Callable[[], Coroutine[Any, Any, None]] | None = None
    #: Its absolute deadline (``time.time()``), and its "no responders" so far.
    deadline: float = math.inf
    unheard: int = 0
    unheard_since: float = 0.0


class CallPath:
    """The call path of a NATS federation (mixed into ``NatsFederation``, which provides the
    connection and the other brokers)."""

    router: Router
    registry: Registry
    federation: FederationState
    name: str
    remotes: dict[str, Any]
    connected: bool
    _default_timeout: float
    _max_result_bytes: int
    _aio: AsyncioThread | None
    _nc: Any
    _nursery: trio.Nursery | None
    _catalog: Catalog

    def _init_calls(self) -> None:
        #: Calls out, by (port id, correlation id) and by reply token.
        self._outgoing: dict[tuple[int, int], _Outgoing] = {}
        self._replies: dict[str, _Outgoing] = {}
        #: Calls served here, by call id; and cancels that came before their call (expiry times).
        self._incoming: dict[str, trio.CancelScope] = {}
        self._early_cancels: dict[str, float] = {}
        #: Calls from other brokers held here (queued or running), by reply subject and by token.
        self._held: dict[str, _Held] = {}
        self._held_tokens: dict[str, str] = {}
        self._serving = trio.Semaphore(MAX_SERVING)
        self._calls_in, self._calls_out = trio.open_memory_channel[Any](CALL_QUEUE)

    def _drop_remote(self, name: str, why: str) -> None:
        raise NotImplementedError  # the link's

    def _aio_submit(self, coro: Any) -> None:
        raise NotImplementedError  # the link's

    async def _run_calls(self) -> None:
        """The call path's tasks (in the link's nursery while it is joined)."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._serve_calls)
            nursery.start_soon(self._watch_outgoing)
            nursery.start_soon(self._keep_alive)

    async def _subscribe_calls(self, nc: Any) -> None:
        """Subscribe to this broker's calls' replies and its keep-alives' "no responders" (on the
        asyncio thread, with the link's other subscriptions)."""
        aio = self._aio
        assert aio is not None

        async def on_reply(msg: Any) -> None:
            heard = time.monotonic()  # on arrival: a slow trio loop must not look like a silent owner
            aio.to_trio(lambda: self._on_reply(msg, heard))

        async def on_alive_bounced(msg: Any) -> None:
            if (msg.headers or {}).get(_STATUS) == _NO_RESPONDERS:
                aio.to_trio(lambda: self._caller_gone(msg.subject.rsplit(".", 1)[-1]))

        await nc.subscribe(f"{reply_prefix(self.name)}.*", cb=on_reply)
        await nc.subscribe(f"{alive_prefix(self.name)}.*", cb=on_alive_bounced)

    # --- calls to other brokers ------------------------------------------------------------

    def _port_message(self, port: RemotePort, message: Message) -> bool:
        if self._nursery is None or self.remotes.get(port.remote) is None:
            return False
        if isinstance(message, ToolInvocation):
            self._send_call(port, message)
            return True
        if isinstance(message, ToolCancel):
            entry = self._outgoing.get((port.id, message.correlation_id))
            if entry is not None:
                self._give_up(entry)
            return True
        return True

    def _send_call(self, port: RemotePort, invocation: ToolInvocation) -> None:
        cid = invocation.correlation_id
        if not self.connected:
            # nats-py would queue the request until it reconnects, and the reply could not
            # reach this broker meanwhile: the call fails now, as protocol.md §14 says.
            self._fail(port, cid, OutcomeKind.APP_DISCONNECTED,
                       f"this broker's NATS connection is down (reconnecting), so the broker {port.remote} "
                       "cannot be reached; retry in a moment")
            return
        # Unguessable: a cancel names the call, and any broker may publish on toolbridge.cancel.*
        call_id = f"{self.federation.broker_id}-{cid}-{secrets.token_hex(8)}"
        token = secrets.token_hex(16)  # 128 bits: the reply subject cannot be guessed
        budget = self._default_timeout if invocation.timeout_ms is None else invocation.timeout_ms / 1000
        budget = min(budget, MAX_REMOTE_BUDGET)
        deadline = time.time() + budget
        headers = {H_CALL: call_id, H_FROM: self.name, H_TIMEOUT: str(max(1, round(budget * 1000))),
                   H_DEADLINE: str(round(deadline * 1000))}
        if invocation.progress:
            headers[H_PROGRESS] = "1"
        entry = _Outgoing(port, cid, call_id, token, time.monotonic(), deadline=deadline)
        self._outgoing[(port.id, cid)] = entry
        self._replies[token] = entry
        subject = call_subject(port.remote, invocation.tool)
        reply = f"{reply_prefix(self.name)}.{token}"
        aio = self._aio
        assert aio is not None

        async def publish() -> None:
            try:
                await self._nc.publish(subject, _encode(invocation.parameters), reply=reply, headers=headers)
            except Exception as exc:  # closed meanwhile, or the pending buffer is full
                name = type(exc).__name__
                aio.to_trio(lambda: self._end(entry, OutcomeKind.APP_DISCONNECTED,
                                              f"the NATS connection to the broker {port.remote} is down ({name}); "
                                              "retry in a moment"))

        entry.publish = publish
        self._aio_submit(publish())

    def _publish_unheard_again(self, entry: _Outgoing) -> bool:
        """Publish again, a little later, a call that found no responders, while its grace and
        its deadline allow (see the module docstring); False when they do not."""
        now = time.monotonic()
        if not entry.unheard:
            entry.unheard_since = now
        wait = unheard_wait(entry.unheard, entry.unheard_since, now)
        if wait is None or self._nursery is None or entry.publish is None or time.time() + wait >= entry.deadline:
            return False
        entry.unheard += 1
        self._nursery.start_soon(self._publish_later, entry, wait)
        return True

    async def _publish_later(self, entry: _Outgoing, wait: float) -> None:
        await trio.sleep(wait)
        if self._replies.get(entry.token) is not entry or entry.publish is None:
            return  # ended meanwhile: cancelled, its deadline, the broker dropped, this link down
        entry.heard = time.monotonic()
        self._aio_submit(entry.publish())

    def _on_reply(self, msg: Any, heard: float) -> None:
        entry = self._replies.get(msg.subject.rsplit(".", 1)[-1])
        if entry is None:
            return  # late: the call ended here meanwhile
        entry.heard = heard
        port, headers = entry.port, msg.headers or {}
        if headers.get(_STATUS) == _NO_RESPONDERS:
            if self._publish_unheard_again(entry):
                return
            self._end(entry, OutcomeKind.APP_DISCONNECTED,
                      f"the broker {port.remote} is not reachable over NATS (no responders for "
                      f"{time.monotonic() - entry.unheard_since:.1f} s): it stopped or lost its connection; "
                      "its tools were withdrawn. List the tools again.")
            self._drop_remote(port.remote, "no responders")
            return
        kind = headers.get(H_KIND)
        if kind == "alive":
            return
        if kind == "progress":
            self._progress(port, entry.cid, msg.data)
            return
        self._forget(entry)
        call = self.router.calls.get(entry.cid)
        if call is None or call.link is not port:
            return  # late: the call ended meanwhile
        if len(msg.data) > self._max_result_bytes:
            self.router.fail(call, OutcomeKind.APP_ERROR,
                             f"the broker {port.remote} sent an answer of {len(msg.data)} bytes, over this "
                             f"broker's max_line_bytes ({self._max_result_bytes})")
            return
        try:
            result = _result_decoder.decode(msg.data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            self.router.fail(call, OutcomeKind.APP_ERROR, f"the broker {port.remote} sent an invalid answer")
            return
        self.router.resolve(call, result)

    def _progress(self, port: RemotePort, cid: int, data: bytes) -> None:
        call = self.router.calls.get(cid)
        if call is None or call.link is not port:
            return
        try:
            if len(data) > MAX_PROGRESS_BYTES:
                raise msgspec.DecodeError(f"{len(data)} bytes")
            progress, total, message = _progress_decoder.decode(data)
        except (msgspec.DecodeError, ValueError):
            log.warning("nats_bad_progress", broker=port.remote)
            return
        call.progress(progress, total, message)

    def _fail(self, port: RemotePort, cid: int, kind: OutcomeKind, message: str) -> None:
        call = self.router.calls.get(cid)
        if call is not None and call.link is port:
            self.router.fail(call, kind, message)

    def _forget(self, entry: _Outgoing) -> None:
        self._outgoing.pop((entry.port.id, entry.cid), None)
        self._replies.pop(entry.token, None)

    def _give_up(self, entry: _Outgoing) -> None:
        """Stop waiting for ``entry`` and tell its owner (buffered by nats-py while reconnecting)."""
        self._forget(entry)
        if self._nc is not None:
            self._aio_submit(self._nc.publish(f"{PREFIX}.cancel.{entry.port.remote}", b"",
                                              headers={H_CALL: entry.call_id}))

    def _end(self, entry: _Outgoing, kind: OutcomeKind, message: str) -> None:
        """End the call of ``entry`` here with ``kind``, and cancel it at its owner."""
        if self._replies.get(entry.token) is not entry:
            return
        self._give_up(entry)
        self._fail(entry.port, entry.cid, kind, message)

    def _calls_to_dropped(self, port: RemotePort) -> None:
        """``port``'s broker was dropped (its calls failed here): cancel them there too."""
        for entry in [e for e in self._outgoing.values() if e.port is port]:
            self._give_up(entry)

    def _link_down(self) -> None:
        """This broker's NATS connection was lost: replies cannot reach it, so its calls out end;
        and its answers cannot reach their callers (the server's grants to answer, row 86, die
        with the connection; the callers give up within :data:`LIVENESS`), so its calls in end."""
        for entry in list(self._outgoing.values()):
            self._end(entry, OutcomeKind.APP_DISCONNECTED,
                      f"this broker's NATS connection was lost during the call to the broker {entry.port.remote}; "
                      "retry in a moment")
        if self._held:
            log.info("nats_calls_abandoned", calls=len(self._held), reason="this broker's NATS connection was lost")
        for held in list(self._held.values()):
            self._cancel_call(held.call_id)

    async def _watch_outgoing(self) -> None:
        """End calls whose owner fell silent (killed, cut off, stalled), and forget ended ones."""
        while True:
            await trio.sleep(LIVENESS / 8)
            now = time.monotonic()
            for entry in list(self._outgoing.values()):
                call = self.router.calls.get(entry.cid)
                if call is None or call.link is not entry.port:
                    self._forget(entry)  # ended without a cancel to the port (a failed link)
                elif now - entry.heard > LIVENESS:
                    self._end(entry, OutcomeKind.APP_DISCONNECTED,
                              f"the broker {entry.port.remote} stopped answering (no sign of life for "
                              f"{LIVENESS:g} s): it stopped, lost its NATS connection or is stalled; retry later")

    # --- calls from other brokers ----------------------------------------------------------

    def _offer_call(self, request: Any) -> None:
        reply = _reply_of(request)
        if not reply.startswith("_INBOX."):
            # This broker answers (result, progress, keep-alives) only on an inbox: a reply
            # subject such as toolbridge.bye.<NAME> would make it say things it did not mean.
            log.debug("nats_call_refused", reason="the reply subject is not an _INBOX subject")
            return
        try:
            self._calls_in.send_nowait(request)
        except (trio.WouldBlock, trio.ClosedResourceError):
            if self._aio is not None:
                self._aio_submit(request.respond(_busy_reply(self.name)))
            return
        call_id = (request.headers or {}).get(H_CALL, "")[:200]
        if call_id:  # a toolbridge broker: it watches the call, so it gets keep-alives
            held = _Held(call_id, secrets.token_hex(8), time.monotonic())
            self._held[reply] = held
            self._held_tokens[held.token] = reply

    def _unhold(self, request: Any) -> None:
        held = self._held.pop(_reply_of(request), None)
        if held is not None:
            self._held_tokens.pop(held.token, None)

    def _caller_gone(self, token: str) -> None:
        """Nobody listens on a held call's reply subject any more (its caller died or lost its
        connection): cancel the call as if the caller had said so."""
        held = self._held.get(self._held_tokens.get(token, ""))
        if held is not None:
            log.info("nats_caller_gone", call_id=held.call_id[:64])
            self._cancel_call(held.call_id)

    def _on_cancel(self, msg: Any) -> None:
        """``toolbridge.cancel.<NAME>`` (called on trio in arrival order, before queued calls run)."""
        call_id = (msg.headers or {}).get(H_CALL, "")[:200]
        if call_id:
            self._cancel_call(call_id)

    def _cancel_call(self, call_id: str) -> None:
        scope = self._incoming.get(call_id)
        if scope is not None:
            scope.cancel()
            return
        now = time.monotonic()
        while self._early_cancels and (len(self._early_cancels) >= EARLY_CANCELS
                                       or next(iter(self._early_cancels.values())) < now):
            del self._early_cancels[next(iter(self._early_cancels))]  # the oldest first
        self._early_cancels[call_id] = now + EARLY_CANCEL_SECONDS

    async def _keep_alive(self) -> None:
        while True:
            await trio.sleep(KEEPALIVE)
            if not self._held or self._nc is None:
                continue
            due = time.monotonic() - KEEPALIVE
            prefix = alive_prefix(self.name)
            # Each with a reply subject: if nobody listens on the call's reply subject, the
            # server says so there ("no responders", _caller_gone), and the call is cancelled.
            targets = [(reply, f"{prefix}.{held.token}") for reply, held in self._held.items() if held.since <= due]
            if targets:
                self._aio_submit(self._publish_alive(targets))

    async def _publish_alive(self, targets: list[tuple[str, str]]) -> None:
        try:
            for subject, bounce in targets:
                await self._nc.publish(subject, b"", reply=bounce, headers={H_KIND: "alive"})
        except Exception as exc:  # disconnected: the callers give up on their own
            log.debug("nats_keepalive_failed", error=type(exc).__name__)

    async def _serve_calls(self) -> None:
        assert self._nursery is not None
        async for request in self._calls_out:
            await self._serving.acquire()
            self._nursery.start_soon(self._serve_call, request)

    async def _serve_call(self, request: Any) -> None:
        started = time.perf_counter_ns()
        try:
            result = await self._run_call(request)
            stat = self._catalog.stats.get(request.subject.rsplit(".", 1)[-1])
            if stat is not None:  # for $SRV.STATS
                stat.num_requests += 1
                stat.processing_time += time.perf_counter_ns() - started
                if result is not None and not result.success:
                    stat.num_errors += 1
                    stat.last_error = result.error_kind or "error"
            if result is not None:
                assert self._aio is not None
                await self._aio.run(request.respond(_encode(result)))
        except Exception as exc:  # the reply could not be sent (the caller's side is gone)
            log.warning("nats_reply_failed", error=type(exc).__name__)
        finally:
            self._unhold(request)
            self._serving.release()

    async def _run_call(self, request: Any) -> ToolResult | None:
        headers: dict[str, str] = request.headers or {}
        call_id = headers.get(H_CALL, "")[:200]
        if call_id and self._early_cancels.pop(call_id, None) is not None:
            return None  # the caller gave up before the call got here: it never starts
        tool = request.subject.rsplit(".", 1)[-1]
        registered = self.registry.lookup(tool)
        if registered is None or isinstance(registered.instance.link, RemotePort):
            return ToolResult(success=False, error=f"at broker {self.name!r}: unknown tool {tool!r}: the app that "
                              "offered it is no longer connected there. List the tools again.")
        try:
            arguments = msgspec.json.decode(request.data)
        except msgspec.DecodeError:
            arguments = None
        if not isinstance(arguments, dict):
            return ToolResult(success=False, error=f"at broker {self.name!r}: the arguments are not a JSON object",
                              error_kind=OutcomeKind.INVALID_ARGUMENTS.value)
        remaining = _remaining(headers)
        if remaining <= 0:
            return ToolResult(success=False, error=f"at broker {self.name!r}: the call's deadline passed before it "
                              "could start here (this broker was stalled, or its clock is ahead of the caller's: "
                              "check that both keep time with NTP); it was not run",
                              error_kind=OutcomeKind.TIMEOUT.value)
        timeout = hop_budget(remaining) if math.isfinite(remaining) else None
        reply = _reply_of(request)
        caller = CallerInfo(client_name="nats", session=_caller_of(reply), transport="nats")
        on_progress = None
        if headers.get(H_PROGRESS):

            def on_progress(progress: float, total: float | None, message: str | None) -> None:
                self._aio_submit(self._nc.publish(reply, _encode((progress, total, message)),
                                                  headers={H_KIND: "progress"}))

        with trio.CancelScope() as scope:
            if call_id:
                self._incoming[call_id] = scope
            try:
                outcome = await self.router.call_tool(tool, arguments, caller=caller, timeout=timeout,
                                                      on_progress=on_progress)
            finally:
                if call_id:
                    self._incoming.pop(call_id, None)
        if scope.cancelled_caught:
            return None  # the caller gave up: nobody waits for an answer
        return self.result_of(outcome)

    def result_of(self, outcome: CallOutcome) -> ToolResult:
        if outcome.result is not None:
            return plain(outcome.result)  # the app's own answer, its error kind included
        return ToolResult(success=False, error=f"at broker {self.name!r}: {outcome.message or outcome.kind}",
                          error_kind=outcome.kind.value if outcome.kind.app_reportable else None,
                          retry_after_ms=outcome.retry_after_ms)


def _remaining(headers: dict[str, str]) -> float:
    """Seconds left of a call from its headers: its budget, cut by its absolute deadline (the
    caller's clock; a deadline further off than the budget, a clock behind, counts no more than
    the budget). Infinite without either."""
    try:
        remaining = int(headers.get(H_TIMEOUT, "")) / 1000
    except ValueError:
        remaining = math.inf
    try:
        deadline = int(headers.get(H_DEADLINE, "")) / 1000
    except ValueError:
        return remaining
    return min(remaining, deadline - time.time())


def _reply_of(request: Any) -> str:
    """The reply subject of a services-API request (nats-py's ``micro.Request`` keeps its message)."""
    msg = getattr(request, "_msg", request)
    return str(getattr(msg, "reply", "") or "")


def _caller_of(reply: str) -> str:
    """The call log's name for a caller: the broker whose inbox gets the answer (only it may read
    it), marked unverified (any broker may name another's inbox as the reply subject)."""
    parts = reply.split(".")
    name = parts[1] if len(parts) >= 4 and parts[0] == "_INBOX" and parts[2] == "r" else "?"
    return f"{name[:64]} (unverified)"


def _busy_reply(name: str) -> bytes:
    return _encode(ToolResult(success=False, error=f"at broker {name!r}: too many calls from other brokers; "
                              "retry in a moment", error_kind=OutcomeKind.BUSY.value, retry_after_ms=1000))
