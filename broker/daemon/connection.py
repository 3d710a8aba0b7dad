"""One accepted TCP connection: bounded line framing in, one writer task out.

Theory of operation
-------------------
Every connection has exactly one writer: :meth:`Connection.writer_loop`, fed by a bounded
memory channel. Senders wait when the channel is full (back-pressure reaches the caller), use
:meth:`send_nowait` for messages that may be dropped, or :meth:`send_reliable_nowait` for the
messages of calls in flight (invocations and cancellations to an app, responses to an agent),
which must be neither waited for nor lost: past a full channel they are held in a side queue
bounded by the daemon's limit on calls in flight. The writer coalesces queued lines into one
``send_all``; when it wakes to a single line while other tasks are ready to run, it first
yields once, so lines that they are about to queue go in the same write. If the peer stops
reading and a write cannot finish within ``write_timeout``, the connection is cancelled as a
whole, so a peer that does not read holds at most those bounds of our memory for that long.

Reading goes through a :class:`~app_client.wire.LineFramer` capped at ``max_line_bytes``.
Decoding a line builds its Python objects on the loop; for a ``register`` or ``addTools`` of
megabytes of schemas that alone took ~80 ms (a 10 MB line). Such a line is decoded in steps
(:func:`_decode_tools_in_steps`): its top level and its tools are first only delimited, then
each tool is decoded, with a checkpoint every :data:`_STEP_BYTES`, so other tasks run between.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Awaitable, Callable

import structlog
import trio

import msgspec

from app_client.errors import RemoteProtocolError
from app_client.wire import AddTools, LineFramer, Message, Register, ToolSpec, decode_message, encode_message

from ..core.outcome import seconds_to_ms  # re-exported: where the daemon's modules found it

log = structlog.get_logger("toolbridge.connection")

_READ_SIZE = 65536
#: Lines at least this long that carry tools are decoded in steps of about _STEP_BYTES.
_LARGE_LINE = 1 << 20
_STEP_BYTES = 512 * 1024
_TOP_LEVEL: msgspec.json.Decoder[dict[str, msgspec.Raw]] = msgspec.json.Decoder(dict[str, msgspec.Raw])
_RAW_LIST: msgspec.json.Decoder[list[msgspec.Raw]] = msgspec.json.Decoder(list[msgspec.Raw])
_TOOL: msgspec.json.Decoder[ToolSpec] = msgspec.json.Decoder(ToolSpec)
_COALESCE_BYTES = 256 * 1024
_conn_ids = itertools.count(1)


class PeerClosed(Exception):
    """The peer closed the connection (or it broke)."""


class Connection:
    def __init__(
        self,
        stream: trio.abc.Stream,
        *,
        max_line_bytes: int,
        outbound_queue: int,
        write_timeout: float,
        max_overflow: int = 4096,
    ) -> None:
        self.id = next(_conn_ids)
        self.stream = stream
        self._framer = LineFramer(max_line_bytes)
        self._send, self._outbound = trio.open_memory_channel[bytes](outbound_queue)
        self._write_timeout = write_timeout
        self.last_received = trio.current_time()
        #: Bytes read so far (the front door tells a silent connection from a slow one).
        self.bytes_received = 0
        self.scope = trio.CancelScope()
        self.closed_reason: str | None = None
        self._end_when_flushed = False
        #: Lines that must not be dropped, held beside a full channel (see send_reliable_nowait).
        self._overflow: collections.deque[bytes] = collections.deque()
        self._max_overflow = max_overflow
        #: Work to do once the connection is closed and outside its cancel scope.
        self.after_close: Callable[[], Awaitable[None]] | None = None

    # --- reading -------------------------------------------------------------------------

    async def receive_line(self) -> bytes:
        """The next line. Raises RemoteProtocolError (line_too_long) or PeerClosed."""
        while True:
            line = self._framer.next_line()
            if line is not None:
                return line
            try:
                data = await self.stream.receive_some(_READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise PeerClosed("connection broken") from exc
            if not data:
                raise PeerClosed("connection closed by peer")
            self.last_received = trio.current_time()
            self.bytes_received += len(data)
            self._framer.receive_data(data)

    async def receive_message(self) -> Message:
        """The next wire message. Raises RemoteProtocolError for a bad line, or PeerClosed."""
        line = await self.receive_line()
        if len(line) >= _LARGE_LINE:
            message = await _decode_tools_in_steps(line)
            if message is not None:
                return message
        return decode_message(line)

    # --- writing -------------------------------------------------------------------------

    async def send_bytes(self, data: bytes) -> None:
        try:
            await self._send.send(data)
        except (trio.ClosedResourceError, trio.BrokenResourceError) as exc:
            raise PeerClosed("connection closed") from exc

    async def send(self, message: Message) -> None:
        await self.send_bytes(encode_message(message))

    def send_bytes_nowait(self, data: bytes) -> bool:
        """Queue ``data`` if there is room; False (dropped) if the peer is not keeping up."""
        try:
            self._send.send_nowait(data)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            return False
        return True

    def send_nowait(self, message: Message) -> bool:
        return self.send_bytes_nowait(encode_message(message))

    def send_reliable_nowait(self, message: Message) -> bool:
        """Queue a message that must not be lost to a full queue, without waiting.

        For ``toolInvocation`` and ``toolCancel`` to an app and the responses to an agent, whose
        number is bounded by the calls in flight (``max_overflow``, the daemon's
        ``max_pending_calls``). It goes into the channel if there is room; otherwise into a side
        queue that the writer sends ahead of its next batch (the writer is busy then, so it
        comes round soon). False if the connection is closed, or that side queue is full too.
        """
        return self.send_bytes_reliable_nowait(encode_message(message))

    def send_bytes_reliable_nowait(self, data: bytes) -> bool:
        """:meth:`send_reliable_nowait` for encoded bytes (an agent's responses)."""
        try:
            self._send.send_nowait(data)
            return True
        except trio.WouldBlock:
            pass
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            return False
        if len(self._overflow) >= self._max_overflow:
            log.warning("reliable_message_dropped", conn_id=self.id)
            return False
        self._overflow.append(data)
        return True

    def _take_overflow(self) -> list[bytes]:
        taken = list(self._overflow)
        self._overflow.clear()
        return taken

    def finish_sending(self) -> None:
        """No more messages: the writer sends what is queued, then exits."""
        self._send.close()

    def close_after_flush(self, reason: str) -> None:
        """Send what is queued (a fatal error, say), then end the connection."""
        if self.closed_reason is None:
            self.closed_reason = reason
        self._end_when_flushed = True
        self._send.close()

    def abort(self, reason: str) -> None:
        """End the connection now (its whole handler is cancelled)."""
        if self.closed_reason is None:
            self.closed_reason = reason
        self.scope.cancel()

    async def writer_loop(self) -> None:
        async with self._outbound:
            async for first in self._outbound:
                chunks = [*self._take_overflow(), first]
                size = sum(map(len, chunks))
                if (self._outbound.statistics().current_buffer_used == 0
                        and trio.lowlevel.current_statistics().tasks_runnable):
                    # Let the tasks that are ready to run queue their lines too (a burst of
                    # responses resolves many calls at once): one send for the lot. With none
                    # ready (one call at a time) the extra scheduler pass would only add latency.
                    await trio.lowlevel.cancel_shielded_checkpoint()
                while size < _COALESCE_BYTES:
                    try:
                        more = self._outbound.receive_nowait()
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                    chunks.append(more)
                    size += len(more)
                with trio.move_on_after(self._write_timeout) as timeout:
                    try:
                        await self.stream.send_all(b"".join(chunks) if len(chunks) > 1 else first)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        self.abort("connection broken while writing")
                        return
                if timeout.cancelled_caught:
                    log.warning("peer_not_reading", conn_id=self.id, seconds=self._write_timeout)
                    self.abort(f"the peer did not read for {self._write_timeout:g} s")
                    return
        if self._end_when_flushed:
            self.scope.cancel()

    async def close(self) -> None:
        with trio.move_on_after(1) as scope:
            scope.shield = True
            await trio.aclose_forcefully(self.stream)


async def _decode_tools_in_steps(line: bytes) -> Message | None:
    """Decode a large ``register`` / ``addTools`` line a tool at a time, yielding between steps.

    None when the line is anything else, or not valid JSON: then :func:`decode_message`
    decodes it at once, so every error is classified and worded as for any line. A tool that
    does not match its type is refused here, worded as :func:`decode_message` words it.
    """
    try:
        top = _TOP_LEVEL.decode(line)  # delimits the values; builds none of them
        kind, tools = top.get("type"), top.pop("tools", None)
        if kind is None or bytes(kind) not in (b'"register"', b'"addTools"') or tools is None:
            return None
        raw_tools = _RAW_LIST.decode(tools)
        # The message without its tools, decoded (and checked) as usual; then the tools.
        shell = decode_message(b"{" + b",".join(
            msgspec.json.encode(key) + b":" + bytes(value) for key, value in [*top.items(), ("tools", b"[]")]
        ) + b"}")
    except (msgspec.DecodeError, RemoteProtocolError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(shell, (Register, AddTools)):  # pragma: no cover - the type was checked above
        return None
    specs: list[ToolSpec] = []
    step = 0
    for index, raw in enumerate(raw_tools):
        try:
            specs.append(_TOOL.decode(raw))
        except msgspec.ValidationError as exc:
            where = str(exc).replace("`$", f"`$.tools[{index}]", 1)
            raise RemoteProtocolError("invalid_message", f"invalid {shell.__struct_config__.tag!r} message: "
                                      f"{where}") from None
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            return None
        step += len(raw)
        if step >= _STEP_BYTES:
            step = 0
            await trio.lowlevel.checkpoint()
    return msgspec.structs.replace(shell, tools=specs)


__all__ = ["Connection", "PeerClosed", "RemoteProtocolError", "seconds_to_ms"]
