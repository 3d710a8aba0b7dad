"""The per-request outbox between an MCP session and its HTTP response (``http._ResponseOutbox``)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from broker.mcp.http import _ResponseOutbox


async def test_messages_arrive_in_order_then_the_end() -> None:
    outbox = _ResponseOutbox(size=4)
    assert outbox.send_nowait(b"note")
    await outbox.send(b"answer", final=True)
    outbox.close()
    assert await outbox.receive() == (False, b"note")
    assert await outbox.receive() == (True, b"answer")
    with pytest.raises(trio.EndOfChannel):
        await outbox.receive()
    assert not outbox.send_nowait(b"late")  # closed: refused, as a closed channel did


async def test_a_waiting_receiver_is_handed_the_message_and_the_end() -> None:
    outbox = _ResponseOutbox(size=4)
    got: list[Any] = []

    async def receive_all() -> None:
        try:
            while True:
                got.append(await outbox.receive())
        except trio.EndOfChannel:
            got.append("end")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receive_all)
        await trio.testing.wait_all_tasks_blocked()
        assert outbox.send_final_nowait(b"answer")
        await trio.testing.wait_all_tasks_blocked()
        outbox.close()
    assert got == [(True, b"answer"), "end"]


async def test_a_full_outbox_makes_send_wait_and_nowait_refuse() -> None:
    outbox = _ResponseOutbox(size=2)
    assert outbox.send_nowait(b"1") and outbox.send_nowait(b"2")
    assert not outbox.send_nowait(b"3")
    assert not outbox.send_final_nowait(b"final")  # the session then waits for room
    sent = trio.Event()

    async def send_third() -> None:
        await outbox.send(b"3")
        sent.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_third)
        await trio.testing.wait_all_tasks_blocked()
        assert not sent.is_set()
        assert await outbox.receive() == (False, b"1")
        await sent.wait()
    assert [await outbox.receive() for _ in range(2)] == [(False, b"2"), (False, b"3")]


async def test_a_cancelled_receive_loses_nothing() -> None:
    outbox = _ResponseOutbox(size=2)
    with trio.move_on_after(0.01):
        await outbox.receive()
    assert outbox.send_final_nowait(b"answer")  # queued, not handed to the cancelled receiver
    assert await outbox.receive() == (True, b"answer")


async def test_after_the_response_is_gone_sends_are_dropped() -> None:
    outbox = _ResponseOutbox(size=1)
    assert outbox.send_nowait(b"1")
    blocked_send_returned = trio.Event()

    async def send_more() -> None:
        await outbox.send(b"2")  # waits for room
        blocked_send_returned.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_more)
        await trio.testing.wait_all_tasks_blocked()
        outbox.drop()
        await blocked_send_returned.wait()
    assert outbox.send_final_nowait(b"final")  # nothing to wait for
    assert not outbox.send_nowait(b"note")
    await outbox.send(b"more")  # returns at once
