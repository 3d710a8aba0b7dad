"""app_client.channel.LineChannel: framing in, one bounded batching writer out."""

from __future__ import annotations

import os
import socket
from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

from app_client.channel import COALESCE_BYTES, LineChannel, LineReader, LineWriter, write_through
from app_client.errors import ConnectionClosed, RemoteProtocolError


class _CountingStream(trio.abc.Stream):
    """Wraps a stream and records the size of every send_all."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.writes: list[int] = []

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(len(data))
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_lines_split_across_reads_and_counted() -> None:
    left, right = trio.testing.memory_stream_pair()
    channel = LineChannel(right)
    before = channel.last_received
    await left.send_all(b'{"a":1}\n{"b"')
    assert await channel.receive_line() == b'{"a":1}'
    assert channel.receive_line_nowait() is None
    await left.send_all(b':2}\r\n\n')
    assert await channel.receive_line() == b'{"b":2}'  # CRLF stripped, empty line skipped
    assert channel.bytes_received == len(b'{"a":1}\n{"b"') + len(b':2}\r\n\n')
    assert channel.last_received >= before


async def test_line_too_long_then_usable() -> None:
    left, right = trio.testing.memory_stream_pair()
    channel = LineChannel(right, max_line_bytes=100)
    await left.send_all(b'{"correlationId":7,"x":"' + b"y" * 300 + b'"}\n{"ok":1}\n')
    with pytest.raises(RemoteProtocolError) as info:
        await channel.receive_line()
    assert info.value.code == "line_too_long"
    assert info.value.correlation_id == 7
    assert await channel.receive_line() == b'{"ok":1}'


async def test_end_of_stream_and_broken_stream_are_connection_closed() -> None:
    left, right = trio.testing.memory_stream_pair()
    channel = LineChannel(right)
    await left.send_all(b"last\n")
    await left.aclose()
    assert await channel.receive_line() == b"last"
    with pytest.raises(ConnectionClosed, match="closed by peer"):
        await channel.receive_line()
    await right.aclose()
    with pytest.raises(ConnectionClosed, match="broken"):
        await channel.receive_line()


async def test_a_batch_is_every_line_one_read_brought_with_overlong_lines_in_place() -> None:
    send, receive = trio.testing.memory_stream_one_way_pair()
    reader = LineReader(receive, max_line_bytes=20)  # a receive-only stream, like a relay's stdin
    await send.send_all(b'{"a":1}\n' + b"x" * 50 + b'\n{"b":2}\n{"c"')
    batch = await reader.receive_batch()
    assert batch[0] == b'{"a":1}' and batch[2] == b'{"b":2}' and len(batch) == 3
    assert isinstance(batch[1], RemoteProtocolError) and batch[1].code == "line_too_long"
    await send.send_all(b":3}\n")
    assert await reader.receive_batch() == [b'{"c":3}']  # the rest of the line, in the next read


@pytest.mark.parametrize("last_line_at_eof", [True, False])
async def test_a_batch_at_the_end_of_the_stream(last_line_at_eof: bool) -> None:
    send, receive = trio.testing.memory_stream_one_way_pair()
    reader = LineReader(receive)
    await send.send_all(b'{"a":1}\n{"unterminated":2}')
    await send.aclose()
    assert await reader.receive_batch(last_line_at_eof=last_line_at_eof) == [b'{"a":1}']
    if last_line_at_eof:  # an agent's stdin: a last line without its newline counts
        assert await reader.receive_batch(last_line_at_eof=True) == [b'{"unterminated":2}']
    with pytest.raises(ConnectionClosed):  # a peer cut off mid-line: the partial line is dropped
        await reader.receive_batch(last_line_at_eof=last_line_at_eof)


class _FailingSink(trio.abc.SendStream):
    """A pipe whose reader is gone, as a relay's stdout behind a worker thread reports it."""

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        raise OSError(32, "Broken pipe")

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


async def test_a_writer_alone_on_a_send_only_stream() -> None:
    send, receive = trio.testing.memory_stream_one_way_pair()
    writer = LineWriter(send)
    await writer.send_bytes(b"a\n")
    await writer.send_bytes(b"b\n")
    writer.finish_sending()
    await writer.run_writer()  # sends what is queued, then returns
    assert await receive.receive_some() == b"a\nb\n" and writer.closed_reason is None
    broken = LineWriter(_FailingSink())
    await broken.send_bytes(b"lost\n")
    await broken.run_writer()  # an OSError ends the writer like a broken socket does
    assert broken.closed_reason == "connection broken while writing"


