"""Framing: bytes into bounded lines (:class:`LineFramer`), and big lines decoded in steps.

Theory of operation
-------------------
:class:`LineFramer` is sans-IO: bytes go in with :meth:`~LineFramer.receive_data`, complete
lines come out of :meth:`~LineFramer.next_line` (None: more data is needed). A line over the
cap raises :class:`RemoteProtocolError` (``line_too_long``) once and is discarded unbuffered.

For a reader that takes lines with :meth:`~LineFramer.next_line_buffer`, a line that reaches
:data:`TAKE_LINE` bytes without its newline is collected in an anonymous
memory map the size of the limit (address space only: a page takes memory once written), each
read copied in as it comes — no buffer that grows by reallocation (which may copy it, and leaves
freed heap behind). When its newline arrives, :meth:`~LineFramer.next_line_buffer` hands over a
``memoryview`` of the map itself (:meth:`~LineFramer.next_line` would copy it out as ``bytes``)
— so a large payload exists once in memory, not twice, and its
pages go back to the system as soon as the last reference to it goes (the daemon reads apps'
results this way).

Decoding a line builds its Python objects in one go; for a ``register`` or ``addTools`` of
megabytes of schemas that alone took ~80 ms (a 10 MB line). :func:`decode_tools_in_steps`
decodes such a line a tool at a time as a generator that yields between steps (its top level
and its tools are first only delimited, then each tool is decoded), so an event loop driving
it can run other tasks between steps. Lines of :data:`LARGE_LINE` bytes or more are worth it.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Final

import mmap

import msgspec

from ._errors import RemoteProtocolError
from ._messages import (
    DEFAULT_MAX_LINE_BYTES,
    AddTools,
    Message,
    Register,
    ToolSpec,
    _find_correlation_id,
    decode_message,
)

__all__ = ["LARGE_LINE", "STEP_BYTES", "TAKE_LINE", "LineFramer", "decode_message_in_steps", "decode_tools_in_steps"]

#: Lines at least this long that carry tools are worth decoding in steps of about STEP_BYTES.
LARGE_LINE: Final = 1 << 20
STEP_BYTES: Final = 512 * 1024
#: A line this long without its newline yet is collected read by read (see the module docstring).
TAKE_LINE: Final = 1 << 20
_TOP_LEVEL: msgspec.json.Decoder[dict[str, msgspec.Raw]] = msgspec.json.Decoder(dict[str, msgspec.Raw])
_RAW_LIST: msgspec.json.Decoder[list[msgspec.Raw]] = msgspec.json.Decoder(list[msgspec.Raw])
_TOOL: msgspec.json.Decoder[ToolSpec] = msgspec.json.Decoder(ToolSpec)


class LineFramer:
    """Splits a byte stream into newline-terminated lines of bounded length.

    A line longer than ``max_line_bytes`` raises :class:`RemoteProtocolError`
    (``line_too_long``) once; the rest of that line is discarded without being buffered and
    framing resumes after its newline, so one oversized message does not end the connection.
    A trailing ``\\r`` is stripped (CRLF peers are tolerated); empty lines are skipped.
    """

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self._buffer = bytearray()
        self._scan_from = 0
        self._discarding = False
        #: A large line's bytes so far (see the module docstring), its length, and whether its
        #: newline came (what followed it is in ``_buffer`` then).
        self._spill: mmap.mmap | None = None
        self._spill_len = 0
        self._spill_done = False
        #: Set by the first next_line_buffer: its reader takes large lines as maps (else a large
        #: line grows in ``_buffer`` as any line, which costs less when it is copied out anyway).
        self._take_large = False

    @property
    def buffered(self) -> int:
        """Bytes held while waiting for the end of a line (never more than the limit + one read)."""
        return len(self._buffer) + self._spill_len

    def receive_data(self, data: bytes | bytearray) -> None:
        if self._spill is None or self._spill_done:
            self._buffer += data
            return
        newline = data.find(b"\n")
        end = len(data) if newline < 0 else newline
        room = len(self._spill) - self._spill_len  # beyond it the line is too long: not kept
        if room > 0:
            self._spill[self._spill_len:self._spill_len + min(end, room)] = data[:min(end, room)]
        self._spill_len += end
        if newline >= 0:
            self._spill_done = True
            self._buffer += data[newline + 1:]

    def next_line(self) -> bytes | None:
        """Return the next complete line (without newline), or ``None`` if more data is needed."""
        line = self._next(take=False)
        assert line is None or type(line) is bytes
        return line

    def next_line_buffer(self) -> bytes | memoryview | None:
        """:meth:`next_line`, but a line of :data:`TAKE_LINE` bytes or more may come as a
        ``memoryview`` of a memory map the caller now owns: no second copy of a large line."""
        self._take_large = True
        return self._next(take=True)

    def _next(self, *, take: bool) -> bytes | memoryview | None:
        while True:
            if self._spill is not None:
                if self._spill_len > self.max_line_bytes:
                    head, seen = self._spill[:4096], self._spill_len
                    self._discarding = not self._spill_done  # else the newline came: done
                    self._end_spill()
                    raise _too_long(self.max_line_bytes, seen, head)
                if not self._spill_done:
                    return None
                line = self._assemble(take)
                if line is not None:
                    return line
                continue
            newline = self._buffer.find(b"\n", self._scan_from)
            if self._discarding:
                if newline < 0:
                    self._buffer.clear()
                    self._scan_from = 0
                    return None
                del self._buffer[: newline + 1]
                self._scan_from = 0
                self._discarding = False
                continue
            if newline < 0:
                if len(self._buffer) > self.max_line_bytes:
                    self._start_discarding(len(self._buffer))
                    continue
                if self._take_large and len(self._buffer) >= TAKE_LINE:  # large: into a map from now on
                    self._spill = mmap.mmap(-1, self.max_line_bytes)
                    self._spill[:len(self._buffer)] = self._buffer
                    self._spill_len = len(self._buffer)
                    self._buffer = bytearray()
                    self._scan_from = 0
                    return None
                self._scan_from = len(self._buffer)
                return None
            if newline > self.max_line_bytes:
                self._start_discarding(newline)
                continue
            with memoryview(self._buffer) as view:
                line = bytes(view[:newline])  # one copy (a bytearray slice would make two)
            del self._buffer[: newline + 1]
            self._scan_from = 0
            if line.endswith(b"\r"):
                line = line[:-1]
            if line.strip():
                return line

    def _start_discarding(self, seen: int) -> None:
        self._discarding = True
        raise _too_long(self.max_line_bytes, seen, bytes(self._buffer[:4096]))

    def _end_spill(self) -> mmap.mmap | None:
        spill = self._spill
        self._spill, self._spill_len, self._spill_done = None, 0, False
        return spill

    def _assemble(self, take: bool) -> bytes | memoryview | None:
        """The large line whose newline came: copied out (``bytes``), or with ``take`` a view of
        its memory map. None for a blank line (only looked for when copied)."""
        size = self._spill_len
        spill = self._end_spill()
        assert spill is not None and size <= len(spill)
        if spill[size - 1:size] == b"\r":
            size -= 1
        if not take:
            line = spill[:size]
            spill.close()
            return line if line.strip() else None
        return memoryview(spill)[:size]  # the map lives as long as the view (or views of it)


def _too_long(limit: int, seen: int, head: bytes) -> RemoteProtocolError:
    return RemoteProtocolError(
        "line_too_long",
        f"a line exceeded the limit of {limit} bytes (at least {seen} seen); it was discarded",
        correlation_id=_find_correlation_id(head),
    )


def decode_tools_in_steps(line: bytes) -> Generator[None, None, Message | None]:
    """Decode a large ``register`` / ``addTools`` line a tool at a time, yielding between steps.

    A generator: it yields (None) after about :data:`STEP_BYTES` of tools, so its driver can
    let other work run between steps (the daemon awaits a checkpoint), and returns the message
    (``StopIteration.value``). :func:`decode_message_in_steps` drives it without pauses.

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
        if step >= STEP_BYTES:
            step = 0
            yield None
    return msgspec.structs.replace(shell, tools=specs)


def decode_message_in_steps(line: bytes) -> Generator[None, None, Message]:
    """:func:`decode_message`, in steps for a large line of tools (yields between them).

    Raises :class:`RemoteProtocolError` exactly as :func:`decode_message` does.
    """
    message = None
    if len(line) >= LARGE_LINE:
        message = yield from decode_tools_in_steps(line)
    return message if message is not None else decode_message(line)
