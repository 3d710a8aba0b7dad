"""Elicitation toward the agent, in both MCP eras (the app's side is ``broker.core.elicitation``).

Theory of operation
-------------------
An app's ``elicit`` reaches the call's origin, the ``tools/call`` request
(``session_tools.ToolRequest.call_elicit``), which asks the agent's user here. First the client's
capability: ``elicitation`` in ``initialize``'s capabilities (handshake era) or in the
request's ``_meta["io.modelcontextprotocol/clientCapabilities"]`` (2026-07-28); an empty
object means form mode only (MCP specification 2026-07-28, client/elicitation,
"Capabilities"). A client that did not declare the mode gets nothing and the app hears
``elicitation_unsupported`` at once.

Handshake era (specification 2025-11-25, client/elicitation; basic/transports "sending
server requests on the POST's SSE stream"): the broker sends ``elicitation/create`` as a
JSON-RPC request of its own (id ``toolbridge-elicit-N``) on the outbox of the ``tools/call``
it belongs to — on stdio the connection, on HTTP the POST's response stream, which switches
to SSE because the first thing on it is not the response (``http._pump``) — and the agent's
response (a POST of its own on HTTP, 202) comes to :meth:`Session.handle`, which hands it to
:func:`on_response`. A task of the session waits for it at most ``elicitation_timeout`` (never
past the call's deadline); then the app hears ``elicitation_timeout`` and the agent gets
``notifications/cancelled`` for the request, as it does when the call ends first.

2026-07-28 (basic/patterns/mrtr, "Multi Round-Trip Requests"; no server-to-client requests
exist): the ``tools/call`` is answered at once with an input-required result,
``{"resultType": "input_required", "inputRequests": {key: {"method": "elicitation/create",
"params": ...}}, "requestState": ...}``, and the app's call stays live at the app and in the
broker (its admission slot held, its deadline running) as a :class:`_Paused` entry of the
daemon-wide :class:`PausedCalls`, which is now the call's origin. The client asks its user
and retries the same ``tools/call`` (a new request id) with ``inputResponses[key]`` and the
``requestState`` echoed; :func:`resume` finds the entry and attaches the retry as the call's
new origin, and the app gets the answer: the *same* app call goes on, and its result (or its
next elicitation) answers the retry. ``inputResponses`` without a ``requestState`` answer
nothing toolbridge asked: such a ``tools/call`` is a new call (its app asks again, so the
client gets a fresh input-required result: mrtr, "Error Handling").

``requestState`` is the server's own memory held by the client, so it is attacker-controlled
input (mrtr, "Server Requirements" 4-5): it is sealed with HMAC-SHA256 under a per-daemon
random secret over a payload naming the paused entry (a random nonce), the call's correlation
id, the principal (the HTTP token's name; a stdio session's label), the one-app scope (if
any), the tool name called and an expiry. A state that fails the check, has expired, names another principal or tool, or was
used already (the entry is taken on its first successful use: single use, which the MAC alone
cannot give) is refused with -32602 and a message saying to call the tool again. A paused call
waits for its retry at most ``elicitation_timeout`` and never past its deadline
(:meth:`PausedCalls.run`, one task of the daemon's): then it is cancelled at the app (or
times out). A stdio session that ends cancels its paused calls at once
(:meth:`PausedCalls.end_session`): its label is their principal, so nobody else could resume them. A call that ends while paused (the app answered anyway, its link dropped) keeps
its outcome in the entry until then, so the retry still gets it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import heapq
import hmac
import itertools
import secrets
import time
from typing import TYPE_CHECKING, Any, Final, Protocol

import attrs
import msgspec
import structlog
import trio

from ..core import elicitation as core
from ..discovery import CALL_TOOL
from ..core.elicitation import ACTIONS, ElicitError, PendingElicitation
from ..core.outcome import CallOutcome, OutcomeKind, format_seconds
from .jsonrpc import INVALID_PARAMS, Request, Response, RpcError, encode, encode_notification, encode_result

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..core.calls import Call
    from ..core.router import Router

log = structlog.get_logger("toolbridge.mcp")

__all__ = ["PausedCalls", "ask", "on_response", "resume", "supports"]

#: Paused calls (2026-07-28) the daemon keeps at once; beyond it an app's elicit is refused.
MAX_PAUSED: Final = 10_000
_STATE_VERSION: Final = 1
_ids = itertools.count(1)
_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder()


class Outbox(Protocol):
    """Where a request's messages go (``request_context.Outbox``, the part used here)."""

    def send_nowait(self, data: bytes) -> bool: ...


class Server(Protocol):
    """What this module needs of ``server.McpServer``."""

    @property
    def settings(self) -> Settings: ...

    @property
    def paused(self) -> PausedCalls: ...