async def test_writer_coalesces_queued_lines_into_one_write() -> None:
    left, right = trio.testing.memory_stream_pair()
    counting = _CountingStream(right)
    channel = LineChannel(counting, outbound_queue=100)
    for i in range(50):
        assert channel.send_bytes_nowait(b"line %d\n" % i)
    channel.finish_sending()
    await channel.run_writer()
    assert len(counting.writes) == 1
    reader = LineChannel(left)
    assert [await reader.receive_line() for _ in range(50)] == [b"line %d" % i for i in range(50)]


async def test_writer_caps_a_write_at_coalesce_bytes() -> None:
    _left, right = trio.testing.memory_stream_pair()
    counting = _CountingStream(right)
    channel = LineChannel(counting, outbound_queue=100)
    line = b"x" * (64 * 1024 - 1) + b"\n"
    for _ in range(8):
        assert channel.send_bytes_nowait(line)
    channel.finish_sending()
    await channel.run_writer()
    assert counting.writes == [COALESCE_BYTES, COALESCE_BYTES]


async def test_writer_yields_once_so_runnable_tasks_join_the_batch() -> None:
    _left, right = trio.testing.memory_stream_pair()
    counting = _CountingStream(right)
    channel = LineChannel(counting)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(channel.run_writer)
        await trio.testing.wait_all_tasks_blocked()

        async def queue(n: int) -> None:
            await channel.send_bytes(b"%d\n" % n)

        for n in range(5):
            nursery.start_soon(queue, n)  # all runnable when the writer wakes to the first line
        await trio.testing.wait_all_tasks_blocked()
        channel.finish_sending()
    assert counting.writes == [10]


async def test_full_queue_back_pressure_drop_and_reliable_side_queue() -> None:
    left, right = trio.testing.lockstep_stream_pair()
    channel = LineChannel(right, outbound_queue=1, max_overflow=2)
    assert channel.send_bytes_nowait(b"a\n")
    assert not channel.send_bytes_nowait(b"dropped\n")  # queue full: dropped
    assert channel.send_bytes_reliable_nowait(b"r1\n")  # held beside the queue
    assert channel.send_bytes_reliable_nowait(b"r2\n")
    assert not channel.send_bytes_reliable_nowait(b"r3\n")  # side queue full too
    with trio.testing.assert_checkpoints(), trio.move_on_after(0.05) as waited:
        await channel.send_bytes(b"b\n")  # waits: the queue is full and nobody writes
    assert waited.cancelled_caught
    reader = LineChannel(left)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(channel.run_writer)
        # The side queue goes out ahead of the batch it was held beside.
        assert [await reader.receive_line() for _ in range(3)] == [b"r1", b"r2", b"a"]
        await channel.send_bytes(b"b\n")
        assert await reader.receive_line() == b"b"
        channel.finish_sending()
    assert channel.closed_reason is None
    assert not channel.scope.cancel_called
    assert not channel.send_bytes_nowait(b"late\n")
    assert not channel.send_bytes_reliable_nowait(b"late\n")
    with pytest.raises(ConnectionClosed):
        await channel.send_bytes(b"late\n")


async def test_peer_not_reading_aborts_after_write_timeout(autojump_clock: trio.testing.MockClock) -> None:
    _left, right = trio.testing.lockstep_stream_pair()  # nobody reads the other end
    channel = LineChannel(right, write_timeout=5)
    assert channel.send_bytes_nowait(b"stuck\n")
    start = trio.current_time()
    await channel.run_writer()
    assert trio.current_time() - start == pytest.approx(5)
    assert channel.closed_reason == "the peer did not read for 5 s"
    assert channel.scope.cancel_called


async def test_broken_stream_while_writing_aborts() -> None:
    left, right = trio.testing.memory_stream_pair()
    await left.aclose()
    await right.aclose()
    channel = LineChannel(right)
    assert channel.send_bytes_nowait(b"x\n")
    await channel.run_writer()
    assert channel.closed_reason == "connection broken while writing"
    assert channel.scope.cancel_called


