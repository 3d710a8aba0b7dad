"""Admission: at most ``maxConcurrency`` calls run at an app instance; a bounded FIFO waits.

A GUI app often runs one tool at a time. Calls beyond its limit wait in arrival order; when
the queue is full the call fails at once with :class:`Busy`, which carries a retry hint based
on how long recent calls took, instead of piling up behind a stuck app.
"""

from __future__ import annotations

import collections
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio


class Busy(Exception):
    def __init__(self, retry_after_ms: int, queued: int) -> None:
        super().__init__(f"busy: {queued} calls already waiting")
        self.retry_after_ms = retry_after_ms
        self.queued = queued


class Admission:
    def __init__(self, limit: int, max_queue: int) -> None:
        self._limit = limit
        self._max_queue = max_queue
        self.active = 0
        self._waiters: collections.deque[trio.Event] = collections.deque()
        #: Exponentially weighted mean call duration, for the retry hint.
        self._mean_seconds = 0.1

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def set_limit(self, limit: int) -> None:
        self._limit = limit
        while self._waiters and self.active < self._limit:
            self.active += 1
            self._waiters.popleft().set()

    def retry_after_ms(self) -> int:
        per_slot = self._mean_seconds * (len(self._waiters) + 1) / max(self._limit, 1)
        return max(100, int(per_slot * 1000))

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one of the instance's slots for the body. Raises :class:`Busy` if full."""
        if self.active < self._limit and not self._waiters:
            self.active += 1
        else:
            if len(self._waiters) >= self._max_queue:
                raise Busy(self.retry_after_ms(), len(self._waiters))
            granted = trio.Event()
            self._waiters.append(granted)
            try:
                await granted.wait()
            except BaseException:
                if granted.is_set():
                    self._release()  # the slot was handed to us as we were cancelled
                else:
                    self._waiters.remove(granted)
                raise
        started = trio.current_time()
        try:
            yield
        finally:
            elapsed = trio.current_time() - started
            self._mean_seconds += 0.2 * (elapsed - self._mean_seconds)
            self._release()

    def _release(self) -> None:
        if self._waiters and self.active <= self._limit:
            self._waiters.popleft().set()  # hand our slot straight to the next in line
        else:
            self.active -= 1
