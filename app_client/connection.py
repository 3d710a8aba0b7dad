"""One NDJSON connection to the broker over a trio stream: framed receive, checked send.

Theory of operation
-------------------
:class:`MessageStream` glues the sans-IO protocol machine
(:class:`app_client.protocol.AppConnection`, ``protocol``: the rules of the app's side) to a
:class:`~app_client.channel.LineChannel` over a :class:`trio.abc.Stream` (a TCP socket in
production, a memory stream in tests): lines read go to the machine, which turns them into
events; every line sent is made by the machine, which refuses what the app may not send. Only one task ever writes: the handshake task before the
session starts (:meth:`MessageStream.send`, straight to the stream), then the channel's single
writer task (``channel.run_writer``, fed by ``channel``'s queue), so there is never more than
one ``send_all`` on the stream.

Errors are translated here, once: trio's ``BrokenResourceError`` / ``ClosedResourceError``
and end-of-file become :class:`~app_client.errors.ConnectionClosed`; a bad line from the
broker is a :class:`~app_client.protocol.BadLine` event once registered (the connection stays
usable) and raises :class:`~app_client.errors.RemoteProtocolError` before; a message that
would exceed the broker's line limit (``registered.maxLineBytes``) or break the protocol raises
:class:`~app_client.errors.LocalProtocolError` from :meth:`encode` before anything is sent.
"""

from __future__ import annotations

from typing import Final

import trio

from .channel import LineChannel
from .protocol import (
    DEFAULT_MAX_LINE_BYTES,
    AppConnection,
    AppEvent,
    ConnectionClosed,
    Message,
    Phase,
    RemoteProtocolError,
)

__all__ = ["MessageStream"]

#: Lines waiting for the writer; senders wait (or progress updates are dropped) when full.
OUTBOX_SIZE: Final = 64


class _BrokerChannel(LineChannel):
    def _write_failed(self, exc: Exception) -> None:
        self.abort(f"the connection to the broker broke while sending: {_why(exc)}")


class MessageStream:
    """Messages in and out of one byte stream, judged by :attr:`protocol`.

    ``max_line_bytes`` bounds lines we accept; :attr:`peer_max_line_bytes` (the machine's,
    from the broker's ``registered``) bounds lines we send.
    """

    def __init__(self, stream: trio.abc.Stream, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self.stream = stream
        #: Lines in, and the session's queue and writer out.
        self.channel = _BrokerChannel(stream, max_line_bytes=max_line_bytes, outbound_queue=OUTBOX_SIZE)
        #: The app side's protocol rules (sans-IO).
        self.protocol = AppConnection(max_line_bytes)

    @property
    def peer_max_line_bytes(self) -> int:
        return self.protocol.peer_max_line_bytes

    @peer_max_line_bytes.setter
    def peer_max_line_bytes(self, value: int) -> None:
        self.protocol.peer_max_line_bytes = value

    def encode(self, message: Message) -> bytes:
        """One line for ``message`` (made by the machine).

        Raises LocalProtocolError (``line_too_long`` over the broker's limit, or a message the
        app may not send now), ConnectionClosed once the link was dropped (``replaced``).
        """
        if self.protocol.phase is Phase.CLOSED:
            raise ConnectionClosed("the connection is closed")
        return self.protocol.send(message)

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

    def next_event_nowait(self) -> AppEvent | None:
        """The next event if a whole line is already buffered, else None (see :meth:`next_event`)."""
        try:
            line = self.channel.receive_line_nowait()
        except RemoteProtocolError as exc:
            return self.protocol.refuse_line(exc)
        return self.protocol.receive_line(line) if line is not None else None

    async def next_event(self) -> AppEvent:
        """The next event from the broker (a message, or what the machine made of it).

        Raises ConnectionClosed at end of stream or if the stream broke, and
        RemoteProtocolError for a bad line before registration.
        """
        try:
            line = await self.channel.receive_line()
        except ConnectionClosed as exc:
            if exc.__cause__ is None:
                raise ConnectionClosed("the broker closed the connection") from None
            raise ConnectionClosed(f"the connection to the broker broke: {_why(exc.__cause__)}") from exc.__cause__
        except RemoteProtocolError as exc:
            return self.protocol.refuse_line(exc)
        return self.protocol.receive_line(line)

    async def aclose(self) -> None:
        """Close the underlying stream (safe to call more than once, even when cancelled)."""
        await trio.aclose_forcefully(self.stream)


def _why(exc: BaseException) -> str:
    """The useful part of a trio stream error: a TLS failure is in its cause."""
    cause = exc.__cause__
    return f"{exc} ({cause})" if cause is not None and str(cause) else str(exc)