class Session(Protocol):
    """What this module needs of ``session.Session`` (structural: that module imports this one)."""

    @property
    def server(self) -> Server: ...

    label: str | None
    principal: str
    app: str | None
    client_capabilities: dict[str, Any]
    elicit_asks: dict[str, Any]

    def start_task(self, fn: Any, *args: Any, name: str) -> None: ...

    def detach(self, call: Call) -> None: ...

    def finish_request(self, outbox: Any, data: bytes) -> None: ...

    def attach_resumed(self, call: Call | None, request: Request, context: Any, outbox: Any, via_meta: bool,
                       own_name: str | None, *, outcome: CallOutcome | None = None) -> ToolRequest: ...


class ToolRequest(Protocol):
    """What this module needs of ``session_tools.ToolRequest``, a ``tools/call`` in flight."""

    @property
    def session(self) -> Session: ...

    @property
    def modern(self) -> bool: ...

    @property
    def outbox(self) -> Any: ...

    @property
    def via_meta(self) -> bool: ...

    @property
    def own_name(self) -> str | None: ...

    @property
    def capabilities(self) -> Any: ...

    @property
    def input_responses(self) -> dict[str, Any] | None: ...


def supports(capabilities: Any, mode: str) -> bool:
    """Whether a client's capabilities declare elicitation in ``mode`` (``{}``: form only)."""
    declared = capabilities.get("elicitation") if isinstance(capabilities, dict) else None
    if not isinstance(declared, dict):
        return False
    if not declared:
        return mode == "form"
    return isinstance(declared.get(mode), dict)


def ask(request: ToolRequest, call: Call, pending: PendingElicitation) -> None:
    """Ask the agent of ``request`` (the call's origin); ElicitError when it cannot be asked."""
    session = request.session
    capabilities = request.capabilities if request.modern else session.client_capabilities
    if not supports(capabilities, pending.mode):
        raise ElicitError("elicitation_unsupported",
                          f"the agent's MCP client did not declare {pending.mode}-mode elicitation "
                          f"(capabilities.elicitation): go on without the user's answer")
    if request.modern:
        if not _answered_up_front(request, pending):
            session.server.paused.pause(request, call, pending)
    else:
        _ask_legacy(request, call, pending)


def _answered_up_front(request: ToolRequest, pending: PendingElicitation) -> bool:
    """2026-07-28: the ``tools/call`` itself carried the answer, under the key the app chose
    (mrtr's ephemeral pattern: a client may answer what it knows the tool will ask). Only an
    app-chosen key (never a generated one, which names one question of one call); each answer
    is used once; a malformed one is not used (the client is asked instead)."""
    responses = request.input_responses
    if pending.key is None or not isinstance(responses, dict) or pending.key not in responses:
        return False
    problem, action, content = _read_answer(pending, responses.pop(pending.key))
    if problem is not None:
        return False
    core.answer(pending, action, content)
    return True


# --- the handshake era ---------------------------------------------------------------------


@attrs.define(eq=False)
class _LegacyAsk:
    """An ``elicitation/create`` sent to the agent, waiting for its response."""

    id: str
    pending: PendingElicitation
    outbox: Outbox
    session: Session
    done: trio.Event = attrs.Factory(trio.Event)
    answered: bool = False

    async def wait(self, timeout: float) -> None:
        with trio.move_on_after(timeout):
            await self.done.wait()
        if not self.done.is_set():
            core.fail(self.pending, ElicitError(
                "elicitation_timeout", f"the user did not answer within {format_seconds(timeout)}"))

    def end(self) -> None:
        """The elicitation ended: forget it; tell the agent unless it answered."""
        self.session.elicit_asks.pop(self.id, None)
        self.done.set()
        if not self.answered:  # timed out, or the call ended: the agent can close its dialog
            self.outbox.send_nowait(encode_notification(
                "notifications/cancelled", {"requestId": self.id, "reason": "the tool call no longer waits"}))


def _ask_legacy(request: ToolRequest, call: Call, pending: PendingElicitation) -> None:
    session = request.session
    request_id = f"toolbridge-elicit-{next(_ids)}"
    params = dict(pending.params)
    if pending.mode == "url":  # 2025-11-25 requires an id for a URL elicitation
        params["elicitationId"] = request_id
    data = encode({"jsonrpc": "2.0", "id": request_id, "method": "elicitation/create", "params": params})
    if not request.outbox.send_nowait(data):
        raise ElicitError("agent_error", "the agent is not reading its messages (its queue is full); try again")
    waiter = _LegacyAsk(request_id, pending, request.outbox, session)
    session.elicit_asks[request_id] = waiter
    pending.on_end.append(waiter.end)
    timeout = core.seconds_left(call, session.server.settings.elicitation_timeout)
    session.start_task(waiter.wait, timeout, name="mcp elicitation")


