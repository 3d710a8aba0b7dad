"""The wire protocol's messages (v1, and v2's resources, prompts, completions and logs): msgspec Structs in one tagged union, and their encoding.

Theory of operation
-------------------
Every message of both directions (app → broker, broker → app, and toolbridge's own
``agentConnect`` / ``admin``) is a msgspec Struct tagged by ``"type"``. Field names are
camelCase on the wire (``correlationId``) and snake_case in Python. Unknown fields are ignored
and every optional field has a default, so older and newer peers interoperate.
:func:`decode_message` turns one line into a typed message, or raises
:class:`RemoteProtocolError` with a code from protocol.md (and the line's ``correlationId``
when it names one, so the call it belongs to can fail at once); :func:`encode_message` turns a
message into one line of bytes, newline included. :data:`APP_TO_BROKER` and
:data:`BROKER_TO_APP` say which side may send what (``_state`` enforces them).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal, Union

import msgspec

from ._errors import LocalProtocolError, RemoteProtocolError

PROTOCOL_VERSION: Final = 2
#: The first version with resources (protocol.md section 11): a v1 peer never sees their messages.
RESOURCES_VERSION: Final = 2
DEFAULT_MAX_LINE_BYTES: Final = 16 * 1024 * 1024


class _Base(msgspec.Struct, tag_field="type", rename="camel", omit_defaults=True):
    """Common base: tagged by ``type``, camelCase on the wire, defaults left out."""


class ToolSpec(msgspec.Struct, rename="camel", omit_defaults=True):
    """One tool as an app declares it in ``register`` or ``addTools``."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = msgspec.field(default_factory=lambda: {"type": "object"})
    title: str | None = None
    annotations: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    #: Default deadline for calls of this tool, in milliseconds (the broker's default if unset).
    timeout_ms: int | None = None
    #: ``False`` opts this tool out of the path-traversal argument guard.
    path_guard: bool = True
    #: Typical requests of users that this tool serves, written by the app's author: only the
    #: daemon's tool search reads them (protocol.md, ``exampleRequests``); agents never see them.
    example_requests: list[str] | None = None
    #: Set by brokers only (an uplink, protocol.md section 9): the broker ids this tool came
    #: through, nearest first: the registering broker, ..., the broker of the owning app.
    via: list[str] | None = None


#: A tool's ``exampleRequests``: at most this many (protocol.md, the tool object)...
MAX_EXAMPLE_REQUESTS: Final = 16
#: ...each of 1 to this many characters, and not only whitespace.
MAX_EXAMPLE_REQUEST_CHARS: Final = 200


def example_requests_problem(requests: object) -> str | None:
    """What is wrong with a tool's ``exampleRequests`` (None: nothing), in words that say what
    to do; the broker refuses such a tool (``invalid_tool``) and the client libraries refuse to
    define it."""
    if not isinstance(requests, list) or not all(isinstance(r, str) for r in requests):
        return "exampleRequests must be a list of strings"
    if len(requests) > MAX_EXAMPLE_REQUESTS:
        return f"exampleRequests has {len(requests)} requests; keep the {MAX_EXAMPLE_REQUESTS} most typical"
    for request in requests:
        if not request.strip():
            return "exampleRequests has an empty request; leave it out"
        if len(request) > MAX_EXAMPLE_REQUEST_CHARS:
            return (f"exampleRequests has a request of {len(request)} characters; say it in at most "
                    f"{MAX_EXAMPLE_REQUEST_CHARS}, as a user would")
    return None


class ToolResult(msgspec.Struct, rename="camel", omit_defaults=True):
    """The ``result`` object of a ``toolResponse``.

    ``data`` is any JSON value; ``content`` is a list of MCP content blocks (``text``,
    ``image`` with base64 ``data`` and ``mimeType``, ...) passed to the agent as they are;
    ``structuredContent`` is a JSON object for tools with an ``outputSchema``.
    """

    success: bool = True
    data: Any = None
    error: str | None = None
    content: list[dict[str, Any]] | None = None
    structured_content: dict[str, Any] | None = None
    #: With ``success: false``: which kind of failure (``busy``, ``timeout``, ...; see
    #: protocol.md). A broker uplinked into another passes its outcome kind on this way.
    error_kind: str | None = None
    #: With ``errorKind: "busy"``: when a retry is likely to be admitted.
    retry_after_ms: int | None = None


