"""Wire protocol v1's messages and framing: a re-export of :mod:`app_client.protocol`.

Kept so apps and tests that import ``app_client.wire`` keep working; new code imports
:mod:`app_client.protocol`, which also holds the protocol's rules (a state machine per side).
"""

from __future__ import annotations

from .protocol import (
    DEFAULT_MAX_LINE_BYTES,
    PROTOCOL_VERSION,
    AddTools,
    AdminRequest,
    AdminResponse,
    AgentConnect,
    AgentConnected,
    Error,
    LineFramer,
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
)

__all__ = [
    "PROTOCOL_VERSION",
    "DEFAULT_MAX_LINE_BYTES",
    "ToolSpec",
    "ToolResult",
    "Register",
    "Registered",
    "ToolInvocation",
    "ToolResponse",
    "ToolProgress",
    "ToolCancel",
    "AddTools",
    "RemoveTools",
    "Goodbye",
    "ToolsUpdated",
    "Ping",
    "Pong",
    "Error",
    "AgentConnect",
    "AgentConnected",
    "AdminRequest",
    "AdminResponse",
    "Message",
    "LineFramer",
    "decode_message",
    "encode_message",
]