def on_response(session: Session, response: Response) -> bool:
    """The agent's response to one of our ``elicitation/create`` requests (False: not ours)."""
    waiter = session.elicit_asks.get(response.id) if isinstance(response.id, str) else None
    if waiter is None:
        return False
    waiter.answered = True
    pending = waiter.pending
    if response.error is not None:
        message = response.error.get("message") if isinstance(response.error, dict) else None
        core.fail(pending, ElicitError("agent_error", "the agent could not ask its user: "
                                       + (message[:300] if isinstance(message, str) else "no reason given")))
        return True
    problem, action, content = _read_answer(pending, response.result)
    if problem is not None:
        core.fail(pending, ElicitError("agent_error", f"the agent's answer is not valid: {problem}"))
    else:
        core.answer(pending, action, content)
    return True


def _read_answer(pending: PendingElicitation, result: Any) -> tuple[str | None, str, dict[str, Any] | None]:
    """(problem, action, content) of an MCP ElicitResult for ``pending``."""
    if not isinstance(result, dict) or result.get("action") not in ACTIONS:
        return "its action must be accept, decline or cancel", "cancel", None
    action: str = result["action"]
    content = result.get("content")
    if action != "accept" or pending.mode != "form":
        return None, action, None
    problem = core.check_content(pending.schema, content)
    return problem, action, content if isinstance(content, dict) else {}


# --- 2026-07-28: multi round-trip requests -------------------------------------------------


@attrs.define(eq=False)
class _Paused:
    """A call paused for its client's retry: the call's origin meanwhile (a ``CallOrigin``)."""

    nonce: str
    call: Call
    pending: PendingElicitation
    key: str
    principal: str
    #: The one-app scope the call was made in (None: ``/mcp``): a retry elsewhere is refused.
    scope: str | None
    #: The ``tools/call`` name the client used (its retry must use it too), and how to answer.
    name: str
    via_meta: bool
    own_name: str | None
    expires: float
    outcome: CallOutcome | None = None

    def __lt__(self, other: _Paused) -> bool:
        return self.expires < other.expires

    def call_progress(self, call: Call, progress: float, total: float | None, message: str | None) -> None:
        pass  # nobody listens while the client asks its user

    def call_done(self, call: Call, outcome: CallOutcome) -> None:
        self.outcome = outcome  # kept for the retry until the entry expires
        core.call_ended(call.elicitation)


