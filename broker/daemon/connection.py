"""One accepted connection of the daemon: a :class:`~app_client.channel.LineChannel` plus wire messages.

Theory of operation
-------------------
The line framing, the one bounded batching writer (:meth:`Connection.writer_loop`), the reliable
side queue and the write timeout are :class:`app_client.channel.LineChannel`'s (read its module
docstring). A full queue makes senders wait (back-pressure reaches the caller);
:meth:`~Connection.send_nowait` drops; :meth:`~Connection.send_reliable_nowait` is for the
messages of calls in flight (invocations and cancellations to an app, responses to an agent),
whose side queue is bounded by the daemon's limit on calls in flight. If the peer stopped reading
and a write cannot finish within ``write_timeout``, the connection is cancelled as a whole, so a
peer that does not read holds at most those bounds of our memory for that long.

The protocol's rules are the sans-IO :class:`app_client.protocol.BrokerConnection`'s
(``protocol``): what the first message may be, what an app may send once registered, what the
broker may send in each phase, which correlation ids belong to this connection.
:meth:`~Connection.next_event` reads a line and hands it to the machine; every send asks it for
the bytes. This class adds what the daemon needs on top: a connection number for the logs.
Decoding a line builds its Python objects on the loop; for a ``register`` or
``addTools`` of megabytes of schemas that alone took ~80 ms (a 10 MB line), so such a line is
decoded in steps (:func:`app_client.protocol.decode_message_in_steps`) with a checkpoint
between steps, so other tasks run between. A large ``toolResponse`` (a 5 MiB image) is read
without a second copy (the framer assembles it in a memory map it hands over) and decoded with its content left raw
(:mod:`broker.core.passthrough`), so the line is the only copy of the payload.
"""

from __future__ import annotations

import itertools
from typing import cast

import trio

from app_client.channel import LineChannel
from app_client.protocol import (
    LARGE_LINE,
    BadLine,
    BrokerConnection,
    ConnectionClosed,
    LocalProtocolError,
    Message,
    Phase,
    RemoteProtocolError,
    decode_message,
    decode_message_in_steps,
)

from ..core.outcome import seconds_to_ms  # re-exported: where the daemon's modules found it
from ..core.passthrough import PASSTHROUGH_LINE, decode_tool_response

_conn_ids = itertools.count(1)


#: The peer closed the connection (or it broke): the channel's error, under its old name.
PeerClosed = ConnectionClosed


class Connection(LineChannel):
    def __init__(
        self,
        stream: trio.abc.Stream,
        *,
        max_line_bytes: int,
        outbound_queue: int,
        write_timeout: float,
        max_overflow: int = 4096,
    ) -> None:
        super().__init__(stream, max_line_bytes=max_line_bytes, outbound_queue=outbound_queue,
                         max_overflow=max_overflow, write_timeout=write_timeout)
        self.id = next(_conn_ids)
        #: The protocol's rules for this connection (sans-IO).
        # The daemon's call records know which link each call was sent on: no second table.
        self.protocol = BrokerConnection(max_line_bytes, track_calls=False)

    # --- reading -------------------------------------------------------------------------

    async def receive_message(self) -> Message:
        """The next wire message, decoded (a large line in steps). Raises RemoteProtocolError
        for a bad line, or PeerClosed. The protocol's rules are not applied: see next_event."""
        buffer = await self.receive_line_buffer()  # a large line: a memoryview, not a copy
        line = cast(bytes, buffer)  # (below PASSTHROUGH_LINE it is bytes)
        if len(line) < PASSTHROUGH_LINE:
            return decode_message(line)  # the common case, without a generator
        return await self._receive_large(buffer)

    async def _receive_large(self, buffer: bytes | memoryview) -> Message:
        """:meth:`receive_message` of a line of ``PASSTHROUGH_LINE`` bytes or more."""
        response = decode_tool_response(buffer)  # a large result: its content stays raw
        if response is not None:
            return response
        # Any other large line (rare): the decoders want bytes.
        line = buffer if isinstance(buffer, bytes) else buffer.tobytes()
        if len(line) < LARGE_LINE:
            return decode_message(line)
        steps = decode_message_in_steps(line)
        try:
            while True:
                next(steps)
                await trio.lowlevel.checkpoint()  # a large line: let other tasks run between steps
        except StopIteration as done:
            message: Message = done.value
            return message

    async def next_event(self) -> Message | BadLine:
        """The next message, judged by :attr:`protocol`: the message, or a :class:`BadLine` to
        answer. Raises PeerClosed, and RemoteProtocolError for a bad first line (fatal)."""
        try:
            # receive_message's common case inline: a coroutine frame fewer per message.
            buffer = await self.receive_line_buffer()
            if len(buffer) < PASSTHROUGH_LINE:
                message = decode_message(cast(bytes, buffer))
            else:
                message = await self._receive_large(buffer)
        except RemoteProtocolError as exc:
            return self.protocol.refuse_line(exc)
        return self.protocol.receive_message(message)

    # --- writing -------------------------------------------------------------------------

    def encode(self, message: Message) -> bytes | None:
        """The line for ``message`` (see ``BrokerConnection.send``); None once a fatal error
        went out (the connection is closing, like a closed queue). Raises LocalProtocolError
        for a message the broker may not send now."""
        try:
            return self.protocol.send(message)
        except LocalProtocolError:
            if self.protocol.phase is Phase.CLOSED:
                return None
            raise

    async def send(self, message: Message) -> None:
        data = self.encode(message)
        if data is None:
            raise ConnectionClosed("the connection is closing")
        await self.send_bytes(data)

    def send_nowait(self, message: Message) -> bool:
        data = self.encode(message)
        return data is not None and self.send_bytes_nowait(data)

    def send_reliable_nowait(self, message: Message) -> bool:
        """Queue a message that must not be lost to a full queue, without waiting.

        For ``toolInvocation`` and ``toolCancel`` to an app and the responses to an agent, whose
        number is bounded by the calls in flight (``max_overflow``, the daemon's
        ``max_pending_calls``). It goes into the channel if there is room; otherwise into a side
        queue that the writer sends ahead of its next batch (the writer is busy then, so it
        comes round soon). False if the connection is closed, or that side queue is full too.
        """
        data = self.encode(message)
        return data is not None and self.send_bytes_reliable_nowait(data)

    #: The one writer (the channel's): run it in the connection's nursery.
    writer_loop = LineChannel.run_writer

    async def close(self) -> None:
        with trio.move_on_after(1) as scope:
            scope.shield = True
            await trio.aclose_forcefully(self.stream)


__all__ = ["Connection", "PeerClosed", "RemoteProtocolError", "seconds_to_ms"]