class ResourceSpec(msgspec.Struct, rename="camel", omit_defaults=True):
    """One resource an app offers (protocol v2): its own ``uri``, under the app's namespace."""

    uri: Annotated[str, msgspec.Meta(min_length=1, max_length=2048)]
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: dict[str, Any] | None = None


class ResourceTemplateSpec(msgspec.Struct, rename="camel", omit_defaults=True):
    """A family of resources (protocol v2): an RFC 6570 level-1 template (``file:///{name}``)."""

    uri_template: Annotated[str, msgspec.Meta(min_length=1, max_length=2048)]
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    annotations: dict[str, Any] | None = None


#: At most this many resources, and as many templates, per app.
MAX_RESOURCES: Final = 1000


class PromptArgument(msgspec.Struct, rename="camel", omit_defaults=True):
    """One argument of a prompt (protocol v2): its values are strings."""

    name: Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
    title: str | None = None
    description: str | None = None
    required: bool = False


class PromptSpec(msgspec.Struct, rename="camel", omit_defaults=True):
    """A prompt an app offers (protocol v2): a ready-made workflow the agent's user can pick."""

    name: Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
    title: str | None = None
    description: str | None = None
    arguments: Annotated[list[PromptArgument], msgspec.Meta(max_length=64)] = []


# --- app -> broker -------------------------------------------------------------------------


class Register(_Base, tag="register"):
    app_name: str
    token: str = ""
    tools: list[ToolSpec] = []
    #: Stable identity of this app instance; re-registering with it replaces the old link.
    instance_id: str | None = None
    #: The highest version the app speaks; left out it means 1 (an app from before negotiation).
    protocol_version: int = 1
    #: How many invocations the app runs at once; more wait in the broker's queue.
    max_concurrency: int = 1
    app_version: str | None = None
    #: Set by brokers only (an uplink, protocol.md section 9): the registering broker's id,
    #: then the ids of the brokers below it whose tools it carries.
    via: list[str] | None = None
    #: Protocol v2: the resources and templates offered (ignored from a v1 app).
    resources: Annotated[list[ResourceSpec], msgspec.Meta(max_length=MAX_RESOURCES)] = []
    resource_templates: Annotated[list[ResourceTemplateSpec], msgspec.Meta(max_length=MAX_RESOURCES)] = []
    #: Protocol v2: the prompts offered (ignored from a v1 app).
    prompts: Annotated[list[PromptSpec], msgspec.Meta(max_length=MAX_RESOURCES)] = []
    #: Protocol v2 (section 12): the app answers ``complete`` requests for its prompts'
    #: arguments and its templates' variables; without it the broker answers them empty itself.
    completions: bool = False


class ToolResponse(_Base, tag="toolResponse"):
    correlation_id: int
    result: ToolResult


class ToolProgress(_Base, tag="toolProgress"):
    correlation_id: int
    progress: float
    total: float | None = None
    message: str | None = None


class AddTools(_Base, tag="addTools"):
    tools: list[ToolSpec]


class RemoveTools(_Base, tag="removeTools"):
    names: list[str]


class SetResources(_Base, tag="setResources"):
    """Protocol v2: the app's complete new set of resources and templates (replaces the old)."""

    resources: Annotated[list[ResourceSpec], msgspec.Meta(max_length=MAX_RESOURCES)] = []
    resource_templates: Annotated[list[ResourceTemplateSpec], msgspec.Meta(max_length=MAX_RESOURCES)] = []


class ResourceUpdated(_Base, tag="resourceUpdated"):
    """Protocol v2: the content of one of the app's resources (its own ``uri``) changed."""

    uri: str


class ResourceResponse(_Base, tag="resourceResponse"):
    """Protocol v2: the answer to a ``resourceRead``: ``contents`` or an ``error``.

    Each content is ``{"uri", "mimeType"?, "text"}`` or ``{"uri", "mimeType"?, "blob": base64}``.
    """

    correlation_id: int
    contents: list[dict[str, Any]] = []
    error: str | None = None