class PausedCalls:
    """Every paused call of the daemon (2026-07-28), by nonce; seals and opens request states."""

    def __init__(self, router: Router, settings: Settings) -> None:
        self._router = router
        self._settings = settings
        self._secret = secrets.token_bytes(32)
        self._entries: dict[str, _Paused] = {}
        self._heap: list[_Paused] = []
        self._wakeup = trio.CancelScope()

    def __len__(self) -> int:
        return len(self._entries)

    def pause(self, request: ToolRequest, call: Call, pending: PendingElicitation) -> None:
        """Answer ``request`` with an input-required result; the call waits for the retry."""
        if len(self._entries) >= MAX_PAUSED:
            raise ElicitError("elicitation_busy", f"toolbridge holds {MAX_PAUSED} paused calls; try again later")
        session = request.session
        assert call.request_id is not None
        name = CALL_TOOL if request.via_meta else (request.own_name or call.name)
        wait = core.seconds_left(call, self._settings.elicitation_timeout)
        key = pending.key or f"toolbridge_elicit_{pending.elicit_id}"  # the app's own name, if it chose one
        entry = _Paused(secrets.token_urlsafe(16), call, pending, key,
                        session.principal, session.app, name, request.via_meta, request.own_name,
                        trio.current_time() + wait)
        self._add(entry)
        session.detach(call)
        call.origin = entry
        result = {"resultType": "input_required", "requestState": self._seal(entry, wait),
                  "inputRequests": {entry.key: {"method": "elicitation/create", "params": pending.params}}}
        log.info("mcp_call_paused", session=session.label, correlation_id=call.correlation_id,
                 wait_s=round(wait, 1))
        session.finish_request(request.outbox, encode_result(call.request_id, result))

    def _add(self, entry: _Paused) -> None:
        self._entries[entry.nonce] = entry
        heapq.heappush(self._heap, entry)
        if entry.expires < self._wakeup.deadline:
            self._wakeup.deadline = entry.expires

    def _seal(self, entry: _Paused, wait: float) -> str:
        payload = {"v": _STATE_VERSION, "n": entry.nonce, "c": entry.call.correlation_id, "p": entry.principal,
                   "s": entry.scope, "t": entry.name, "e": int(time.time() + wait) + 1}
        body = _encoder.encode(payload)
        mac = hmac.new(self._secret, body, hashlib.sha256).digest()
        return _b64(body) + "." + _b64(mac)

    def open(self, state: str, principal: str, scope: str | None, name: str) -> _Paused:
        """The paused entry ``state`` names, taken out (single use). RpcError -32602 when the
        state is forged or altered, expired, another principal's or tool's, or used already."""
        forged = RpcError(INVALID_PARAMS, "Invalid params: requestState is not one toolbridge issued (it was "
                          "altered or forged); call the tool again without requestState")
        body_text, dot, mac_text = state.partition(".")
        if not dot or len(state) > 4096:
            raise forged
        try:
            body, mac = _unb64(body_text), _unb64(mac_text)
        except (binascii.Error, ValueError):
            raise forged from None
        if not hmac.compare_digest(mac, hmac.new(self._secret, body, hashlib.sha256).digest()):
            raise forged
        payload = _decoder.decode(body)  # ours: the MAC holds
        if payload.get("p") != principal or payload.get("s") != scope or payload.get("t") != name:
            raise RpcError(INVALID_PARAMS, "Invalid params: this requestState belongs to another client or another "
                           "tool; retry only the tools/call that returned it")
        entry = self._entries.get(payload.get("n"))
        if entry is None or payload.get("e", 0) < time.time():
            raise RpcError(INVALID_PARAMS, "Invalid params: this requestState was used already or has expired (each "
                           "is good for one retry, within elicitation_timeout); call the tool again from the start")
        return entry

    def take(self, entry: _Paused) -> None:
        """``entry`` is being used: it is gone (a second use of its state is refused)."""
        self._entries.pop(entry.nonce, None)

    def end_session(self, principal: str) -> int:
        """A stateful session (stdio) ended: the calls only it could resume are cancelled now
        rather than at their expiry. Returns how many."""
        ended = [entry for entry in self._entries.values() if entry.principal == principal]
        for entry in ended:
            del self._entries[entry.nonce]
            if not entry.call.done:
                self._router.cancel(entry.call, "the agent's MCP session ended while the call waited for its user")
        return len(ended)

    async def run(self) -> None:
        """Expire paused calls whose retry did not come in time (the daemon runs this)."""
        heap = self._heap
        while True:
            now = trio.current_time()
            while heap and heap[0].expires <= now:
                entry = heapq.heappop(heap)
                if self._entries.get(entry.nonce) is not entry:
                    continue  # resumed already
                del self._entries[entry.nonce]
                call = entry.call
                if call.done:
                    continue
                if now >= call.gives_up_at - 0.001:
                    self._router.expire(call)
                else:
                    self._router.cancel(call, "the agent did not come back with the user's answer within "
                                        f"{format_seconds(self._settings.elicitation_timeout)}")
            self._wakeup = trio.CancelScope(deadline=heap[0].expires if heap else float("inf"))
            with self._wakeup:
                await trio.sleep_forever()


def resume(session: Session, request: Request, context: Any, outbox: Any, name: str) -> None:
    """A ``tools/call`` retry carrying ``requestState`` (2026-07-28): go on with the paused call."""
    params = request.params
    state = params.get("requestState")
    if not isinstance(state, str):
        raise RpcError(INVALID_PARAMS, "Invalid params: requestState must be the string toolbridge returned; "
                       "call the tool again without it")
    paused = session.server.paused
    entry = paused.open(state, session.principal, session.app, name)
    responses = params.get("inputResponses")
    response = responses.get(entry.key) if isinstance(responses, dict) else None
    call = entry.call
    if entry.outcome is not None or call.done:  # it ended while paused: the retry gets its end
        paused.take(entry)
        outcome = entry.outcome or CallOutcome(OutcomeKind.CANCELLED, "the call ended while it waited for the user")
        session.attach_resumed(None, request, context, outbox, entry.via_meta, entry.own_name, outcome=outcome)
        return
    if response is None:  # not answered: ask again (mrtr, "Error Handling")
        paused.take(entry)
        origin = session.attach_resumed(call, request, context, outbox, entry.via_meta, entry.own_name)
        paused.pause(origin, call, entry.pending)
        return
    problem, action, content = _read_answer(entry.pending, response)
    if problem is not None:  # the entry stays: a corrected retry with the same state may follow
        raise RpcError(INVALID_PARAMS, f"Invalid params: inputResponses[{entry.key!r}]: {problem}")
    paused.take(entry)
    session.attach_resumed(call, request, context, outbox, entry.via_meta, entry.own_name)
    core.answer(entry.pending, action, content)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