async def test_close_after_flush_sends_then_cancels_scope() -> None:
    left, right = trio.testing.memory_stream_pair()
    channel = LineChannel(right)
    assert channel.send_bytes_nowait(b"fatal\n")
    channel.close_after_flush("bye")
    await channel.run_writer()
    assert channel.closed_reason == "bye"
    assert channel.scope.cancel_called
    assert await LineChannel(left).receive_line() == b"fatal"


async def test_send_direct_before_the_writer_and_aclose() -> None:
    left, right = trio.testing.memory_stream_pair()
    channel = LineChannel(right)
    await channel.send_direct(b"hello\n")
    assert await LineChannel(left).receive_line() == b"hello"
    await channel.aclose()
    await channel.aclose()  # twice is fine
    with pytest.raises(ConnectionClosed):
        await channel.send_direct(b"again\n")


async def test_queue_nowait_and_close_queue() -> None:
    _left, right = trio.testing.memory_stream_pair()
    channel = LineChannel(right, outbound_queue=1)
    channel.queue_nowait(b"a\n")
    with pytest.raises(trio.WouldBlock):
        channel.queue_nowait(b"b\n")
    async with trio.open_nursery() as nursery:

        async def blocked_sender() -> None:
            with pytest.raises(ConnectionClosed):
                await channel.send_bytes(b"c\n")

        nursery.start_soon(blocked_sender)
        await trio.testing.wait_all_tasks_blocked()
        channel.close_queue()  # the waiting sender is refused
    with pytest.raises(ConnectionClosed):
        channel.queue_nowait(b"d\n")
    assert not channel.send_bytes_nowait(b"e\n")
    with pytest.raises(trio.ClosedResourceError):
        await channel.run_writer()


async def test_an_oversized_agent_connect_reply_is_a_clear_error_not_a_crash() -> None:
    """The handshake's reply over the line limit used to escape as a raw RemoteProtocolError (the
    stdio relay, which did not catch it, would crash); it is DaemonUnavailable like any bad reply."""
    from broker.cli.daemon_client import DaemonUnavailable, agent_connect

    ours, theirs = trio.testing.memory_stream_pair()
    channel = LineChannel(ours, max_line_bytes=1024)

    async def daemon() -> None:
        await theirs.receive_some(65536)  # the agentConnect line
        await theirs.send_all(b"x" * 4096 + b"\n")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(daemon)
        with pytest.raises(DaemonUnavailable, match="unexpected reply"):
            await agent_connect(channel, "token", timeout=5)


# --- plain sockets and pipes: reads and writes straight on the handle (performance round 4) ----


class _StepCounter(trio.abc.Instrument):
    """Counts each task's steps (one step: from being scheduled to its next wait)."""

    def __init__(self) -> None:
        self.steps: dict[trio.lowlevel.Task, int] = {}

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps[task] = self.steps.get(task, 0) + 1


def _socket_stream_pair() -> tuple[trio.SocketStream, socket.socket]:
    """A trio SocketStream and the blocking standard-library socket at its other end."""
    ours, theirs = socket.socketpair()
    theirs.settimeout(5)
    return trio.SocketStream(trio.socket.from_stdlib_socket(ours)), theirs


def _receive_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the other end closed early"
        data += chunk
    return data


async def test_one_line_each_way_over_a_socket_is_one_task_step() -> None:
    """Over a plain socket, the writer sends a line in the step it wakes in (trio's send_all
    makes a second scheduler pass after its send: one call at a time pays it on every message,
    in every process of the relay), and the reader takes one in the step it wakes in."""
    stream, peer = _socket_stream_pair()
    channel = LineChannel(stream)
    counter = _StepCounter()
    trio.lowlevel.add_instrument(counter)
    try:
        async with trio.open_nursery() as nursery:
            writer = await _started_task(nursery, channel.run_writer)
            received: list[bytes] = []

            async def read() -> None:
                received.append(await channel.receive_line())

            reader = await _started_task(nursery, read)
            await trio.testing.wait_all_tasks_blocked(0.01)
            counter.steps.clear()
            assert channel.send_bytes_nowait(b'{"out":1}\n')
            await trio.testing.wait_all_tasks_blocked(0.01)
            assert counter.steps.get(writer) == 1
            assert _receive_exactly(peer, 10) == b'{"out":1}\n'
            peer.sendall(b'{"in":1}\n')
            with trio.fail_after(5):
                while not received:
                    await trio.sleep(0.001)
            assert received == [b'{"in":1}']
            assert counter.steps.get(reader) == 1
            channel.finish_sending()
    finally:
        trio.lowlevel.remove_instrument(counter)
        peer.close()
        await stream.aclose()