class SetPrompts(_Base, tag="setPrompts"):
    """Protocol v2: the app's complete new set of prompts (replaces the old)."""

    prompts: Annotated[list[PromptSpec], msgspec.Meta(max_length=MAX_RESOURCES)] = []


class PromptResponse(_Base, tag="promptResponse"):
    """Protocol v2: the answer to a ``promptGet``: MCP ``messages`` (and a ``description``), or an ``error``."""

    correlation_id: int
    messages: list[dict[str, Any]] = []
    description: str | None = None
    error: str | None = None


#: MCP's log levels (RFC 5424's severities), least severe first.
LOG_LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
#: The most bytes a log message's ``data`` may take (as JSON); the broker drops larger ones.
MAX_LOG_DATA_BYTES: Final = 64 * 1024


class LogMessage(_Base, tag="log"):
    """Protocol v2 (section 12): a log message for the agents that asked for its level.

    ``data`` is any JSON value, kept as the raw bytes it arrived as (the broker forwards it
    without looking inside). ``correlationId`` ties it to one of the app's invocations in
    flight: it then goes only to the agent request that made that call.
    """

    level: LogLevel
    data: msgspec.Raw
    logger: Annotated[str, msgspec.Meta(min_length=1, max_length=128)] | None = None
    correlation_id: int | None = None


class CompleteResponse(_Base, tag="completeResponse"):
    """Protocol v2 (section 12): the answer to a ``complete``: suggestions, or an ``error``.

    The broker passes on at most 100 ``values`` (then ``hasMore`` is true).
    """

    correlation_id: int
    values: list[str] = []
    total: int | None = None
    has_more: bool = False
    error: str | None = None
class Elicit(_Base, tag="elicit"):
    """Protocol v2 (section 13): inside the call ``correlationId``, ask the agent's user for input.

    ``mode`` ``form`` asks for ``requestedSchema`` (MCP's restricted flat JSON Schema);
    ``url`` sends the user to ``url`` (out of band). Answered by one ``elicitResult`` with the
    same ``correlationId`` and ``elicitId`` (the app's own number, unique within the call).
    """

    correlation_id: int
    elicit_id: int
    message: str
    mode: str = "form"
    requested_schema: dict[str, Any] | None = None
    url: str | None = None
    #: The app's own name for this question (1-64 of ``A-Z a-z 0-9 _ - .``): in MCP 2026-07-28
    #: the key of its entry in the input-required result's ``inputRequests``, under which the
    #: client answers (also up front, in the ``tools/call`` itself). None: the broker names it.
    input_key: str | None = None


class Goodbye(_Base, tag="goodbye"):
    """The app is quitting on purpose: the broker releases its names at once (no grace)."""


# --- broker -> app -------------------------------------------------------------------------


class Registered(_Base, tag="registered"):
    app_id: str
    instance_id: str
    #: The app's label in agent-facing names (``WatchTower`` or ``WatchTower_2``).
    app_label: str
    #: Registered tool name -> agent-facing MCP name.
    tool_names: dict[str, str]
    heartbeat_interval_ms: int
    #: The version both sides speak: min(the app's ``register.protocolVersion``, the broker's
    #: highest). ``None``: a broker from before negotiation, which speaks version 1.
    protocol_version: int | None = None
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    max_tools: int = 0
    max_schema_bytes: int = 0
    #: The broker's id, then the ids of the brokers it is uplinked into, nearest first
    #: (protocol.md section 9). Sent by brokers that have an id; apps may ignore it.
    chain: list[str] | None = None


class ToolInvocation(_Base, tag="toolInvocation"):
    correlation_id: int
    tool: str
    parameters: dict[str, Any] = {}
    #: Time the app has for this call, in milliseconds from when it reads this line.
    timeout_ms: int | None = None
    #: True when the agent asked for progress; ``toolProgress`` is welcome either way.
    progress: bool = False


class ResourceRead(_Base, tag="resourceRead"):
    """Protocol v2: read one resource (the app's own ``uri``); answered by ``resourceResponse``.

    Its ``correlationId`` comes from the same sequence as invocations'; ``toolCancel`` cancels it.
    """

    correlation_id: int
    uri: str
    timeout_ms: int | None = None


