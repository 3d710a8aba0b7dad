"""One NDJSON connection to the broker over a trio stream: framed receive, checked send.

Theory of operation
-------------------
:class:`MessageStream` glues the sans-IO :mod:`app_client.wire` module to a
:class:`~app_client.channel.LineChannel` over a :class:`trio.abc.Stream` (a TCP socket in
production, a memory stream in tests). Only one task ever writes: the handshake task before the
session starts (:meth:`MessageStream.send`, straight to the stream), then the channel's single
writer task (``channel.run_writer``, fed by ``channel``'s queue), so there is never more than
one ``send_all`` on the stream.

Errors are translated here, once: trio's ``BrokenResourceError`` / ``ClosedResourceError``
and end-of-file become :class:`~app_client.errors.ConnectionClosed`; a bad line from the
broker surfaces as :class:`~app_client.errors.RemoteProtocolError` from :meth:`receive`
(the connection stays usable); a message that would exceed the broker's line limit raises
:class:`~app_client.errors.LocalProtocolError` from :meth:`encode` before anything is sent.
"""

from __future__ import annotations

from typing import Final

import trio

from .channel import LineChannel
from .errors import ConnectionClosed, LocalProtocolError
from .wire import DEFAULT_MAX_LINE_BYTES, Message, decode_message, encode_message

__all__ = ["MessageStream"]

#: Lines waiting for the writer; senders wait (or progress updates are dropped) when full.
OUTBOX_SIZE: Final = 64


class _BrokerChannel(LineChannel):
    def _write_failed(self, exc: trio.BrokenResourceError | trio.ClosedResourceError) -> None:
        self.abort(f"the connection to the broker broke while sending: {_why(exc)}")


class MessageStream:
    """Messages in and out of one byte stream.

    ``max_line_bytes`` bounds lines we accept; ``peer_max_line_bytes`` (updated from the
    broker's ``registered``) bounds lines we send.
    """

    def __init__(self, stream: trio.abc.Stream, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self.stream = stream
        #: Lines in, and the session's queue and writer out.
        self.channel = _BrokerChannel(stream, max_line_bytes=max_line_bytes, outbound_queue=OUTBOX_SIZE)
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
        """Write one encoded line now (not while the channel's writer runs).

        Raises ConnectionClosed if the stream is broken.
        """
        try:
            await self.channel.send_direct(data)
        except ConnectionClosed as exc:
            raise ConnectionClosed(
                f"the connection to the broker broke while sending: {_why(exc.__cause__ or exc)}"
            ) from exc.__cause__

    async def send(self, message: Message) -> None:
        """Encode and write ``message`` (see :meth:`encode` and :meth:`send_bytes`)."""
        await self.send_bytes(self.encode(message))

    def receive_nowait(self) -> Message | None:
        """The next message if a whole line is already buffered, else None (see :meth:`receive`)."""
        line = self.channel.receive_line_nowait()
        return decode_message(line) if line is not None else None

    async def receive(self) -> Message:
        """The next message from the broker.

        Raises ConnectionClosed at end of stream or if the stream broke, and
        RemoteProtocolError for a line that is not a valid message (read on afterwards).
        """
        try:
            line = await self.channel.receive_line()
        except ConnectionClosed as exc:
            if exc.__cause__ is None:
                raise ConnectionClosed("the broker closed the connection") from None
            raise ConnectionClosed(f"the connection to the broker broke: {_why(exc.__cause__)}") from exc.__cause__
        return decode_message(line)

    async def aclose(self) -> None:
        """Close the underlying stream (safe to call more than once, even when cancelled)."""
        await trio.aclose_forcefully(self.stream)


def _why(exc: BaseException) -> str:
    """The useful part of a trio stream error: a TLS failure is in its cause."""
    cause = exc.__cause__
    return f"{exc} ({cause})" if cause is not None and str(cause) else str(exc)
