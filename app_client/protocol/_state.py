"""The rules of the wire protocol (v1, and v2's resources), as one small state machine per side (h11 ``_state.py``).

Theory of operation
-------------------
A machine holds no socket and never waits: its owner hands it what came in (bytes with
:meth:`receive_data` then :meth:`next_event` until :data:`NEED_DATA`, or a line its own line
channel framed with :meth:`receive_line`, or a message it decoded itself, in steps, with
:meth:`receive_message`) and gets *events* back; to send, it asks :meth:`send` for the bytes,
which refuses with :class:`LocalProtocolError` what this side may not send now. The I/O,
timers, authentication and policy stay with the owner; the rules are here:

:class:`BrokerConnection` (the daemon's side of one app-port connection)
    The first message decides what the connection is: ``register`` (phase ``REGISTERING``,
    then ``REGISTERED`` once ``registered`` is sent), ``agentConnect`` (``AGENT``: MCP lines
    from then on) or ``admin`` (``ADMIN``: one answer). A first line that is not one of those,
    or not a valid message at all, raises :class:`RemoteProtocolError`: fatal, the owner sends
    it as a fatal ``error`` (which moves the machine to ``CLOSED``) and closes. Between
    ``register`` and ``registered`` only a ``pong`` is read (an app answers pings before it
    is registered). Once registered, a bad line is a :class:`BadLine` (answered, the link
    goes on); a second ``register`` or a message an app never sends is a
    :class:`BadLine` too (``already_registered``, ``unexpected_message``). The machine
    remembers the correlation id of every ``toolInvocation`` sent over *this* connection until
    the call ends (a ``toolCancel`` sent, or :meth:`~BrokerConnection.call_ended`):
    :meth:`~BrokerConnection.owns` says whether an answer is this connection's to give.
    Whether an id not owned is late or another link's is the daemon's question (it has the
    correlation map). A broker that keeps its own record of each call (the daemon: the call
    record knows the link it was sent on) passes ``track_calls=False``, so no second table
    of the same ids exists.

:class:`AppConnection` (an app's side)
    ``register`` first (:meth:`~AppConnection.start`); before ``registered`` only a ``ping``
    is answered and anything else is :class:`Ignored`; an ``error`` is :class:`Rejected`, and
    so is a ``registered`` whose ``protocolVersion`` is above the one this side speaks; a
    bad line raises (the peer is no toolbridge daemon). ``registered.maxLineBytes`` bounds the
    lines this side sends. A ``toolInvocation`` whose id is still running is a
    :class:`BadLine` (``duplicate_correlation_id``); after a ``toolCancel`` the app sends no
    ``toolResponse`` for that call, nor for an id that is not running. ``addTools`` and
    ``removeTools`` carry no id: the broker answers each with one ``toolsUpdated`` or one
    ``error`` without ``correlationId``, in order, so the machine pairs them first-in
    first-out (:class:`UpdateAnswered`). An ``error`` with code ``replaced`` is
    :class:`Replaced`; a message an app never receives is a :class:`BadLine`
    (``unexpected_message``).

Protocol v2 (resources and prompts): both machines learn the negotiated version from ``registered``; a v2
message (``setResources``, ``resourceUpdated``, ``resourceRead``, ``resourceResponse``) on a
v1 connection is refused either way (``unexpected_message``); so are ``setPrompts``,
``promptGet`` and ``promptResponse``, and section 12's ``log``, ``complete`` and
``completeResponse``. A ``resourceRead``, ``promptGet`` or ``complete`` is a call like an
invocation (same id space, cancelled by ``toolCancel``, answered once by ``resourceResponse`` /
``promptResponse`` / ``completeResponse``). A ``log`` needs no answer and no call of its own.

:class:`AgentLinkClient` (the CLI's and the stdio relay's side)
    Sends ``agentConnect`` or ``admin`` and judges the one reply.

Nothing here imports trio: plain synchronous tests drive every rule (tests/test_protocol_state.py).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Final, Union

from ._errors import LocalProtocolError, RemoteProtocolError
from ._framing import LineFramer
from ._messages import (
    APP_TO_BROKER,
    DEFAULT_MAX_LINE_BYTES,
    PROTOCOL_VERSION,
    AddTools,
    AdminRequest,
    AdminResponse,
    AgentConnect,
    AgentConnected,
    Complete,
    CompleteResponse,
    Error,
    Goodbye,
    LogMessage,
    Message,
    Ping,
    Pong,
    Register,
    Registered,
    RemoveTools,
    PromptGet,
    PromptResponse,
    ResourceRead,
    ResourceResponse,
    ResourceUpdated,
    SetPrompts,
    SetResources,
    ToolCancel,
    ToolInvocation,
    ToolProgress,
    ToolResponse,
    ToolsUpdated,
    V2_MESSAGES,
    decode_message,
    encode_message,
    message_tag,
)

__all__ = [
    "FATAL_REGISTRATION_CODES",
    "INSTANCE_REPLACED",
    "NEED_DATA",
    "AgentLinkClient",
    "AppConnection",
    "AppEvent",
    "BadLine",
    "BrokerConnection",
    "BrokerEvent",
    "Ignored",
    "NeedData",
    "Phase",
    "Rejected",
    "Replaced",
    "Unexpected",
    "UpdateAnswered",
]

#: Registration error codes that end an app's reconnect loop: the registration itself is
#: invalid, so retrying it would fail the same way.
FATAL_REGISTRATION_CODES: Final = frozenset(
    {
        "invalid_app_name",
        "invalid_register",
        "invalid_tool",
        "duplicate_tool",
        "too_many_tools",
        "unsupported_version",
        "invalid_message",
        "line_too_long",
        "not_registered",
        # The first line could not be read: the same bytes would be refused again.
        "invalid_json",
        "invalid_utf8",
        "not_an_object",
    }
)
#: Error code the broker sends before dropping a link whose instance re-registered elsewhere.
INSTANCE_REPLACED: Final = "replaced"
#: Appended to why a first line was refused.
_FIRST_MUST_BE_REGISTER: Final = "; the first message must be register"


class NeedData(enum.Enum):
    """:meth:`next_event` has nothing until more bytes come in."""

    NEED_DATA = "NEED_DATA"


NEED_DATA: Final = NeedData.NEED_DATA


class Phase(enum.Enum):
    """Where a connection is in its life (each machine uses the phases that apply to it)."""

    #: Nothing exchanged yet.
    FIRST = "first"
    #: ``register`` is in (broker) or sent (app); ``registered`` is not.
    REGISTERING = "registering"
    #: Registered: calls and tool updates flow.
    REGISTERED = "registered"
    #: ``agentConnect``: MCP JSON-RPC lines from now on.
    AGENT = "agent"
    #: ``admin``: one request, one answer.
    ADMIN = "admin"
    #: A fatal ``error`` went out (or came in): nothing more is sent.
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line or message refused; the connection goes on. Answer it with :meth:`reply`."""

    error: RemoteProtocolError

    def reply(self) -> Error:
        """The non-fatal ``error`` that answers the bad line (with its correlation id, if any)."""
        return Error(self.error.code, self.error.message, correlation_id=self.error.correlation_id)


