"""One trio byte stream read and written as newline-terminated lines: :class:`LineChannel`.

Theory of operation
-------------------
Both ends of toolbridge's NDJSON links (the daemon's accepted connections, an app's link to
the daemon, the CLI's link to the daemon, the fake broker in :mod:`app_client.testing`) read and
write lines the same way; this module is the one copy of that code.

Reading (:class:`LineReader`, which a channel is; a read-only stream such as a relay's stdin
uses it alone) goes through a :class:`~app_client.protocol.LineFramer` capped at
``max_line_bytes``, fed :data:`READ_SIZE` bytes at a time. :meth:`~LineReader.receive_line`
takes one line; :meth:`~LineReader.receive_batch` takes every line one read brought, for a
relay that forwards them in one write. A line over the cap raises
:class:`~app_client.errors.RemoteProtocolError` (``line_too_long``) once and the channel stays
usable (the rest of that line is discarded unbuffered); end of stream, or a broken stream,
raises :class:`~app_client.errors.ConnectionClosed`. ``bytes_received`` and ``last_received``
say how much was read and when (the daemon tells a silent connection from a slow one, and a
live one from a dead one, by them).

Writing has exactly one writer, :meth:`LineChannel.run_writer`, fed by a bounded memory
channel. Senders wait when it is full (back-pressure reaches the caller), use
:meth:`~LineChannel.send_bytes_nowait` for lines that may be dropped, or
:meth:`~LineChannel.send_bytes_reliable_nowait` for lines that must be neither waited for nor
lost: past a full channel they are held in a side queue bounded by ``max_overflow``. The writer
coalesces queued lines into one ``send_all`` of up to :data:`COALESCE_BYTES`; when it wakes to a
single line while other tasks are ready to run, it first yields once, so lines that they are
about to queue go in the same write. If a write cannot finish within ``write_timeout`` (the peer
stopped reading), or the stream breaks, the channel is aborted: ``closed_reason`` is set and
``scope`` (the cancel scope its owner runs the connection in) is cancelled. Before the writer
runs (handshakes), :meth:`~LineChannel.send_direct` writes straight to the stream.

Large payloads: :meth:`~LineReader.receive_line_buffer` may hand over a large line as a view of
the memory map the framer collected it in (no copy), and a line to send may be a :class:`SplitLine` — its parts (a
large one a view of the buffer it arrived in) are written in order as one line, never
interleaved with other lines, and never joined into a new buffer: a result relayed from one
connection to another exists once in memory.

Fewer wake-ups per message (performance round 4): over a plain socket (``trio.SocketStream``
without TLS) or a pipe (``trio.lowlevel.FdStream``), both non-blocking, the writer sends what
it took from the queue at once, falling back to the stream's own ``send_all`` (with the write
timeout) only for what did not fit, and the reader reads straight from the handle. trio's
``send_all`` makes a scheduler pass after every successful send, and a pipe's
``receive_some`` one before every read; with one message at a time (an app answering one call
at a time, an agent at concurrency 1) those passes were a large part of each process's CPU
per message. Every read still makes exactly one pass (after a read that found data, or the
wait for data), so a peer that floods cannot starve the loop. Other streams (TLS, memory
streams in tests, Windows pipes) use the stream's own methods, as before.
"""

from __future__ import annotations

import collections
import math
import os
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any, Final, TypeAlias, cast

import trio

from .logs import get_logger
from .protocol import DEFAULT_MAX_LINE_BYTES, ConnectionClosed, LineFramer, RemoteProtocolError

__all__ = ["COALESCE_BYTES", "READ_SIZE", "LineChannel", "LineReader", "LineWriter", "SplitLine", "write_through"]

#: Bytes asked of the stream per read.
READ_SIZE: Final = 64 * 1024
#: After a straight read finds nothing, this many reads wait for data first (LineReader._read_raw).
WAIT_FIRST_READS: Final = 8
#: The writer joins queued lines into one write up to this size.
COALESCE_BYTES: Final = 256 * 1024

_log = get_logger("toolbridge.connection")