async def test_a_peer_answering_one_line_at_a_time_costs_few_failed_reads() -> None:
    """When lines come one at a time (the peer waits for us), trying a read before waiting
    finds nothing every time: after one such miss the reader waits first for a few reads, so
    20 lines cost at most a few failed reads instead of 20 (daemon, relay and app alike)."""
    stream, peer = _socket_stream_pair()
    channel = LineChannel(stream)
    raw = channel._raw_in
    assert raw is not None
    misses = 0
    recv = raw.recv

    def counting_recv(size: int) -> bytes:
        nonlocal misses
        try:
            return recv(size)
        except BlockingIOError:
            misses += 1
            raise

    raw.recv = counting_recv
    try:
        received: list[bytes] = []
        async with trio.open_nursery() as nursery:

            async def read() -> None:
                for _ in range(20):
                    received.append(await channel.receive_line())

            nursery.start_soon(read)
            for index in range(20):
                await trio.testing.wait_all_tasks_blocked(0.001)  # the reader waits: nothing is there
                peer.sendall(b'{"n":%d}\n' % index)
                with trio.fail_after(5):
                    while len(received) <= index:
                        await trio.sleep(0)
        assert received == [b'{"n":%d}' % index for index in range(20)]
        assert misses <= 3, misses  # 20 before: one failed read per line
    finally:
        peer.close()
        await stream.aclose()


async def _started_task(nursery: trio.Nursery, fn: Callable[[], Awaitable[object]]) -> trio.lowlevel.Task:
    """Start ``fn`` in ``nursery`` and return its task."""

    async def run(task_status: trio.TaskStatus[trio.lowlevel.Task] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started(trio.lowlevel.current_task())
        await fn()

    task: trio.lowlevel.Task = await nursery.start(run)
    return task


async def test_a_write_larger_than_the_socket_takes_goes_out_whole_and_in_order() -> None:
    """What the socket does not take at once goes through send_all (the write timeout holds)."""
    stream, peer = _socket_stream_pair()
    channel = LineChannel(stream, outbound_queue=8)
    big = b"x" * (3 * 1024 * 1024) + b"\n"  # more than any socket buffer takes in one send
    async with trio.open_nursery() as nursery:
        nursery.start_soon(channel.run_writer)
        assert channel.send_bytes_nowait(big)
        assert channel.send_bytes_nowait(b"after\n")
        channel.finish_sending()
        got = await trio.to_thread.run_sync(_receive_exactly, peer, len(big) + 6)
    assert got == big + b"after\n"
    assert channel.bytes_sent == len(big) + 6 and channel.closed_reason is None
    # send_direct, too: what does not fit goes through send_all.
    async with trio.open_nursery() as nursery:
        nursery.start_soon(channel.send_direct, big)
        assert await trio.to_thread.run_sync(_receive_exactly, peer, len(big)) == big
    peer.close()
    await stream.aclose()


async def test_socket_reads_in_full_buffers_lines_end_of_stream_and_a_closed_stream() -> None:
    stream, peer = _socket_stream_pair()
    channel = LineChannel(stream)
    lines = [b'{"n":%d,"pad":"%s"}' % (i, b"p" * 1000) for i in range(300)]  # > one READ_SIZE
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.to_thread.run_sync, peer.sendall, b"\n".join(lines) + b"\n")
        assert [await channel.receive_line() for _ in lines] == lines
    peer.close()
    with pytest.raises(ConnectionClosed):
        await channel.receive_line()
    # A stream closed under a waiting reader wakes it with ConnectionClosed.
    stream2, peer2 = _socket_stream_pair()
    channel2 = LineChannel(stream2)
    async with trio.open_nursery() as nursery:

        async def read() -> None:
            with pytest.raises(ConnectionClosed):
                await channel2.receive_line()

        nursery.start_soon(read)
        await trio.testing.wait_all_tasks_blocked()
        await stream2.aclose()
    peer2.close()
    await stream.aclose()


