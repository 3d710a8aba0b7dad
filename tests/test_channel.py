"""app_client.channel.LineChannel: framing in, one bounded batching writer out."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from app_client.channel import COALESCE_BYTES, LineChannel, LineReader, LineWriter
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