#: A part of a :class:`SplitLine`: anything with the buffer protocol a stream can send.
Part: TypeAlias = bytes | bytearray | memoryview


class SplitLine:
    """One line to send given as parts (the last one ends with the newline), written in order
    and never joined: a large part is sent straight from the buffer it lives in."""

    __slots__ = ("parts", "nbytes", "__weakref__")

    def __init__(self, parts: Iterable[Part]) -> None:
        self.parts = tuple(parts)
        self.nbytes = sum(len(part) if not isinstance(part, memoryview) else part.nbytes for part in self.parts)

    def __len__(self) -> int:
        return self.nbytes

    def join(self) -> bytes:
        """The line as one ``bytes`` (a copy: for a sink that needs one buffer)."""
        return b"".join(self.parts)


#: What the writer sends: a line's bytes, or a line in parts.
Line: TypeAlias = bytes | SplitLine


def _segments(lines: list[Line]) -> list[Part]:
    """The buffers to write for ``lines``: small neighbours joined, large parts left as they are."""
    out: list[Part] = []
    small: list[Part] = []
    for line in lines:
        for part in (line.parts if isinstance(line, SplitLine) else (line,)):
            if len(part) >= COALESCE_BYTES:
                if small:
                    out.append(b"".join(small))
                    small = []
                out.append(part)
            else:
                small.append(part)
    if small:
        out.append(b"".join(small))
    return out


#: What a read that failed means: the stream is gone (trio wraps a socket's OSError in
#: BrokenResourceError; a file read in a worker thread, as a relay's stdin, raises OSError).
_BROKEN: Final = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)

_FdStream: Any = getattr(trio.lowlevel, "FdStream", None)  # POSIX only



class _RawIO:
    """Non-blocking reads and writes straight on the OS handle under a trio stream.

    ``handle`` is what ``trio.lowlevel.wait_readable`` takes (the socket, or the pipe's stream);
    ``recv(n)`` and ``send(data)`` raise BlockingIOError when the handle is not ready and
    OSError when it is broken or closed.
    """

    __slots__ = ("handle", "recv", "send")

    def __init__(self, handle: Any, recv: Callable[[int], bytes], send: Callable[[Any], int]) -> None:
        self.handle = handle
        self.recv = recv
        self.send = send


def _raw_io(stream: object) -> _RawIO | None:
    """The raw handle under a plain socket or pipe stream; None for anything else (TLS, memory).

    trio keeps both non-blocking (it sets ``O_NONBLOCK`` / ``setblocking(False)`` itself). For a
    socket this reads ``trio.SocketStream.socket``'s wrapped standard-library socket, which
    trio does not document: if that ever changes, the check below fails and the stream's own
    methods are used.
    """
    if type(stream) is trio.SocketStream:
        sock = getattr(stream.socket, "_sock", None)
        if isinstance(sock, socket.socket) and sock.type == socket.SOCK_STREAM:
            return _RawIO(sock, sock.recv, sock.send)
        return None
    if _FdStream is not None and type(stream) is _FdStream:
        fd_stream: Any = stream

        def read(size: int) -> bytes:
            return os.read(fd_stream.fileno(), size)

        def write(data: Any) -> int:
            return os.write(fd_stream.fileno(), data)

        return _RawIO(fd_stream, read, write)  # its fileno() is read at each wait (-1 once closed)
    return None


class _Through(threading.local):
    #: The task inside :func:`write_through` in this thread's trio run, if any.
    task: trio.lowlevel.Task | None = None


_through: Final = _Through()


