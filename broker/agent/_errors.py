"""The agent library's exceptions: one per way a tool call can fail.

Theory of operation
-------------------
The daemon reports a failed call as a ``CallToolResult`` with ``isError: true`` and the
failure's kind in ``_meta["toolbridge/errorKind"]`` (``broker.mcp.results``); an unknown
tool is a JSON-RPC error -32602. :func:`error_from_result` and :func:`error_from_rpc` turn
both into the exception class of that kind (:data:`ERROR_TYPES`), so agent code catches
``ToolTimeout`` or ``ToolBusy``, or :class:`ToolCallError` for all of them. Nothing here
imports the MCP SDK.

The root is :class:`AgentError`, distinct from ``app_client.ToolbridgeError`` (the app
library's root) and ``broker.errors.BrokerError`` (the daemon's). ``ToolbridgeError`` and
``ToolError`` are the old names of :class:`AgentError` and :class:`ToolCallError`, kept as
aliases because agent code imports them (they clashed with two different classes of
``app_client``).
"""

from __future__ import annotations

from typing import Any, Final

from ..core.outcome import OutcomeKind

__all__ = [
    "AgentError",
    "ConnectError",
    "ToolCallError",
    "ToolbridgeError",
    "ToolError",
    "ToolNotFound",
    "ToolInvalidArguments",
    "ToolGuardRejected",
    "ToolBusy",
    "ToolTimeout",
    "ToolCancelled",
    "AppDisconnected",
    "ToolAppError",
    "ConnectionLost",
    "ERROR_TYPES",
    "ERROR_KIND_KEY",
    "RETRY_AFTER_KEY",
    "error_from_result",
    "error_from_rpc",
]

#: The ``_meta`` keys of an ``isError`` result (the same as ``broker.mcp.results``).
ERROR_KIND_KEY: Final = "toolbridge/errorKind"
RETRY_AFTER_KEY: Final = "toolbridge/retryAfterMs"
#: JSON-RPC codes: unknown tool (and other invalid params), and a lost connection.
_INVALID_PARAMS: Final = -32602
_CONNECTION_CLOSED: Final = -32000
_REQUEST_TIMEOUT: Final = -32001


class AgentError(Exception):
    """The root of every error the agent library raises."""


class ConnectError(AgentError):
    """The daemon could not be reached: not running (and not startable), wrong token or URL."""


class ToolCallError(AgentError):
    """A tool call failed. Its subclass says how; the attributes say more.

    ``kind`` is the daemon's error kind (``timeout``, ``busy``, ``app_error``, ...; see
    :data:`ERROR_TYPES`), ``message`` the daemon's explanation (written for a model to act
    on), ``tool`` the agent-facing name called, ``retry_after_ms`` a hint for ``busy``,
    ``code`` the JSON-RPC error code when the failure was a protocol error, and ``result``
    the raw ``CallToolResult`` when there was one (its content may hold more, such as an
    app's error screenshot).
    """

    kind: str = "error"

    def __init__(
        self,
        message: str,
        *,
        kind: str | None = None,
        tool: str | None = None,
        retry_after_ms: int | None = None,
        code: int | None = None,
        result: Any = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if kind is not None:
            self.kind = kind
        self.tool = tool
        self.retry_after_ms = retry_after_ms
        self.code = code
        self.result = result

    def __repr__(self) -> str:
        return f"{type(self).__name__}(kind={self.kind!r}, tool={self.tool!r}, message={self.message!r})"


class ToolNotFound(ToolCallError):
    """No connected app offers a tool of that name (JSON-RPC -32602, or ``unknown_tool``)."""

    kind = OutcomeKind.UNKNOWN_TOOL.value


class ToolInvalidArguments(ToolCallError):
    """The arguments do not match the tool's inputSchema; the message names the problem."""

    kind = OutcomeKind.INVALID_ARGUMENTS.value


class ToolGuardRejected(ToolCallError):
    """An argument guard refused the call (for example a ``..`` path segment)."""

    kind = OutcomeKind.GUARD_REJECTED.value


class ToolBusy(ToolCallError):
    """The app (or the daemon) has too many calls waiting; retry after ``retry_after_ms``."""

    kind = OutcomeKind.BUSY.value


class ToolTimeout(ToolCallError):
    """The call did not finish in time; the app was asked to stop."""

    kind = OutcomeKind.TIMEOUT.value


class ToolCancelled(ToolCallError):
    """The call was cancelled (by the app or the daemon, not by this caller: a caller that
    cancels its own scope gets ``Cancelled``, as usual)."""

    kind = OutcomeKind.CANCELLED.value


class AppDisconnected(ToolCallError):
    """The app went away before answering and did not come back in time."""

    kind = OutcomeKind.APP_DISCONNECTED.value


class ToolAppError(ToolCallError):
    """The app ran the tool and reported a failure; ``message`` is the app's."""

    kind = OutcomeKind.APP_ERROR.value


class ConnectionLost(ToolCallError):
    """The connection to the daemon was lost before the answer came; the call may have run."""

    kind = "connection_lost"


#: Error kind -> exception class: the daemon's kinds (:class:`~broker.core.outcome.OutcomeKind`,
#: as strings) and this library's own ``connection_lost``. Kinds not listed (``internal_error``,
#: ``shutdown``, kinds added later) raise :class:`ToolCallError` itself, with ``kind`` set.
ERROR_TYPES: Final[dict[str, type[ToolCallError]]] = {
    cls.kind: cls
    for cls in (
        ToolNotFound, ToolInvalidArguments, ToolGuardRejected, ToolBusy, ToolTimeout,
        ToolCancelled, AppDisconnected, ToolAppError, ConnectionLost,
    )
}


#: The old names, kept for agent code that imports them: ``ToolbridgeError`` is :class:`AgentError`,
#: ``ToolError`` is :class:`ToolCallError` (the same classes, so either name catches the same).
ToolbridgeError = AgentError
ToolError = ToolCallError


def error_from_result(tool: str, meta: dict[str, Any] | None, text: str, result: Any = None) -> ToolCallError:
    """The exception for an ``isError`` result with ``_meta`` ``meta`` and text ``text``."""
    meta = meta or {}
    kind = meta.get(ERROR_KIND_KEY)
    if not isinstance(kind, str) or not kind:
        kind = "error"
    retry = meta.get(RETRY_AFTER_KEY)
    retry_after_ms = retry if isinstance(retry, int) and not isinstance(retry, bool) else None
    cls = ERROR_TYPES.get(kind, ToolCallError)
    message = text or f"{tool} failed ({kind})"
    return cls(message, kind=kind, tool=tool, retry_after_ms=retry_after_ms, result=result)


def error_from_rpc(tool: str, code: int, message: str) -> ToolCallError:
    """The exception for a JSON-RPC error answering a call of ``tool``."""
    if code == _INVALID_PARAMS:
        return ToolNotFound(message, tool=tool, code=code)
    if code == _CONNECTION_CLOSED:
        return ConnectionLost(message, tool=tool, code=code)
    if code == _REQUEST_TIMEOUT:
        return ToolTimeout(message, tool=tool, code=code)
    return ToolCallError(message, kind="protocol_error", tool=tool, code=code)
