"""One NDJSON connection to the broker over a trio stream: framed receive, checked send.

Theory of operation
-------------------
:class:`MessageStream` glues the sans-IO :mod:`app_client.wire` module to a
:class:`trio.abc.Stream` (a TCP socket in production, a memory stream in tests). It does no
concurrency control of its own: the session (:mod:`app_client.session`) guarantees that only
one task ever writes — the handshake task before the session starts, then the session's
single writer task — so there is never more than one ``send_all`` on the stream.

Errors are translated here, once: trio's ``BrokenResourceError`` / ``ClosedResourceError``
and end-of-file become :class:`~app_client.errors.ConnectionClosed`; a bad line from the
broker surfaces as :class:`~app_client.errors.RemoteProtocolError` from :meth:`receive`
(the connection stays usable); a message that would exceed the broker's line limit raises
:class:`~app_client.errors.LocalProtocolError` from :meth:`encode` before anything is sent.
"""

from __future__ import annotations

from typing import Final

import trio

from .errors import ConnectionClosed, LocalProtocolError
from .wire import DEFAULT_MAX_LINE_BYTES, LineFramer, Message, decode_message, encode_message

__all__ = ["MessageStream"]

_RECEIVE_SIZE: Final = 64 * 1024


class MessageStream:
    """Messages in and out of one byte stream.

    ``max_line_bytes`` bounds lines we accept; ``peer_max_line_bytes`` (updated from the
    broker's ``registered``) bounds lines we send.
    """

    def __init__(self, stream: trio.abc.Stream, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self.stream = stream
        self._framer = LineFramer(max_line_bytes)
        self.peer_max_line_bytes = DEFAULT_MAX_LINE_BYTES

    def encode(self, message: Message) -> bytes:
        """One line for ``message``; raises LocalProtocolError (``line_too_long``) if too big."""
        data = encode_message(message)
        if len(data) - 1 > self.peer_max_line_bytes:
            raise LocalProtocolError(
                "line_too_long",
                f"the message is {len(data) - 1} bytes, over the broker's limit of "
                f"{self.peer_max_line_bytes} bytes",
            )
        return data

    async def send_bytes(self, data: bytes) -> None:
        """Write one encoded line. Raises ConnectionClosed if the stream is broken."""
        try:
            await self.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise ConnectionClosed(f"the connection to the broker broke while sending: {_why(exc)}") from exc

    async def send(self, message: Message) -> None:
        """Encode and write ``message`` (see :meth:`encode` and :meth:`send_bytes`)."""
        await self.send_bytes(self.encode(message))

    def receive_nowait(self) -> Message | None:
        """The next message if a whole line is already buffered, else None (see :meth:`receive`)."""
        line = self._framer.next_line()
        return decode_message(line) if line is not None else None

    async def receive(self) -> Message:
        """The next message from the broker.

        Raises ConnectionClosed at end of stream or if the stream broke, and
        RemoteProtocolError for a line that is not a valid message (read on afterwards).
        """
        while True:
            line = self._framer.next_line()
            if line is not None:
                return decode_message(line)
            try:
                data = await self.stream.receive_some(_RECEIVE_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise ConnectionClosed(f"the connection to the broker broke: {_why(exc)}") from exc
            if not data:
                raise ConnectionClosed("the broker closed the connection")
            self._framer.receive_data(bytes(data))

    async def aclose(self) -> None:
        """Close the underlying stream (safe to call more than once, even when cancelled)."""
        await trio.aclose_forcefully(self.stream)


def _why(exc: BaseException) -> str:
    """The useful part of a trio stream error: a TLS failure is in its cause."""
    cause = exc.__cause__
    return f"{exc} ({cause})" if cause is not None and str(cause) else str(exc)