@dataclass(frozen=True, slots=True)
class Ignored:
    """A valid message the rules say to drop here (before registration, a late cancel, ...)."""

    message: Message


@dataclass(frozen=True, slots=True)
class Rejected:
    """The peer answered our first message (``register``, ``agentConnect``, ``admin``) with an error."""

    error: Error


@dataclass(frozen=True, slots=True)
class Replaced:
    """The broker dropped this link: another connection registered this app's instance id."""

    error: Error


@dataclass(frozen=True, slots=True)
class UpdateAnswered:
    """The answer to the oldest ``addTools`` / ``removeTools`` still waiting: new names or an error."""

    tool_names: dict[str, str] | None = None
    error: Error | None = None


@dataclass(frozen=True, slots=True)
class Unexpected:
    """A valid message that is not an answer to what the agent link asked."""

    message: Message


#: What :meth:`BrokerConnection.receive_message` returns.
BrokerEvent = Union[Message, BadLine]
#: What :meth:`AppConnection.receive_message` returns.
AppEvent = Union[Message, BadLine, Ignored, Rejected, Replaced, UpdateAnswered]


def _refuse_send(side: str, message: Message, phase: Phase) -> LocalProtocolError:
    return LocalProtocolError(
        "unexpected_message", f"{side} may not send {message_tag(message)!r} now (phase {phase.value})"
    )


