"""Wire protocol v1 between desktop apps and the broker, sans-IO: the reference implementation.

Theory of operation
-------------------
Like h11, this package never touches a socket and never imports trio (only msgspec and the
standard library): bytes or lines go in, typed messages and events come out, and bytes to
send come back from ``send``. Its parts:

* ``_messages``: every message of both directions (app ↔ broker, plus toolbridge's own
  ``agentConnect`` / ``admin``) as msgspec Structs in one tagged union;
  :func:`decode_message` / :func:`encode_message`.
* ``_framing``: :class:`LineFramer` (bytes into bounded lines) and
  :func:`decode_tools_in_steps` (a big ``register`` / ``addTools`` line decoded a tool at a
  time, as a generator that yields between steps).
* ``_errors``: the root :class:`ToolbridgeError` > :class:`ProtocolError` >
  :class:`LocalProtocolError` (we broke it) / :class:`RemoteProtocolError` (the peer did),
  and :class:`ConnectionClosed`. :mod:`app_client.errors` re-exports the same classes.
* ``_state``: the rules, one machine per side: :class:`BrokerConnection`,
  :class:`AppConnection`, :class:`AgentLinkClient` (read its docstring).

The daemon (``broker``), ``app_client``'s session, its fake broker (``app_client.testing``) and
the CLI all use this package; protocol.md documents the same contract for other languages.
Moving bytes is :mod:`app_client.channel`'s job (trio).
"""

from ._errors import ConnectionClosed, LocalProtocolError, ProtocolError, RemoteProtocolError, ToolbridgeError
from ._framing import LARGE_LINE, STEP_BYTES, TAKE_LINE, LineFramer, decode_message_in_steps, decode_tools_in_steps
from ._messages import (
    PromptArgument,
    PromptGet,
    PromptResponse,
    PromptSpec,
    SetPrompts,
    MAX_RESOURCES,
    RESOURCES_VERSION,
    ResourceRead,
    ResourceResponse,
    ResourceSpec,
    ResourceTemplateSpec,
    ResourceUpdated,
    SetResources,
    V2_MESSAGES,
    APP_TO_BROKER,
    BROKER_TO_APP,
    DEFAULT_MAX_LINE_BYTES,
    PROTOCOL_VERSION,
    AddTools,
    AdminRequest,
    AdminResponse,
    AgentConnect,
    AgentConnected,
    Error,
    Message,
    Ping,
    Pong,
    Register,
    Registered,
    RemoveTools,
    Goodbye,
    ToolCancel,
    ToolInvocation,
    ToolProgress,
    ToolResponse,
    ToolResult,
    ToolSpec,
    ToolsUpdated,
    decode_message,
    encode_message,
    message_tag,
)
from ._state import (
    FATAL_REGISTRATION_CODES,
    INSTANCE_REPLACED,
    NEED_DATA,
    AgentLinkClient,
    AppEvent,
    AppConnection,
    BadLine,
    BrokerConnection,
    BrokerEvent,
    Ignored,
    NeedData,
    Phase,
    Rejected,
    Replaced,
    Unexpected,
    UpdateAnswered,
)

__all__ = [
    "PromptArgument",
    "PromptGet",
    "PromptResponse",
    "PromptSpec",
    "SetPrompts",
    "MAX_RESOURCES",
    "RESOURCES_VERSION",
    "ResourceRead",
    "ResourceResponse",
    "ResourceSpec",
    "ResourceTemplateSpec",
    "ResourceUpdated",
    "SetResources",
    "V2_MESSAGES",
    "APP_TO_BROKER",
    "BROKER_TO_APP",
    "DEFAULT_MAX_LINE_BYTES",
    "FATAL_REGISTRATION_CODES",
    "INSTANCE_REPLACED",
    "LARGE_LINE",
    "NEED_DATA",
    "PROTOCOL_VERSION",
    "STEP_BYTES",
    "AddTools",
    "AdminRequest",
    "AdminResponse",
    "AgentConnect",
    "AgentConnected",
    "AgentLinkClient",
    "AppConnection",
    "AppEvent",
    "BadLine",
    "BrokerConnection",
    "BrokerEvent",
    "ConnectionClosed",
    "Error",
    "Ignored",
    "LineFramer",
    "TAKE_LINE",
    "LocalProtocolError",
    "Message",
    "NeedData",
    "Phase",
    "Ping",
    "Pong",
    "ProtocolError",
    "Register",
    "Registered",
    "Rejected",
    "RemoteProtocolError",
    "RemoveTools",
    "Goodbye",
    "Replaced",
    "ToolCancel",
    "ToolInvocation",
    "ToolProgress",
    "ToolResponse",
    "ToolResult",
    "ToolSpec",
    "ToolbridgeError",
    "ToolsUpdated",
    "Unexpected",
    "UpdateAnswered",
    "decode_message",
    "decode_message_in_steps",
    "decode_tools_in_steps",
    "encode_message",
    "message_tag",
]