class PromptGet(_Base, tag="promptGet"):
    """Protocol v2: render one prompt with string ``arguments``; answered by ``promptResponse``.

    A call like ``resourceRead``: same id sequence, cancelled by ``toolCancel``.
    """

    correlation_id: int
    name: str
    arguments: dict[str, str] = {}
    timeout_ms: int | None = None


class Complete(_Base, tag="complete"):
    """Protocol v2 (section 12): suggest values for one argument of a prompt or one variable of a
    resource template (exactly one of ``prompt`` / ``uriTemplate``, the app's own name / template),
    given what the user typed so far (``value``) and the arguments already chosen (``arguments``).

    A call like ``resourceRead``: same id sequence, cancelled by ``toolCancel``, answered once by
    ``completeResponse``.
    """

    correlation_id: int
    argument: str
    value: str = ""
    prompt: str | None = None
    uri_template: str | None = None
    arguments: dict[str, str] = {}
    timeout_ms: int | None = None


class ToolCancel(_Base, tag="toolCancel"):
    correlation_id: int
    reason: str = ""


class ElicitResult(_Base, tag="elicitResult"):
    """Protocol v2 (section 13): the answer to an ``elicit``: the user's ``action`` and ``content``.

    ``action`` is ``accept`` (``content`` holds the form's values), ``decline`` or ``cancel``.
    When the broker could not ask (``errorCode``: ``elicitation_unsupported``,
    ``elicitation_timeout``, ``invalid_elicit``, ``elicitation_pending``, ``agent_error``),
    ``action`` is ``cancel`` and ``error`` says why, so an app that ignores the code sees a cancel.
    """

    correlation_id: int
    elicit_id: int
    action: str = "cancel"
    content: dict[str, Any] | None = None
    error_code: str | None = None
    error: str | None = None


class ToolsUpdated(_Base, tag="toolsUpdated"):
    tool_names: dict[str, str]


# --- either direction ----------------------------------------------------------------------


class Ping(_Base, tag="ping"):
    id: int | None = None


class Pong(_Base, tag="pong"):
    id: int | None = None


class Error(_Base, tag="error"):
    code: str
    message: str
    correlation_id: int | None = None
    #: When set, the sender closes the connection after this message.
    fatal: bool = False
    #: For ``busy``: when a retry is likely to be admitted.
    retry_after_ms: int | None = None


# --- toolbridge's own tools (the stdio relay and the CLI), not needed by apps --------------


class AgentConnect(_Base, tag="agentConnect"):
    """Turns the connection into an MCP JSON-RPC stream (one message per line)."""

    token: str = ""
    discovery: bool = False
    #: Code mode (``toolbridge stdio --code``): tools/list holds search_tools and run_code.
    code: bool = False
    #: A one-app scope: only the app with this label, its tools under their own names.
    app: str | None = None


class AgentConnected(_Base, tag="agentConnected"):
    pass


class AdminRequest(_Base, tag="admin"):
    token: str = ""
    command: str = ""
    args: dict[str, Any] = {}


class AdminResponse(_Base, tag="adminResult"):
    ok: bool
    result: Any = None
    error: str | None = None


Message = Union[
    Register,
    ToolResponse,
    ToolProgress,
    AddTools,
    RemoveTools,
    SetResources,
    ResourceUpdated,
    ResourceResponse,
    SetPrompts,
    PromptResponse,
    LogMessage,
    CompleteResponse,
    Elicit,
    Goodbye,
    Registered,
    ToolInvocation,
    ResourceRead,
    PromptGet,
    Complete,
    ToolCancel,
    ElicitResult,
    ToolsUpdated,
    Ping,
    Pong,
    Error,
    AgentConnect,
    AgentConnected,
    AdminRequest,
    AdminResponse,
]

_MESSAGE_TYPES: Final = frozenset(
    t.__struct_config__.tag for t in Message.__args__  # type: ignore[attr-defined]
)
_decoder: Final = msgspec.json.Decoder(Message)
_generic_decoder: Final = msgspec.json.Decoder()
_encoder: Final = msgspec.json.Encoder()
_CORRELATION_ID = re.compile(rb'"correlationId"\s*:\s*(\d{1,18})')
_TOO_DEEP: Final = "the line is not valid JSON (nested too deeply)"