async def test_broken_socket_under_the_writer_aborts() -> None:
    stream, peer = _socket_stream_pair()
    peer.close()
    channel = LineChannel(stream)
    for _ in range(3):  # the first send may still succeed; a later one finds the peer gone
        assert channel.send_bytes_nowait(b"x" * 100_000 + b"\n")
    channel.finish_sending()
    await channel.run_writer()
    assert channel.closed_reason == "connection broken while writing"
    assert channel.scope.cancel_called
    await stream.aclose()


@pytest.mark.skipif(not hasattr(trio.lowlevel, "FdStream"), reason="pipes as trio streams are POSIX only")
async def test_pipes_read_and_written_straight() -> None:
    """A relay's stdin and stdout are pipes (``FdStream``): the same straight reads and writes."""
    r, w = os.pipe()
    source, sink = trio.lowlevel.FdStream(r), trio.lowlevel.FdStream(w)
    reader, writer = LineReader(source), LineWriter(sink)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.run_writer)
        for i in range(3):
            await writer.send_bytes(b"%d\n" % i)
        assert [await reader.receive_line() for _ in range(3)] == [b"0", b"1", b"2"]
        big = b"y" * 1_000_000 + b"\n"  # more than a pipe holds: the rest goes through send_all
        await writer.send_bytes(big)
        assert await reader.receive_line() == big[:-1]
        writer.finish_sending()
    await sink.aclose()
    with pytest.raises(ConnectionClosed):
        await reader.receive_line()
    await source.aclose()
    with pytest.raises(ConnectionClosed):  # a closed pipe: the read fails cleanly
        await reader.receive_line()


async def test_write_nowait_writes_at_once_when_the_writer_is_idle_else_queues_in_order() -> None:
    """``write_nowait`` (the one call in flight answering; a relay forwarding one read) writes
    in the caller's step when the writer waits with nothing queued, and never overtakes a
    queued line: otherwise it queues like ``queue_nowait``."""
    stream, peer = _socket_stream_pair()
    channel = LineChannel(stream)
    counter = _StepCounter()
    trio.lowlevel.add_instrument(counter)
    try:
        async with trio.open_nursery() as nursery:
            writer = await _started_task(nursery, channel.run_writer)
            await trio.testing.wait_all_tasks_blocked(0.01)
            counter.steps.clear()
            channel.write_nowait(b"now\n")
            assert _receive_exactly(peer, 4) == b"now\n"  # already sent: no step of the writer
            await trio.testing.wait_all_tasks_blocked(0.01)
            assert writer not in counter.steps
            channel.queue_nowait(b"first\n")  # the writer has a line to send: this waits behind it
            channel.write_nowait(b"second\n")
            await trio.testing.wait_all_tasks_blocked(0.01)
            assert _receive_exactly(peer, 13) == b"first\nsecond\n"
            assert channel.bytes_sent == 17
            channel.finish_sending()
        with pytest.raises(ConnectionClosed):
            channel.write_nowait(b"late\n")  # the queue is closed
    finally:
        trio.lowlevel.remove_instrument(counter)
        peer.close()
        await stream.aclose()
    # Over a stream without straight writes (memory, TLS) it only queues.
    left, right = trio.testing.memory_stream_pair()
    memory = LineChannel(right)
    memory.write_nowait(b"queued\n")
    memory.finish_sending()
    await memory.run_writer()
    assert await LineChannel(left).receive_line() == b"queued"


