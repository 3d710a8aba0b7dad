"""Calls over NATS: this broker's calls of other brokers' tools, and other brokers' calls here.

Theory of operation
-------------------
:class:`CallPath` is the part of :class:`~broker.federation.nats_link.NatsFederation` (which
inherits it) that carries calls; the link itself joins the cluster, announces and learns tools.

* **Calling out.** Each other broker is one app instance here whose link is a
  :class:`RemotePort`; the router's ``toolInvocation`` to it becomes a NATS request on
  ``toolbridge.call.<NAME>.<tool>`` (:meth:`CallPath._forward`), its ``toolCancel`` a message on
  ``toolbridge.cancel.<NAME>``. Progress arrives on an inbox named in ``Toolbridge-Progress``.
* **Serving.** Calls from other brokers reach trio through a bounded channel (full: ``busy`` at
  once) and run through this broker's own router pipeline (``transport="nats"``), at most
  :data:`MAX_SERVING` at once; a cancel from the caller cancels its router call.

The wire contract is protocol.md §14.
"""

from __future__ import annotations

import itertools
import math
import secrets
import time
from typing import TYPE_CHECKING, Any, Final

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
H_CALL: Final = "Toolbridge-Call-Id"
H_FROM: Final = "Toolbridge-From"
H_PROGRESS: Final = "Toolbridge-Progress"
#: Calls from other brokers waiting for this broker's loop (beyond: answered ``busy``).
CALL_QUEUE: Final = 256
#: Calls from other brokers run at once here (each bounded further by its app's admission).
MAX_SERVING: Final = 512
#: The trip back: a request waits this much longer than the budget it gave the owner.
REPLY_MARGIN: Final = 1.0

_port_ids = itertools.count(-1, -1)  # negative: never a daemon connection's id
_result_decoder = msgspec.json.Decoder(ToolResult)
_encode = msgspec.json.Encoder().encode
#: A progress report on the reply stream: ``[progress, total, message]``.
_progress_decoder = msgspec.json.Decoder(tuple[float, float | None, str | None])


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



