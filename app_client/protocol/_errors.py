"""The protocol's exception tree (h11 ``_util.py``): one root, and who broke the protocol.

Every error of ``app_client`` derives from :class:`ToolbridgeError`, so an app catches them all
at once; :mod:`app_client.errors` re-exports these very classes (the same objects) and adds the
app library's own. :class:`LocalProtocolError` means we were about to send something the
protocol does not allow; :class:`RemoteProtocolError` means the peer sent it. Both carry a
short machine-readable ``code``: the codes that travel in ``error`` messages (protocol.md).
"""

from __future__ import annotations

__all__ = ["ConnectionClosed", "LocalProtocolError", "ProtocolError", "RemoteProtocolError", "ToolbridgeError"]


class ToolbridgeError(Exception):
    """Root of every error raised by ``app_client``."""


class ProtocolError(ToolbridgeError):
    """A message broke wire protocol v1.

    ``code`` is one of the error codes listed in protocol.md (``invalid_json``,
    ``line_too_long``, ``unknown_type``, ...). ``correlation_id`` is set when the offending
    message could be tied to a call, so that call can fail at once instead of timing out.
    ``message_type`` is the ``type`` of a known message with bad fields (``invalid_message``),
    so a receiver can tell a broken ``toolProgress`` (the call goes on) from a broken answer.
    """

    def __init__(
        self, code: str, message: str, *, correlation_id: int | None = None, message_type: str | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.correlation_id = correlation_id
        self.message_type = message_type


class LocalProtocolError(ProtocolError):
    """We were about to send something the protocol does not allow."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol does not allow."""


class ConnectionClosed(ToolbridgeError):
    """The connection to the peer closed (or was never open)."""