async def test_writers_woken_by_one_step_do_not_wait_for_each_other() -> None:
    """The daemon's app reader, handling one answer, queues the reply to the agent and the next
    invocation to the app in one step: each writer sends in the one step it wakes in (their
    coalescing pass waits only for tasks ready to run after them, which the other writer is not)."""
    (stream_a, peer_a), (stream_b, peer_b) = _socket_stream_pair(), _socket_stream_pair()
    a, b = LineChannel(stream_a), LineChannel(stream_b)
    counter = _StepCounter()
    trio.lowlevel.add_instrument(counter)
    try:
        async with trio.open_nursery() as nursery:
            writer_a = await _started_task(nursery, a.run_writer)
            writer_b = await _started_task(nursery, b.run_writer)
            await trio.testing.wait_all_tasks_blocked(0.01)
            counter.steps.clear()
            assert a.send_bytes_reliable_nowait(b"reply\n") and b.send_bytes_nowait(b"next\n")
            await trio.testing.wait_all_tasks_blocked(0.01)
            assert (counter.steps.get(writer_a), counter.steps.get(writer_b)) == (1, 1)
            assert _receive_exactly(peer_a, 6) == b"reply\n" and _receive_exactly(peer_b, 5) == b"next\n"
            # A producer still ready to run is waited for (its line joins the write; in order).

            async def produce() -> None:
                a.queue_nowait(b"2\n")

            a.queue_nowait(b"1\n")
            nursery.start_soon(produce)
            await trio.testing.wait_all_tasks_blocked(0.01)
            assert _receive_exactly(peer_a, 4) == b"1\n2\n"
            a.finish_sending()
            b.finish_sending()
    finally:
        trio.lowlevel.remove_instrument(counter)
        for closing in (peer_a, peer_b):
            closing.close()
        await stream_a.aclose()
        await stream_b.aclose()


async def test_write_through_writes_a_readers_last_answers_at_once_and_only_for_its_task() -> None:
    """``write_through`` (a reader handling the last line of a read): lines for idle writers go
    out in the reader's step; lines for a busy writer queue behind what it has (order kept);
    outside the block, or from another task while the block awaits, lines queue as usual."""
    stream, peer = _socket_stream_pair()
    channel = LineChannel(stream)
    counter = _StepCounter()
    trio.lowlevel.add_instrument(counter)
    try:
        async with trio.open_nursery() as nursery:
            writer = await _started_task(nursery, channel.run_writer)
            await trio.testing.wait_all_tasks_blocked(0.01)
            counter.steps.clear()
            with write_through():
                assert channel.send_bytes_reliable_nowait(b"reply\n")
                assert _receive_exactly(peer, 6) == b"reply\n"  # written in this step
                assert channel.send_bytes_nowait(b"next\n")
                assert _receive_exactly(peer, 5) == b"next\n"
            await trio.testing.wait_all_tasks_blocked(0.01)
            assert writer not in counter.steps  # the writer never woke
            channel.queue_nowait(b"queued\n")
            with write_through():
                assert channel.send_bytes_nowait(b"behind\n")  # the writer has a line: behind it
            with write_through(False):
                assert channel.send_bytes_nowait(b"later\n")
            await trio.testing.wait_all_tasks_blocked(0.01)
            assert _receive_exactly(peer, 20) == b"queued\nbehind\nlater\n"
            counter.steps.clear()

            async def other_task() -> None:
                assert channel.send_bytes_nowait(b"other\n")

            with write_through():
                nursery.start_soon(other_task)
                await trio.testing.wait_all_tasks_blocked(0.01)  # the block awaits: not lent
            assert counter.steps.get(writer) == 1
            assert _receive_exactly(peer, 6) == b"other\n"
            channel.finish_sending()
    finally:
        trio.lowlevel.remove_instrument(counter)
        peer.close()
        await stream.aclose()


async def test_read_drained_says_whether_the_line_taken_was_the_last_of_the_read() -> None:
    left, right = trio.testing.memory_stream_pair()
    channel = LineChannel(right)
    await left.send_all(b"a\nb\n")
    assert await channel.receive_line() == b"a" and not channel.read_drained
    assert await channel.receive_line() == b"b" and channel.read_drained
    await left.send_all(b"c\nd")  # a partial line is still to come: not drained
    assert await channel.receive_line() == b"c" and not channel.read_drained


async def test_write_through_blocks_of_two_tasks_interleaving_never_leave_the_mode_set() -> None:
    from app_client.channel import _through  # noqa: PLC0415 - the mode's holder, to check it is cleared

    first_in, second_in, first_out = trio.Event(), trio.Event(), trio.Event()

    async def first() -> None:
        with write_through():
            first_in.set()
            await second_in.wait()
        first_out.set()

    async def second() -> None:
        await first_in.wait()
        with write_through():
            second_in.set()
            await first_out.wait()
            assert _through.task is trio.lowlevel.current_task()  # the first's exit left it alone

    async with trio.open_nursery() as nursery:
        nursery.start_soon(first)
        nursery.start_soon(second)
    assert _through.task is None
