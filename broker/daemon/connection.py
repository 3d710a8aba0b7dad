"""One accepted connection of the daemon: a :class:`~app_client.channel.LineChannel` plus wire messages.

Theory of operation
-------------------
The line framing, the one bounded batching writer (:meth:`Connection.writer_loop`), the reliable
side queue and the write timeout are :class:`app_client.channel.LineChannel`'s (read its module
docstring). A full queue makes senders wait (back-pressure reaches the caller);
:meth:`~Connection.send_nowait` drops; :meth:`~Connection.send_reliable_nowait` is for the
messages of calls in flight (invocations and cancellations to an app, responses to an agent),
whose side queue is bounded by the daemon's limit on calls in flight. If the peer stops reading
and a write cannot finish within ``write_timeout``, the connection is cancelled as a whole, so a
peer that does not read holds at most those bounds of our memory for that long.

This class adds what the daemon needs on top: a connection number for the logs, wire messages
in and out, and ``after_close``. Decoding a line builds its Python objects on the loop; for a
``register`` or ``addTools`` of megabytes of schemas that alone took ~80 ms (a 10 MB line).
Such a line is decoded in steps (:func:`_decode_tools_in_steps`): its top level and its tools
are first only delimited, then each tool is decoded, with a checkpoint every
:data:`_STEP_BYTES`, so other tasks run between.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable

import trio

import msgspec

from app_client.channel import LineChannel
from app_client.errors import ConnectionClosed, RemoteProtocolError
from app_client.wire import AddTools, Message, Register, ToolSpec, decode_message, encode_message

from ..core.outcome import seconds_to_ms  # re-exported: where the daemon's modules found it

#: Lines at least this long that carry tools are decoded in steps of about _STEP_BYTES.
_LARGE_LINE = 1 << 20
_STEP_BYTES = 512 * 1024
_TOP_LEVEL: msgspec.json.Decoder[dict[str, msgspec.Raw]] = msgspec.json.Decoder(dict[str, msgspec.Raw])
_RAW_LIST: msgspec.json.Decoder[list[msgspec.Raw]] = msgspec.json.Decoder(list[msgspec.Raw])
_TOOL: msgspec.json.Decoder[ToolSpec] = msgspec.json.Decoder(ToolSpec)
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
        #: Work to do once the connection is closed and outside its cancel scope.
        self.after_close: Callable[[], Awaitable[None]] | None = None

    # --- reading -------------------------------------------------------------------------

    async def receive_message(self) -> Message:
        """The next wire message. Raises RemoteProtocolError for a bad line, or PeerClosed."""
        line = await self.receive_line()
        if len(line) >= _LARGE_LINE:
            message = await _decode_tools_in_steps(line)
            if message is not None:
                return message
        return decode_message(line)

    # --- writing -------------------------------------------------------------------------

    async def send(self, message: Message) -> None:
        await self.send_bytes(encode_message(message))

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

    #: The one writer (the channel's): run it in the connection's nursery.
    writer_loop = LineChannel.run_writer

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