# --- the broker's side ---------------------------------------------------------------------

_BROKER_SENDS: Final[dict[Phase, tuple[type[Any], ...]]] = {
    Phase.FIRST: (Error,),
    Phase.REGISTERING: (Registered, Error),
    Phase.REGISTERED: (ToolInvocation, ResourceRead, PromptGet, Complete, ToolCancel, ToolsUpdated, Ping, Pong,
                       Error),
    Phase.AGENT: (AgentConnected, Error),
    Phase.ADMIN: (AdminResponse, Error),
    Phase.CLOSED: (),
}


class BrokerConnection:
    """The broker's side of one connection to its app port (see the module docstring)."""

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, *, track_calls: bool = True) -> None:
        self.phase = Phase.FIRST
        self._framer = LineFramer(max_line_bytes)
        self._track_calls = track_calls
        #: Correlation ids of the invocations sent over this connection and not ended.
        self._owned: set[int] = set()
        #: The negotiated protocol version (from the ``registered`` sent); 1 until then.
        self.version = 1

    # --- receiving -----------------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray) -> None:
        """Bytes from the peer (for :meth:`next_event` / :meth:`next_line`)."""
        self._framer.receive_data(data)

    def next_event(self) -> BrokerEvent | NeedData:
        """The next message or :class:`BadLine` from the bytes received, or :data:`NEED_DATA`.

        Raises RemoteProtocolError (fatal) for a bad first line: see :meth:`receive_message`.
        """
        try:
            line = self._framer.next_line()
        except RemoteProtocolError as exc:
            return self.refuse_line(exc)
        return NEED_DATA if line is None else self.receive_line(line)

    def next_line(self) -> bytes | BadLine | NeedData:
        """``AGENT`` phase: the next raw (MCP JSON-RPC) line, a :class:`BadLine` for one too long."""
        if self.phase is not Phase.AGENT:
            raise LocalProtocolError("unexpected_message", f"raw lines are read only after agentConnect "
                                     f"(phase {self.phase.value})")
        try:
            line = self._framer.next_line()
        except RemoteProtocolError as exc:
            return BadLine(exc)
        return NEED_DATA if line is None else line

    def receive_line(self, line: bytes) -> BrokerEvent:
        """Decode one line (without its newline) and judge it (see :meth:`receive_message`)."""
        try:
            message = decode_message(line)
        except RemoteProtocolError as exc:
            return self.refuse_line(exc)
        return self.receive_message(message)

    def refuse_line(self, error: RemoteProtocolError) -> BadLine:
        """A line that could not be framed or decoded: a :class:`BadLine` once registered.

        Raises RemoteProtocolError (fatal: send it with ``fatal`` and close) for the first line.
        """
        if self.phase is Phase.FIRST:
            raise RemoteProtocolError(error.code, error.message + _FIRST_MUST_BE_REGISTER) from error
        return BadLine(error)

    def receive_message(self, message: Message) -> BrokerEvent:
        """Judge a decoded message from the peer: the message itself if it is allowed now.

        The first message must be ``register``, ``agentConnect`` or ``admin``; anything else
        raises RemoteProtocolError ``not_registered`` (fatal). Once registered, a second
        ``register`` is a :class:`BadLine` ``already_registered`` and a message an app never
        sends a :class:`BadLine` ``unexpected_message``.
        """
        phase = self.phase
        if phase is Phase.FIRST:
            if isinstance(message, Register):
                self.phase = Phase.REGISTERING
            elif isinstance(message, AgentConnect):
                self.phase = Phase.AGENT
            elif isinstance(message, AdminRequest):
                self.phase = Phase.ADMIN
            else:
                raise RemoteProtocolError(
                    "not_registered", f"the first message must be register, not {type(message).__name__}"
                )
            return message
        if phase is Phase.REGISTERED:
            if isinstance(message, Register):
                return BadLine(RemoteProtocolError(
                    "already_registered", "this connection is already registered; reconnect to register again"))
            if isinstance(message, V2_MESSAGES) and self.version < 2:
                return BadLine(RemoteProtocolError(
                    "unexpected_message", f"{message_tag(message)!r} needs protocol version 2; this "
                    f"connection speaks {self.version} (send protocolVersion 2 in register)"))
            if isinstance(message, APP_TO_BROKER):
                return message
            return BadLine(RemoteProtocolError(
                "unexpected_message", f"{type(message).__name__} messages are not accepted from an app"))
        if phase is Phase.REGISTERING:  # an app answers the broker's pings before `registered`
            if isinstance(message, Pong):
                return message
            return BadLine(RemoteProtocolError(
                "unexpected_message", f"{type(message).__name__} messages are not accepted before registered"))
        raise LocalProtocolError("unexpected_message", f"no message is read in phase {phase.value}")

    @staticmethod
    def check_version(register: Register) -> None:
        """Raise RemoteProtocolError ``unsupported_version`` if this broker cannot speak ``register``'s version."""
        if register.protocol_version < 1:
            raise RemoteProtocolError("unsupported_version", f"protocolVersion must be 1..{PROTOCOL_VERSION}")

    # --- sending -------------------------------------------------------------------------

    def send(self, message: Message) -> bytes:
        """The line that sends ``message`` (newline included), after checking it may go now.

        ``registered`` moves to ``REGISTERED``; a ``toolInvocation`` makes its id this
        connection's until the call ends; a fatal ``error`` closes. Raises LocalProtocolError
        for a message the broker may not send in this phase, or one that cannot be encoded.
        """
        if not isinstance(message, _BROKER_SENDS[self.phase]):
            raise _refuse_send("the broker", message, self.phase)
        if isinstance(message, V2_MESSAGES) and self.version < 2:
            raise LocalProtocolError("unexpected_message", f"{message_tag(message)!r} needs protocol version 2; "
                                     f"this connection speaks {self.version}")
        data = encode_message(message)
        if isinstance(message, (ToolInvocation, ResourceRead, PromptGet, Complete)):
            if self._track_calls:
                self._owned.add(message.correlation_id)
        elif isinstance(message, ToolCancel):
            self._owned.discard(message.correlation_id)  # the call ended when it was cancelled
        elif isinstance(message, Registered):
            self.phase = Phase.REGISTERED
            self.version = message.protocol_version or 1
        elif isinstance(message, Error) and message.fatal:
            self.phase = Phase.CLOSED
        return data

    # --- correlation ---------------------------------------------------------------------

    def owns(self, correlation_id: int) -> bool:
        """Whether a call with this id was sent over this very connection and has not ended."""
        if not self._track_calls:
            raise RuntimeError("owns() needs track_calls=True; this broker keeps its own call records")
        return correlation_id in self._owned

    def call_ended(self, correlation_id: int) -> None:
        """The call ``correlation_id`` ended (answered, failed): its id is no longer this connection's."""
        self._owned.discard(correlation_id)

    @property
    def calls_in_flight(self) -> int:
        """How many ids this connection owns."""
        return len(self._owned)