class write_through:  # noqa: N801 - used like a function: ``with write_through(drained):``
    """While the body runs, lines this task queues for an idle writer are written at once.

    For a reader handling the last line one read brought (``LineReader.read_drained``): what
    it answers cannot be joined by lines of the same read any more, so each line goes out in
    this step, without a wake-up of its writer (the daemon's reply to the agent and the next
    invocation to an app answering one call at a time; the invocation of a call at concurrency
    1). Only ``send_bytes_nowait`` and ``send_bytes_reliable_nowait`` do it, only while their
    writer waits with nothing queued (order is kept), and only in the task that entered: a
    body that awaits does not lend the mode to the tasks that run meanwhile. ``on=False``:
    does nothing (so a caller can say ``with write_through(drained):``).
    """

    __slots__ = ("_task",)

    def __init__(self, on: bool = True) -> None:
        self._task = trio.lowlevel.current_task() if on else None

    def __enter__(self) -> None:
        if self._task is not None:
            _through.task = self._task

    def __exit__(self, *exc_info: object) -> None:
        # Cleared only if still ours: blocks of two tasks may interleave across an await, and
        # the mode must never outlive the block that set it (the later one may lose it early:
        # lines then only take the usual way through the writer).
        if self._task is not None and _through.task is self._task:
            _through.task = None