def _find_correlation_id(line: bytes) -> int | None:
    match = _CORRELATION_ID.search(line, 0, 4096)
    return int(match.group(1)) if match else None


def decode_message(line: bytes) -> Message:
    """Decode one line (without its newline) into a message.

    Raises :class:`RemoteProtocolError` with code ``invalid_json`` (also for nesting too deep
    to decode), ``invalid_utf8``, ``not_an_object``, ``unknown_type`` or ``invalid_message``;
    its ``correlation_id`` is set when the line names one, so the call it belongs to can fail
    at once.
    """
    kind = None
    try:
        message: Message = _decoder.decode(line)
        return message
    except UnicodeDecodeError:
        code, detail = "invalid_utf8", "the line is not valid UTF-8"
    except msgspec.ValidationError as exc:  # a subclass of DecodeError: test it first
        code, detail, kind = _classify(line, str(exc))
    except msgspec.DecodeError as exc:
        code, detail = _not_json(line, f"the line is not valid JSON ({exc})")
    except RecursionError:  # msgspec refuses very deep nesting this way, not with DecodeError
        code, detail = "invalid_json", _TOO_DEEP
    raise RemoteProtocolError(code, detail, correlation_id=_find_correlation_id(line), message_type=kind)


def _not_json(line: bytes, detail: str) -> tuple[str, str]:
    """``invalid_utf8`` when the bytes are not UTF-8 (msgspec reports that as bad JSON)."""
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return "invalid_utf8", f"the line is not valid UTF-8 (byte {exc.start})"
    return "invalid_json", detail


def _classify(line: bytes, detail: str) -> tuple[str, str, str | None]:
    """Tell an unknown ``type`` apart from a known message (the third item) with bad fields."""
    try:
        value = _generic_decoder.decode(line)
    except (msgspec.DecodeError, UnicodeDecodeError):  # pragma: no cover - decoded once already
        return (*_not_json(line, "the line is not valid JSON"), None)
    except RecursionError:
        return "invalid_json", _TOO_DEEP, None
    if not isinstance(value, dict):
        return "not_an_object", f"each line must be a JSON object, got {type(value).__name__}", None
    kind = value.get("type")
    if not isinstance(kind, str):
        return "invalid_message", 'the object has no string "type" field', None
    if kind not in _MESSAGE_TYPES:
        return "unknown_type", f"unknown message type {kind!r}", None
    return "invalid_message", f"invalid {kind!r} message: {detail}", kind


def encode_message(message: Message) -> bytes:
    """Encode a message as one line, newline included."""
    try:
        data = _encoder.encode(message)
    except (TypeError, msgspec.EncodeError) as exc:
        raise LocalProtocolError("invalid_message", f"cannot encode {message!r}: {exc}") from exc
    return data + b"\n"

#: What an app may send (after ``register``, which comes first and once).
APP_TO_BROKER: Final[tuple[type[Message], ...]] = (
    Register, ToolResponse, ToolProgress, AddTools, RemoveTools, Goodbye, Ping, Pong, Error,
    SetResources, ResourceUpdated, ResourceResponse, SetPrompts, PromptResponse, LogMessage, CompleteResponse,
    Elicit,
)
#: Messages of protocol v2 (resources): never sent to, nor accepted from, a v1 peer.
V2_MESSAGES: Final[tuple[type[Message], ...]] = (
    SetResources, ResourceUpdated, ResourceResponse, ResourceRead, SetPrompts, PromptResponse, PromptGet,
    LogMessage, Complete, CompleteResponse, Elicit, ElicitResult,
)
#: What the broker may send to an app.
BROKER_TO_APP: Final[tuple[type[Message], ...]] = (
    Registered, ToolInvocation, ToolCancel, ToolsUpdated, Ping, Pong, Error, ResourceRead, PromptGet, Complete,
    ElicitResult,
)


def message_tag(message: Message) -> str:
    """The ``type`` of ``message`` on the wire (``toolResponse``)."""
    tag: str = message.__struct_config__.tag  # type: ignore[assignment]
    return tag