# --- the app's side ------------------------------------------------------------------------

_APP_SENDS: Final[dict[Phase, tuple[type[Any], ...]]] = {
    Phase.FIRST: (),
    Phase.REGISTERING: (Pong,),
    Phase.REGISTERED: (ToolResponse, ToolProgress, AddTools, RemoveTools, Goodbye, Ping, Pong, Error,
                       SetResources, ResourceUpdated, ResourceResponse, SetPrompts, PromptResponse,
                       LogMessage, CompleteResponse),
    Phase.CLOSED: (),
}


class AppConnection:
    """An app's side of its connection to the broker (see the module docstring)."""

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self.phase = Phase.FIRST
        self._framer = LineFramer(max_line_bytes)
        #: The broker's line limit (from ``registered.maxLineBytes``): lines we send stay within it.
        self.peer_max_line_bytes = DEFAULT_MAX_LINE_BYTES
        #: Running calls by correlation id: True once the broker cancelled it.
        self._calls: dict[int, bool] = {}
        #: ``addTools`` / ``removeTools`` sent and not answered yet.
        self._updates_pending = 0
        #: The negotiated protocol version (``registered.protocolVersion``); 1 until then.
        self.version = 1

    def start(self, register: Register) -> bytes:
        """The ``register`` line that opens the connection (``REGISTERING``)."""
        if self.phase is not Phase.FIRST:
            raise _refuse_send("an app", register, self.phase)
        data = self._encode(register)
        self.phase = Phase.REGISTERING
        return data

    # --- receiving -----------------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray) -> None:
        self._framer.receive_data(data)

    def next_event(self) -> AppEvent | NeedData:
        """The next event from the bytes received, or :data:`NEED_DATA` (see :meth:`receive_line`)."""
        try:
            line = self._framer.next_line()
        except RemoteProtocolError as exc:
            return self.refuse_line(exc)
        return NEED_DATA if line is None else self.receive_line(line)

    def receive_line(self, line: bytes) -> AppEvent:
        """Decode one line from the broker and judge it (see :meth:`receive_message`)."""
        try:
            message = decode_message(line)
        except RemoteProtocolError as exc:
            return self.refuse_line(exc)
        return self.receive_message(message)

    def refuse_line(self, error: RemoteProtocolError) -> BadLine:
        """A bad line: a :class:`BadLine` once registered; before that it raises ``error``
        (fatal: a peer that breaks the protocol before ``registered`` is no toolbridge daemon)."""
        if self.phase is not Phase.REGISTERED:
            raise error
        return BadLine(error)

    def receive_message(self, message: Message) -> AppEvent:
        """Judge a decoded message from the broker (see the module docstring)."""
        if self.phase is Phase.REGISTERING:
            if isinstance(message, Registered):
                version = message.protocol_version
                if version is not None and version > PROTOCOL_VERSION:
                    # Negotiation (protocol.md section 7) never answers above what we sent: a
                    # broker that does is broken, and we cannot speak its version.
                    self.phase = Phase.CLOSED
                    return Rejected(Error(
                        "unsupported_version",
                        f"the broker answered protocolVersion {version}; this client speaks at most "
                        f"{PROTOCOL_VERSION}", fatal=True))
                self.peer_max_line_bytes = message.max_line_bytes or DEFAULT_MAX_LINE_BYTES
                self.version = version or 1
                self.phase = Phase.REGISTERED
                return message
            if isinstance(message, Error):
                self.phase = Phase.CLOSED
                return Rejected(message)
            return message if isinstance(message, Ping) else Ignored(message)
        if self.phase is not Phase.REGISTERED:
            return Ignored(message)
        if isinstance(message, (Ping, Pong)):
            return message
        if isinstance(message, V2_MESSAGES) and self.version < 2:
            return BadLine(RemoteProtocolError(
                "unexpected_message", f"{message_tag(message)!r} needs protocol version 2; this connection "
                f"speaks {self.version}"))
        if isinstance(message, (ToolInvocation, ResourceRead, PromptGet, Complete)):
            cid = message.correlation_id
            if cid in self._calls:
                return BadLine(RemoteProtocolError("duplicate_correlation_id", f"call {cid} is already running"))
            self._calls[cid] = False
            return message
        if isinstance(message, ToolCancel):
            if self._calls.get(message.correlation_id) is not False:
                return Ignored(message)  # not running (finished, or cancelled already)
            self._calls[message.correlation_id] = True
            return message
        if isinstance(message, ToolsUpdated):
            if self._updates_pending:
                self._updates_pending -= 1
                return UpdateAnswered(tool_names=dict(message.tool_names))
            return message  # an unsolicited refresh of the agent-facing names
        if isinstance(message, Error):
            if message.code == INSTANCE_REPLACED:
                self.phase = Phase.CLOSED
                return Replaced(message)
            if message.correlation_id is None and self._updates_pending:
                self._updates_pending -= 1
                return UpdateAnswered(error=message)
            return message
        if isinstance(message, Registered):
            return Ignored(message)
        return BadLine(RemoteProtocolError(
            "unexpected_message", f"an app does not accept {message_tag(message)!r} messages"))

    # --- sending -------------------------------------------------------------------------

    def send(self, message: Message) -> bytes:
        """The line that sends ``message``, after checking it may go now.

        Raises LocalProtocolError: ``line_too_long`` over the broker's limit,
        ``call_not_running`` for a ``toolResponse`` / ``toolProgress`` of a call that is not
        running (or, for a response, was cancelled), ``unexpected_message`` for a message an
        app may not send in this phase, ``invalid_message`` if it cannot be encoded.
        """
        if not isinstance(message, _APP_SENDS.get(self.phase, ())):
            raise _refuse_send("an app", message, self.phase)
        if isinstance(message, V2_MESSAGES) and self.version < 2:
            raise LocalProtocolError("unexpected_message", f"{message_tag(message)!r} needs protocol version 2; "
                                     f"the broker speaks {self.version}")
        if isinstance(message, (ToolResponse, ToolProgress, ResourceResponse, PromptResponse, CompleteResponse)):
            cancelled = self._calls.get(message.correlation_id)
            if cancelled is None or (cancelled and not isinstance(message, ToolProgress)):
                why = "was cancelled" if cancelled else "is not running"
                raise LocalProtocolError(
                    "call_not_running", f"call {message.correlation_id} {why}: no {message_tag(message)} for it")
        data = self._encode(message)
        if isinstance(message, (ToolResponse, ResourceResponse, PromptResponse, CompleteResponse)):
            del self._calls[message.correlation_id]
        elif isinstance(message, (AddTools, RemoveTools)):
            self._updates_pending += 1
        return data

    def _encode(self, message: Message) -> bytes:
        data = encode_message(message)
        if len(data) - 1 > self.peer_max_line_bytes:
            raise LocalProtocolError(
                "line_too_long",
                f"the message is {len(data) - 1} bytes, over the broker's limit of "
                f"{self.peer_max_line_bytes} bytes",
            )
        return data

    # --- calls and updates ---------------------------------------------------------------

    def is_running(self, correlation_id: int) -> bool:
        """Whether the call may still be answered (running and not cancelled)."""
        return self._calls.get(correlation_id) is False

    def call_ended(self, correlation_id: int) -> None:
        """The call ended without a response (cancelled): its id may be used again."""
        self._calls.pop(correlation_id, None)

    def update_withdrawn(self) -> None:
        """An ``addTools`` / ``removeTools`` whose line was made but never went out."""
        if self._updates_pending:
            self._updates_pending -= 1

    @property
    def active_calls(self) -> int:
        return len(self._calls)