class LineReader:
    """Lines from one trio receive stream (see the module docstring): the one read loop."""

    def __init__(self, source: trio.abc.ReceiveStream, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self._source = source
        self._framer = LineFramer(max_line_bytes)
        self._at_eof = False
        #: Reads straight on the socket or pipe (see the module docstring), or None.
        self._raw_in = _raw_io(source)
        #: Reads left that wait for data before trying (see _read_raw).
        self._wait_first = 0
        self.last_received = trio.current_time()
        #: Bytes read so far.
        self.bytes_received = 0

    def receive_line_nowait(self) -> bytes | None:
        """The next line if a whole one is already buffered, else None.

        Raises RemoteProtocolError (``line_too_long``) as :meth:`receive_line` does.
        """
        return self._framer.next_line()

    @property
    def read_drained(self) -> bool:
        """Nothing is left of what was read: the line just taken was the last one (see
        :func:`write_through`)."""
        return self._framer.buffered == 0

    @property
    def framer(self) -> LineFramer:
        """The framer holding what was read and not yet taken as a line."""
        return self._framer

    async def receive_line(self) -> bytes:
        """The next line. Raises RemoteProtocolError (line_too_long) or ConnectionClosed."""
        while True:
            line = self._framer.next_line()
            if line is not None:
                return line
            await self._read()

    async def receive_line_buffer(self) -> bytes | memoryview:
        """:meth:`receive_line`, but a large line may come as a ``memoryview`` (no copy; see
        :meth:`LineFramer.next_line_buffer <app_client.protocol.LineFramer.next_line_buffer>`)."""
        while True:
            line = self._framer.next_line_buffer()
            if line is not None:
                return line
            await self._read()

    async def receive_batch(self, *, last_line_at_eof: bool = False) -> list[bytes | RemoteProtocolError]:
        """Every whole line buffered, reading first only if there is none (never empty).

        A relay forwards what one read brought in one write: one syscall and one wake-up of
        its peer per read, not per line. A line over the limit is a RemoteProtocolError in its
        place (the reader goes on). With ``last_line_at_eof``, a last line without its newline
        counts (an agent's stdin); without, it is dropped (a peer cut off mid-line). Raises
        ConnectionClosed once nothing is left.
        """
        while True:
            batch: list[bytes | RemoteProtocolError] = []
            while True:
                try:
                    line = self._framer.next_line()
                except RemoteProtocolError as exc:
                    batch.append(exc)
                    continue
                if line is None:
                    break
                batch.append(line)
            if batch:
                return batch
            if self._at_eof:
                raise ConnectionClosed("connection closed by peer")
            try:
                await self._read()
            except ConnectionClosed:
                self._at_eof = True
                if last_line_at_eof:
                    self._framer.receive_data(b"\n")

    async def _read(self) -> None:
        self._framer.receive_data(await self.receive_unframed(READ_SIZE))

    async def receive_unframed(self, max_bytes: int) -> bytes | bytearray:
        """The next bytes off the stream, not framed: for a reader that frames them itself (the
        stdio relay passes large lines through as they come), after the framer's lines are taken.
        The same straight read as the line reader's. Raises ConnectionClosed at the end."""
        data: bytes | bytearray
        try:
            if self._raw_in is not None:
                data = await self._read_raw(self._raw_in, max_bytes)
            else:
                data = await self._source.receive_some(max_bytes)
        except _BROKEN as exc:
            raise ConnectionClosed("connection broken") from exc
        if not data:
            raise ConnectionClosed("connection closed by peer")
        self.last_received = trio.current_time()
        self.bytes_received += len(data)
        return data

    async def _read_raw(self, raw: _RawIO, max_bytes: int) -> bytes:
        """One read straight on the handle: at once if something is there (then one scheduler
        pass, as trio's own read makes, so a flooding peer cannot starve the loop; a cancelled
        reader stops before it reads), else wait until the handle is readable (that wait is
        the pass).

        A read that found nothing makes the next :data:`WAIT_FIRST_READS` reads wait first: a
        peer answering one message at a time (an app with one call in flight, the daemon at
        concurrency 1) is never ahead of us, so trying first only adds a failed ``recv`` to
        every message (2 of the daemon's 10 system calls per call at concurrency 1). After
        those reads it tries first again, so a busy stream soon reads at once again."""
        if raw.handle.fileno() < 0:
            raise trio.ClosedResourceError("the stream was closed")
        if self._wait_first:
            self._wait_first -= 1
        else:
            await trio.lowlevel.checkpoint_if_cancelled()
            try:
                data = raw.recv(max_bytes)
            except BlockingIOError:
                self._wait_first = WAIT_FIRST_READS
            else:
                await trio.lowlevel.cancel_shielded_checkpoint()  # what was read is never lost
                return data
        while True:
            await trio.lowlevel.wait_readable(raw.handle)
            try:
                return raw.recv(max_bytes)
            except BlockingIOError:
                continue


class LineWriter:
    """Lines out to one trio send stream through the one bounded, batching writer (see the
    module docstring). A write-only stream (a relay's stdout) uses it alone."""

    #: Names the channel in log lines (the daemon numbers its connections).
    id: int = 0

    def __init__(
        self,
        sink: trio.abc.SendStream,
        *,
        outbound_queue: int = 64,
        max_overflow: int = 4096,
        write_timeout: float | None = None,
    ) -> None:
        self._sink = sink
        #: Writes straight on the socket or pipe (see the module docstring), or None.
        self._raw_out = _raw_io(sink)
        #: The writer waits for a line with nothing queued or handed to it (see _write_if_idle).
        self._writer_waiting = False
        self._send, self._outbound = trio.open_memory_channel[Line](outbound_queue)
        self._write_timeout = math.inf if write_timeout is None else write_timeout
        #: Bytes written so far (``bytes_received``: see LineReader).
        self.bytes_sent = 0
        #: Cancelled by :meth:`abort`; the owner runs the connection's tasks inside it.
        self.scope = trio.CancelScope()
        self.closed_reason: str | None = None
        self._end_when_flushed = False
        #: Lines that must not be dropped, held beside a full channel (see send_bytes_reliable_nowait).
        self._overflow: collections.deque[Line] = collections.deque()
        self._max_overflow = max_overflow

    # --- writing -------------------------------------------------------------------------

    async def send_direct(self, data: bytes) -> None:
        """Write ``data`` straight to the stream: only while :meth:`run_writer` is not running.

        Raises ConnectionClosed if the stream is broken.
        """
        try:
            sent = 0
            if self._raw_out is not None:  # what fits goes now, without a scheduler pass
                try:
                    sent = self._raw_out.send(data)
                except BlockingIOError:
                    pass
                if sent == len(data):
                    self.bytes_sent += sent
                    return
            await self._sink.send_all(memoryview(data)[sent:] if sent else data)
        except _BROKEN as exc:
            raise ConnectionClosed("connection broken while writing") from exc
        self.bytes_sent += len(data)

    async def send_bytes(self, data: Line) -> None:
        """Queue ``data`` for the writer, waiting while the queue is full."""
        self._writer_waiting = False  # before the line is handed over (see _write_if_idle)
        try:
            await self._send.send(data)
        except (trio.ClosedResourceError, trio.BrokenResourceError) as exc:
            raise ConnectionClosed("connection closed") from exc

    def queue_nowait(self, data: Line) -> None:
        """Queue ``data`` without a scheduler pass (``send_bytes`` always makes one).

        Raises trio.WouldBlock if the queue is full, ConnectionClosed if it is closed.
        """
        self._writer_waiting = False
        try:
            self._send.send_nowait(data)
        except (trio.ClosedResourceError, trio.BrokenResourceError) as exc:
            raise ConnectionClosed("connection closed") from exc

    def write_nowait(self, data: bytes) -> None:
        """Write ``data`` now when the writer is idle, else queue it (as :meth:`queue_nowait`).

        For a caller that knows nothing else is about to be queued (the one call in flight
        answering, a relay forwarding what one read brought): the bytes go out in this step,
        without waking the writer for a scheduler pass of its own. "Idle" means the writer
        waits for a line with nothing queued (the stream is not being written, nothing is
        ahead of ``data``); it stays the one writer whenever anything is queued. Over a stream
        without straight writes (TLS, memory), or when the socket takes only part, the rest
        is queued; a broken stream is left for the writer to find (it aborts as usual).

        Raises trio.WouldBlock if the queue is full, ConnectionClosed if it is closed.
        """
        rest = self._write_if_idle(data)
        if rest is not None:
            self.queue_nowait(rest)

    def _write_if_idle(self, data: Line) -> Line | None:
        """Write ``data`` now if the writer is idle (see :meth:`write_nowait`): None when all
        of it went out, else what is left to queue (all of it when the writer is not idle)."""
        raw = self._raw_out
        if raw is None or type(data) is not bytes or self._overflow or self.closed_reason is not None:
            return data  # (a line in parts is the writer's: its large parts go from their buffers)
        if not self._writer_waiting:
            return data
        try:
            sent = raw.send(data)
        except OSError:  # BlockingIOError included: the writer sends it (or finds the error)
            return data
        self.bytes_sent += sent
        return None if sent == len(data) else data[sent:]

    def _written_through(self, data: Line) -> Line | None:
        """Inside :func:`write_through` (this thread, this task): :meth:`_write_if_idle`;
        elsewhere ``data`` unchanged (it is queued)."""
        task = _through.task
        if task is None or task is not trio.lowlevel.current_task():
            return data
        return self._write_if_idle(data)

    def send_bytes_nowait(self, data: Line) -> bool:
        """Queue ``data`` if there is room; False (dropped) if the peer is not keeping up."""
        rest = self._written_through(data)
        if rest is None:
            return True
        self._writer_waiting = False
        try:
            self._send.send_nowait(rest)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            return False
        return True

    def send_bytes_reliable_nowait(self, data: Line) -> bool:
        """Queue a line that must not be lost to a full queue, without waiting.

        For lines whose number is bounded elsewhere (``max_overflow``: the daemon's calls in
        flight). It goes into the channel if there is room; otherwise into a side queue that the
        writer sends ahead of its next batch (the writer is busy then, so it comes round soon).
        False if the channel is closed, or that side queue is full too.
        """
        rest = self._written_through(data)
        if rest is None:
            return True
        data = rest
        self._writer_waiting = False
        try:
            self._send.send_nowait(data)
            return True
        except trio.WouldBlock:
            pass
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            return False
        if len(self._overflow) >= self._max_overflow:
            _log.warning("reliable_message_dropped", conn_id=self.id)
            return False
        self._overflow.append(data)
        return True

    def _take_overflow(self) -> list[Line]:
        taken = list(self._overflow)
        self._overflow.clear()
        return taken

    def finish_sending(self) -> None:
        """No more lines: the writer sends what is queued, then exits."""
        self._writer_waiting = False
        self._send.close()

    def close_after_flush(self, reason: str) -> None:
        """Send what is queued (a fatal error, say), then end the connection."""
        if self.closed_reason is None:
            self.closed_reason = reason
        self._end_when_flushed = True
        self._writer_waiting = False
        self._send.close()

    def close_queue(self) -> None:
        """Stop the writer and refuse queued and later lines (ConnectionClosed; False when nowait).

        What is still queued is not sent; a writer waiting for a line raises
        ``trio.ClosedResourceError``.
        """
        self._writer_waiting = False
        self._outbound.close()

    def abort(self, reason: str) -> None:
        """End the connection now (``scope`` is cancelled)."""
        if self.closed_reason is None:
            self.closed_reason = reason
        self.scope.cancel()

    async def run_writer(self) -> None:
        """The one writer: sends queued lines until :meth:`finish_sending` and the queue is empty."""
        async with self._outbound:
            while True:
                try:
                    first = self._outbound.receive_nowait()
                except trio.WouldBlock:
                    # Nothing queued: wait, marked as waiting until a line is put in the
                    # channel (every path that does clears the mark first: _write_if_idle).
                    self._writer_waiting = True
                    try:
                        first = await self._outbound.receive()
                    except trio.EndOfChannel:
                        break
                    finally:
                        self._writer_waiting = False
                except trio.EndOfChannel:
                    break
                else:
                    await trio.lowlevel.checkpoint()  # as receive() would: one pass per batch
                chunks = [*self._take_overflow(), first]
                size = sum(map(len, chunks))  # (a SplitLine's len is its bytes)
                if (self._outbound.statistics().current_buffer_used == 0
                        and trio.lowlevel.current_statistics().tasks_runnable):
                    # Let the tasks that are ready to run queue their lines too (a burst of
                    # responses resolves many calls at once): one send for the lot. With none
                    # ready (one call at a time) the extra scheduler pass would only add latency.
                    await trio.lowlevel.cancel_shielded_checkpoint()
                while size < COALESCE_BYTES:
                    try:
                        more = self._outbound.receive_nowait()
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                    chunks.append(more)
                    size += len(more)
                segments: list[bytes | bytearray | memoryview]
                if all(type(chunk) is bytes for chunk in chunks):
                    data = cast(bytes, b"".join(chunks) if len(chunks) > 1 else first)  # type: ignore[arg-type]
                    sent = 0
                    if self._raw_out is not None:
                        # What fits goes now, without send_all's scheduler passes; the rest below.
                        try:
                            sent = self._raw_out.send(data)
                        except BlockingIOError:
                            pass
                        except OSError as exc:
                            self._write_failed(exc)
                            return
                        if sent == size:
                            self.bytes_sent += size
                            chunks.clear()
                            first = data = b""
                            continue
                    segments = [memoryview(data)[sent:] if sent else data]
                else:  # a line in parts: its large parts straight from their buffers, never joined
                    segments = _segments(chunks)
                with trio.move_on_after(self._write_timeout) as timeout:
                    try:
                        for segment in segments:
                            await self._sink.send_all(segment)
                    except _BROKEN as exc:
                        self._write_failed(exc)
                        return
                    self.bytes_sent += size
                # What was sent is not kept alive while the writer waits for the next line (a
                # large result would stay in memory until then).
                chunks.clear()
                segments.clear()
                first = data = b""
                if timeout.cancelled_caught:
                    _log.warning("peer_not_reading", conn_id=self.id, seconds=self._write_timeout)
                    self.abort(f"the peer did not read for {self._write_timeout:g} s")
                    return
        if self._end_when_flushed:
            self.scope.cancel()

    def _write_failed(self, exc: Exception) -> None:
        """The stream broke under the writer (subclasses word the reason their own way)."""
        self.abort("connection broken while writing")


class LineChannel(LineReader, LineWriter):
    """Lines in and out of one trio stream (see the module docstring)."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        outbound_queue: int = 64,
        max_overflow: int = 4096,
        write_timeout: float | None = None,
    ) -> None:
        LineReader.__init__(self, stream, max_line_bytes=max_line_bytes)
        LineWriter.__init__(self, stream, outbound_queue=outbound_queue, max_overflow=max_overflow,
                            write_timeout=write_timeout)
        self.stream = stream

    async def aclose(self) -> None:
        """Close the stream (safe to call more than once, even when cancelled)."""
        await trio.aclose_forcefully(self.stream)
