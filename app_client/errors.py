"""The exception tree of the app side of toolbridge.

Every error this package raises derives from :class:`ToolbridgeError`, so an app can catch
them all at once. Protocol errors say who broke the protocol: :class:`LocalProtocolError`
means we were about to send something invalid, :class:`RemoteProtocolError` means the peer
sent something invalid. Both carry a short machine-readable ``code`` (the same codes that
travel in ``error`` messages, see protocol.md).
"""

from __future__ import annotations


class ToolbridgeError(Exception):
    """Root of every error raised by ``app_client``."""


class ProtocolError(ToolbridgeError):
    """A message broke wire protocol v1.

    ``code`` is one of the error codes listed in protocol.md (``invalid_json``,
    ``line_too_long``, ``unknown_type``, ...). ``correlation_id`` is set when the offending
    message could be tied to a call, so that call can fail at once instead of timing out.
    """

    def __init__(self, code: str, message: str, *, correlation_id: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.correlation_id = correlation_id


class LocalProtocolError(ProtocolError):
    """We were about to send something the protocol does not allow."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol does not allow."""


class ConnectionClosed(ToolbridgeError):
    """The connection to the broker closed (or was never open)."""


class RegistrationRejected(ToolbridgeError):
    """The broker refused our ``register`` message (wrong token, bad tool, ...).

    Retrying with the same registration will fail the same way; ``code`` says why.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class DaemonNotFound(ToolbridgeError):
    """No running daemon could be found (no runtime file, or its port refused us)."""


class InstanceReplaced(ToolbridgeError):
    """Another connection registered with this app's ``instance_id`` and the broker dropped us.

    Raised out of :meth:`app_client.App.run`: reconnecting would only evict the other
    process in turn. Give each process its own ``instance_id`` (the default does).
    """


class ToolDefinitionError(ToolbridgeError, TypeError):
    """A function cannot be turned into a tool (bad name, unsupported parameter, ...).

    Raised when the tool is declared (``@app.tool``, :meth:`app_client.App.add_tool`), so
    mistakes surface at start-up rather than when an agent first calls the tool.
    """


class InvalidArguments(ToolbridgeError, ValueError):
    """The ``parameters`` of an invocation do not match the tool's input schema.

    Raised by :meth:`app_client.tools.ToolDefinition.bind` (and re-exported from
    :mod:`app_client.tools`, where it was defined before); the app answers the call with an
    error naming the bad field. Still a ``ValueError``, as it always was.
    """


class ToolUpdateRejected(ToolbridgeError):
    """The broker refused an ``addTools`` or ``removeTools`` request; ``code`` says why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ToolError(ToolbridgeError):
    """Raise this from a tool handler to fail the call with ``message`` shown to the agent.

    Any other exception fails the call with a generic message (``"ClickElement failed:
    ValueError"``) and its traceback goes to the app's log only; a ``ToolError``'s message is
    sent as it is, so keep secrets out of it.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