# --- the agent link's side (the CLI, the stdio relay) --------------------------------------


class AgentLinkClient:
    """The client side of ``agentConnect`` and ``admin``: one request, one reply judged here."""

    def __init__(self) -> None:
        self.phase = Phase.FIRST
        #: True once ``agentConnected`` came: MCP JSON-RPC lines from now on.
        self.connected = False

    def connect(self, token: str, *, discovery: bool = False, code: bool = False, app: str | None = None) -> bytes:
        """The ``agentConnect`` line (``AGENT``); ``code`` asks for code mode, ``app`` a one-app
        scope (the app's label)."""
        self._first("agentConnect")
        self.phase = Phase.AGENT
        return encode_message(AgentConnect(token=token, discovery=discovery, code=code, app=app))

    def admin(self, token: str, command: str, args: dict[str, Any] | None = None) -> bytes:
        """The ``admin`` line (``ADMIN``)."""
        self._first("admin")
        self.phase = Phase.ADMIN
        return encode_message(AdminRequest(token=token, command=command, args=args or {}))

    def _first(self, what: str) -> None:
        if self.phase is not Phase.FIRST:
            raise LocalProtocolError("unexpected_message", f"{what} is only the first message of a connection")

    def receive_line(self, line: bytes) -> AgentConnected | AdminResponse | Rejected | Unexpected:
        """Judge the daemon's reply: the answer asked for, :class:`Rejected` for an ``error``,
        :class:`Unexpected` for any other message. Raises RemoteProtocolError for a bad line."""
        if self.phase not in (Phase.AGENT, Phase.ADMIN) or self.connected:
            raise LocalProtocolError("unexpected_message", "no reply is awaited")
        reply = decode_message(line)
        expected: type[AgentConnected] | type[AdminResponse] = (
            AgentConnected if self.phase is Phase.AGENT else AdminResponse)
        if isinstance(reply, expected):
            if isinstance(reply, AgentConnected):
                self.connected = True
            else:
                self.phase = Phase.CLOSED
            return reply
        self.phase = Phase.CLOSED
        if isinstance(reply, Error):
            return Rejected(reply)
        return Unexpected(reply)

