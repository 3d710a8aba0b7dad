"""The exception tree of the app side of toolbridge.

Every error this package raises derives from :class:`ToolbridgeError`, so an app can catch
them all at once. Protocol errors say who broke the protocol: :class:`LocalProtocolError`
means we were about to send something invalid, :class:`RemoteProtocolError` means the peer
sent something invalid (those five live in :mod:`app_client.protocol`, the same class
objects re-exported here). Both carry a short machine-readable ``code`` (the same codes that
travel in ``error`` messages, see protocol.md).
"""

from __future__ import annotations

# The protocol's errors are defined with the protocol (the same class objects, re-exported).
from .protocol._errors import (
    ConnectionClosed as ConnectionClosed,
    LocalProtocolError as LocalProtocolError,
    ProtocolError as ProtocolError,
    RemoteProtocolError as RemoteProtocolError,
    ToolbridgeError as ToolbridgeError,
)


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


class ElicitationError(ToolbridgeError):
    """:meth:`app_client.ToolContext.elicit` could not ask the user; ``code`` says why.

    ``elicitation_unsupported`` (the agent's client cannot ask, or the call did not come from an
    MCP agent, or the broker speaks protocol 1), ``elicitation_timeout`` (nobody answered in
    time), ``invalid_elicit`` (the schema is not MCP's flat form subset; the message says what
    is wrong), ``elicitation_pending`` (one question at a time per call), ``agent_error``,
    ``call_not_running`` (the call was cancelled or already answered). The call itself goes on:
    carry on without the answer, or fail it with a :class:`ToolError`.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message
