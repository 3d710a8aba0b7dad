"""The outbox of one HTTP response: the messages a session produces for it, in order.

Split out of ``http`` (which streams them into the response); see :class:`ResponseOutbox`.
"""

from __future__ import annotations

import collections
from typing import Any, Final

import outcome
import trio

__all__ = ["ResponseOutbox", "NullOutbox", "OUTBOX_SIZE"]

#: Messages queued for one response before the session waits (a slow client).
OUTBOX_SIZE: Final = 64


class ResponseOutbox:
    """One response's messages, ``(final, data)`` pairs, from a session to the HTTP response.

    A bounded queue with one receiver (the response) that is woken directly: what a trio
    memory channel did here, without opening one per request (~14 µs each, a fifth of an HTTP
    exchange's own cost). The session's side is :class:`request_context.Outbox`; :meth:`close` ends
    the messages (the receiver then gets ``trio.EndOfChannel``), :meth:`drop` is the response
    going away (later messages are dropped, as sends into a closed channel were).
    """

    def __init__(self, size: int = OUTBOX_SIZE) -> None:
        self._items: collections.deque[tuple[bool, bytes]] = collections.deque()
        self._size = size
        self._ended = False  # the session closed it: no more messages
        self._dropped = False  # the response is gone
        self._receiver: trio.lowlevel.Task | None = None
        self._room: trio.Event | None = None  # set when a full queue gets room

    # --- the session's side --------------------------------------------------------------

    async def send(self, data: bytes, *, final: bool = False) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        while not self._put((final, data)):
            if self._room is None:
                self._room = trio.Event()
            await self._room.wait()
        await trio.lowlevel.cancel_shielded_checkpoint()

    def send_nowait(self, data: bytes) -> bool:
        if self._ended or self._dropped:
            return False
        return self._put((False, data))

    def send_final_nowait(self, data: bytes) -> bool:
        return self._put((True, data))  # True too when the response is gone: nothing to wait for

    def close(self) -> None:
        self._ended = True
        if self._receiver is not None:
            task, self._receiver = self._receiver, None
            trio.lowlevel.reschedule(task, outcome.Error(trio.EndOfChannel()))

    def _put(self, item: tuple[bool, bytes]) -> bool:
        """Queue ``item`` (or hand it to the waiting receiver); False when the queue is full."""
        if self._ended or self._dropped:
            return True  # dropped
        if self._receiver is not None:
            task, self._receiver = self._receiver, None
            trio.lowlevel.reschedule(task, outcome.Value(item))
            return True
        if len(self._items) >= self._size:
            return False
        self._items.append(item)
        return True

    # --- the response's side -------------------------------------------------------------

    async def receive(self) -> tuple[bool, bytes]:
        """The next message. Raises ``trio.EndOfChannel`` once closed and emptied."""
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._items or self._ended:
            if not self._items:
                await trio.lowlevel.cancel_shielded_checkpoint()
                raise trio.EndOfChannel
            item = self._items.popleft()
            if self._room is not None:
                self._room.set()
                self._room = None
            await trio.lowlevel.cancel_shielded_checkpoint()
            return item
        self._receiver = trio.lowlevel.current_task()

        def abort(_: Any) -> trio.lowlevel.Abort:
            self._receiver = None
            return trio.lowlevel.Abort.SUCCEEDED

        handed: tuple[bool, bytes] = await trio.lowlevel.wait_task_rescheduled(abort)
        return handed

    def drop(self) -> None:
        """The response is gone: drop what is queued and whatever comes later."""
        self._dropped = True
        self._items.clear()
        if self._room is not None:
            self._room.set()
            self._room = None


class NullOutbox:
    async def send(self, data: bytes, *, final: bool = False) -> None:
        pass

    def send_nowait(self, data: bytes) -> bool:
        return False

    def send_final_nowait(self, data: bytes) -> bool:
        return True

    def close(self) -> None:
        pass
