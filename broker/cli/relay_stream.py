"""The stdio relay's reader of the daemon link: whole lines, and large responses passed through
as they arrive (:class:`DaemonReader`).

Theory of operation
-------------------
Before (performance round 4) the relay received each line from the daemon whole, parsed it for
its id, and only then wrote it to stdout: for a 5 MiB image (~7 MB of base64 in one line) the
agent's first byte waited for the daemon's last one, plus the parse (issue 33).

Now a line that is still unfinished after :data:`STREAM_AFTER` bytes, and whose head is a
JSON-RPC result as the daemon writes it — ``{"jsonrpc":"2.0","id":<id>,"result":`` with the id
a number or a plain string (:data:`_RESULT_HEAD`) — is *streamed*: what has arrived goes to
stdout at once, and each later read goes on after it, until the line's newline. Everything the
relay needs from such a line is in its head: that it is a response (no ``method``: the daemon
writes ``jsonrpc``, ``id``, ``result`` first and nothing after) and its id (the request it
answers is owed until the newline has been passed on). The relay never holds more of it than
one read (:data:`READ_BYTES`) plus what stdout's writer has queued (bounded by its queue).
Any other line (small ones, errors, notifications, a head that does not match, the answer to
the relay's own replayed ``initialize``) is collected whole and handled as before, bounded by
``max_line_bytes`` (a longer one is discarded with a RemoteProtocolError in its place).

A streamed line reserves stdout (the relay's ``_stdout_lock``) from its first piece to its
newline: nothing else is written between its pieces. If the daemon link ends mid-line (the
daemon stopped), the relay ends the partial line with a newline — the agent sees one line it
cannot parse, never a line glued to the next message — and the request it answered is still
owed, so it gets the relay's usual "connection lost" error right after. The same newline ends
a line cut off by the relay's own exit (an agent that cancelled that request, then closed stdin).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import msgspec

from app_client.channel import LineChannel
from app_client.protocol import ConnectionClosed, RemoteProtocolError

__all__ = ["READ_BYTES", "STREAM_AFTER", "DaemonReader", "Piece"]

#: An unfinished line this long with a result's head is passed on as it arrives.
STREAM_AFTER: Final = 256 * 1024
#: Bytes asked of the daemon link per read (256 KiB: the relay's CPU per 5 MiB image fell from
#: ~11 to ~7 ms against 64 KiB reads; stdout's writer queues at most 256 of them).
READ_BYTES: Final = 256 * 1024
#: The head the daemon's ``encode_result`` writes: the id a number or a string without escapes.
_RESULT_HEAD: Final = re.compile(rb'\{"jsonrpc":"2\.0","id":(-?[0-9]+|"[^"\\]*"),"result":')


@dataclass(slots=True)
class Piece:
    """Bytes of a streamed line: ``first`` opens it (``request_id`` is its id), ``last`` holds
    its newline."""

    data: bytes
    request_id: Any
    first: bool
    last: bool


Item: TypeAlias = bytes | RemoteProtocolError | Piece


class DaemonReader:
    """Reads the daemon link after ``agentConnected`` (see the module docstring)."""

    def __init__(self, channel: LineChannel, *, max_line_bytes: int, stream_after: int = STREAM_AFTER) -> None:
        self._channel = channel
        self._max_line_bytes = max_line_bytes
        self._stream_after = stream_after
        #: The unfinished line (not streamed) so far.
        self._line = bytearray()
        #: The id of the line being streamed, or None.
        self._streaming: tuple[Any] | None = None
        self._discarding = False
        #: Lines the channel's framer read with agentConnected are taken first; if it also holds
        #: part of a line, this link is read whole-line only (the channel's own reader).
        self._whole_lines_only = False
        self._started = False

    @property
    def streaming(self) -> bool:
        """A streamed line has begun and its newline has not come."""
        return self._streaming is not None

    async def receive(self, *, streamable: Any = None) -> list[Item]:
        """What the next read brought (never empty): whole lines, errors in place of lines over
        the limit, and pieces of a streamed line. ``streamable(request_id)`` says whether a line
        answering that id may be streamed (the relay's own requests are not). Raises
        ConnectionClosed at the end of the link (a streamed line is then left unfinished:
        :attr:`streaming` says so)."""
        if not self._started:
            self._started = True
            items = self._framed_lines()
            if self._channel.framer.buffered:
                self._whole_lines_only = True
            if items:
                return items
        if self._whole_lines_only:
            return list(await self._channel.receive_batch())
        while True:
            data = await self._channel.receive_unframed(READ_BYTES)  # (raises ConnectionClosed)
            items = self._split(data if type(data) is bytes else bytes(data), streamable)
            if items:
                return items

    def _framed_lines(self) -> list[Item]:
        items: list[Item] = []
        while True:
            try:
                line = self._channel.receive_line_nowait()
            except RemoteProtocolError as exc:
                items.append(exc)
                continue
            if line is None:
                return items
            items.append(line)

    def _split(self, data: bytes, streamable: Any) -> list[Item]:
        items: list[Item] = []
        start = 0
        size = len(data)
        while start < size:
            newline = data.find(b"\n", start)
            end = size if newline < 0 else newline
            if self._streaming is not None:
                (request_id,) = self._streaming
                if newline >= 0:
                    self._streaming = None
                    items.append(Piece(data[start:newline + 1], request_id, first=False, last=True))
                else:
                    items.append(Piece(data[start:], request_id, first=False, last=False))
            elif self._discarding:
                self._discarding = newline < 0
            elif newline >= 0:
                if self._line:
                    self._line += data[start:newline]
                    line = bytes(self._line)
                    self._line.clear()
                else:  # the usual case: the whole line in this read, one copy
                    line = data[start:newline]
                if len(line) > self._max_line_bytes:
                    items.append(_too_long(self._max_line_bytes, len(line)))
                else:
                    if line.endswith(b"\r"):
                        line = line[:-1]
                    if line.strip():
                        items.append(line)
            else:
                self._line += data[start:]
                if len(self._line) >= self._stream_after:
                    request_id = _streamable_id(self._line)
                    if request_id is not _NO and (streamable is None or streamable(request_id)):
                        self._streaming = (request_id,)
                        items.append(Piece(bytes(self._line), request_id, first=True, last=False))
                        self._line = bytearray()  # (a fresh one: the old may be large)
                if len(self._line) > self._max_line_bytes:
                    items.append(_too_long(self._max_line_bytes, len(self._line)))
                    self._line = bytearray()
                    self._discarding = True
            start = end + 1
        return items


_NO: Final = object()


def _streamable_id(head: bytearray) -> Any:
    """The id in ``head`` if it starts as a result the daemon writes, else ``_NO``."""
    match = _RESULT_HEAD.match(head)
    if match is None:
        return _NO
    try:
        return msgspec.json.decode(match.group(1))
    except msgspec.DecodeError:  # pragma: no cover - the pattern admits only valid ids
        return _NO


def _too_long(limit: int, seen: int) -> RemoteProtocolError:
    return RemoteProtocolError("line_too_long",
                               f"a line exceeded the limit of {limit} bytes (at least {seen} seen); it was discarded")