class CallPath:
    """The call path of a NATS federation (mixed into ``NatsFederation``, which provides the
    connection and the other brokers)."""

    router: Router
    registry: Registry
    federation: FederationState
    name: str
    remotes: dict[str, Any]
    _default_timeout: float
    _aio: AsyncioThread | None
    _nc: Any
    _nursery: trio.Nursery | None
    _catalog: Catalog

    def _init_calls(self) -> None:
        self._outgoing: dict[tuple[int, int], tuple[trio.CancelScope, str, str]] = {}
        self._incoming: dict[str, trio.CancelScope] = {}
        self._serving = trio.Semaphore(MAX_SERVING)
        self._calls_in, self._calls_out = trio.open_memory_channel[Any](CALL_QUEUE)

    def _drop_remote(self, name: str, why: str) -> None:
        raise NotImplementedError  # the link's

    def _aio_submit(self, coro: Any) -> None:
        raise NotImplementedError  # the link's

    def _offer_call(self, request: Any) -> None:
        try:
            self._calls_in.send_nowait(request)
        except (trio.WouldBlock, trio.ClosedResourceError):
            if self._aio is not None:
                self._aio_submit(request.respond(_busy_reply(self.name)))


    # --- calls to other brokers ------------------------------------------------------------

    def _port_message(self, port: RemotePort, message: Message) -> bool:
        nursery = self._nursery
        if nursery is None or self.remotes.get(port.remote) is None:
            return False
        if isinstance(message, ToolInvocation):
            try:
                nursery.start_soon(self._forward, port, message)
            except RuntimeError:  # the nursery is closing: the daemon is stopping
                return False
            return True
        if isinstance(message, ToolCancel):
            entry = self._outgoing.pop((port.id, message.correlation_id), None)
            if entry is not None:
                scope, remote, call_id = entry
                scope.cancel()
                self._aio_submit(self._nc.publish(f"{PREFIX}.cancel.{remote}", b"", headers={H_CALL: call_id}))
            return True
        return True

    async def _forward(self, port: RemotePort, invocation: ToolInvocation) -> None:
        import nats.errors

        cid = invocation.correlation_id
        # Unguessable: a cancel names the call, and any broker may publish on toolbridge.cancel.*
        call_id = f"{self.federation.broker_id}-{cid}-{secrets.token_hex(8)}"
        headers = {H_CALL: call_id, H_FROM: self.name}
        budget = self._default_timeout if invocation.timeout_ms is None else invocation.timeout_ms / 1000
        if invocation.timeout_ms is not None:
            headers[H_TIMEOUT] = str(invocation.timeout_ms)
        aio = self._aio
        assert aio is not None
        reply = None
        progress = None
        with trio.CancelScope() as scope:
            self._outgoing[(port.id, cid)] = (scope, port.remote, call_id)
            try:
                if invocation.progress:
                    progress = await self._progress_stream(port, cid)
                    headers[H_PROGRESS] = progress.subject
                reply = await aio.run(self._nc.request(
                    call_subject(port.remote, invocation.tool), _encode(invocation.parameters),
                    timeout=budget + REPLY_MARGIN, headers=headers))
            except nats.errors.NoRespondersError:
                self._fail(port, cid, OutcomeKind.APP_DISCONNECTED,
                           f"the broker {port.remote} is not reachable over NATS (no responders): it stopped or "
                           "lost its connection; its tools were withdrawn. List the tools again.")
                self._drop_remote(port.remote, "no responders")
            except nats.errors.TimeoutError:
                pass  # the router's own deadline, earlier, has ended the call
            except Exception as exc:  # the connection is closed or reconnecting (nats-py's errors)
                self._fail(port, cid, OutcomeKind.APP_DISCONNECTED,
                           f"the NATS connection to the broker {port.remote} is down ({type(exc).__name__}); "
                           "retry in a moment")
            finally:
                self._outgoing.pop((port.id, cid), None)
                if progress is not None:
                    aio.submit(progress.unsubscribe())
        if reply is None:
            return
        call = self.router.calls.get(cid)
        if call is None or call.link is not port:
            return  # late: the call ended meanwhile
        try:
            result = _result_decoder.decode(reply.data)
        except msgspec.DecodeError:
            self.router.fail(call, OutcomeKind.APP_ERROR, f"the broker {port.remote} sent an invalid answer")
            return
        self.router.resolve(call, result)

    async def _progress_stream(self, port: RemotePort, cid: int) -> Any:
        """A subscription on a fresh inbox where the owner publishes the call's progress.

        The owner publishes each report before its reply, on the same connection, and this
        subscription's callback runs before the request's reply is handed back, so the reports
        reach the router in order and before the result (later ones would be dropped).
        """
        aio, nc = self._aio, self._nc
        assert aio is not None

        async def on_progress(msg: Any) -> None:
            aio.to_trio(lambda: self._progress(port, cid, msg.data))

        return await aio.run(nc.subscribe(nc.new_inbox(), cb=on_progress))

    def _progress(self, port: RemotePort, cid: int, data: bytes) -> None:
        call = self.router.calls.get(cid)
        if call is None or call.link is not port:
            return
        try:
            progress, total, message = _progress_decoder.decode(data)
        except (msgspec.DecodeError, ValueError):
            log.warning("nats_bad_progress", broker=port.remote)
            return
        call.progress(progress, total, message)

    def _fail(self, port: RemotePort, cid: int, kind: OutcomeKind, message: str) -> None:
        call = self.router.calls.get(cid)
        if call is not None and call.link is port:
            self.router.fail(call, kind, message)

    # --- calls from other brokers ----------------------------------------------------------

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
            self._serving.release()

    async def _run_call(self, request: Any) -> ToolResult | None:
        headers: dict[str, str] = request.headers or {}
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
        try:
            remaining = int(headers.get(H_TIMEOUT, "")) / 1000
        except ValueError:
            remaining = math.inf
        timeout = hop_budget(remaining) if math.isfinite(remaining) and remaining > 0 else None
        call_id = headers.get(H_CALL, "")
        caller = CallerInfo(client_name="nats", session=headers.get(H_FROM, "?")[:64], transport="nats")
        on_progress = None
        stream = headers.get(H_PROGRESS, "")
        # Only an inbox: a caller must not make this broker publish on another broker's subjects.
        if stream.startswith("_INBOX.") and len(stream) <= 256:

            def on_progress(progress: float, total: float | None, message: str | None) -> None:
                self._aio_submit(self._nc.publish(stream, _encode((progress, total, message))))

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


def _busy_reply(name: str) -> bytes:
    return _encode(ToolResult(success=False, error=f"at broker {name!r}: too many calls from other brokers; "
                              "retry in a moment", error_kind=OutcomeKind.BUSY.value, retry_after_ms=1000))
