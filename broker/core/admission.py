"""Admission: at most ``maxConcurrency`` calls run at an app instance; a bounded FIFO waits.

A GUI app often runs one tool at a time. Calls beyond its limit wait in arrival order; when
the queue is full the call is refused at once with :class:`Busy`, which carries a retry hint
based on how long recent calls took, instead of piling up behind a stuck app.

Waiting is a callback, not a task: :meth:`Admission.enter` either takes a slot at once, queues
the caller's ``granted`` function (called, synchronously, when a slot is handed over), or
refuses. :meth:`leave` hands the slot to the next in line. A ``granted`` that ends its call at
once (its app is gone) leaves again inside it; the hand-over runs as a loop, not a recursion.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

import trio

from ..errors import BrokerError

Granted = Callable[[], None]


class Busy(BrokerError):
    """The app's queue is full: the call is refused now (internal control flow; the router
    turns it into a ``busy`` outcome with the retry hint)."""

    def __init__(self, retry_after_ms: int, queued: int) -> None:
        super().__init__(f"busy: {queued} calls already waiting")
        self.retry_after_ms = retry_after_ms
        self.queued = queued


class Admission:
    def __init__(self, limit: int, max_queue: int) -> None:
        self._limit = limit
        self._max_queue = max_queue
        self.active = 0
        self._waiters: collections.deque[Granted] = collections.deque()
        self._handing_over = False
        #: Exponentially weighted mean call duration, for the retry hint.
        self._mean_seconds = 0.1

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def set_limit(self, limit: int) -> None:
        self._limit = limit
        self._hand_over()

    def retry_after_ms(self) -> int:
        per_slot = self._mean_seconds * (len(self._waiters) + 1) / max(self._limit, 1)
        return max(100, int(per_slot * 1000))

    def take_free_slot(self) -> bool:
        """Take a slot if one is free and nobody is waiting (no ``granted`` needed then)."""
        if self.active < self._limit and not self._waiters:
            self.active += 1
            return True
        return False

    def enter(self, granted: Granted) -> bool:
        """True: a slot is taken. False: ``granted`` is queued. Raises :class:`Busy` if full."""
        if self.take_free_slot():
            return True
        if len(self._waiters) >= self._max_queue:
            raise Busy(self.retry_after_ms(), len(self._waiters))
        self._waiters.append(granted)
        return False

    def withdraw(self, granted: Granted) -> None:
        """A queued caller gave up (deadline, cancellation) before it got a slot."""
        try:
            self._waiters.remove(granted)
        except ValueError:
            pass

    def leave(self, admitted_at: float) -> None:
        """Give back a slot taken at trio time ``admitted_at``."""
        elapsed = trio.current_time() - admitted_at
        self._mean_seconds += 0.2 * (elapsed - self._mean_seconds)
        self.active -= 1
        self._hand_over()

    def _hand_over(self) -> None:
        if self._handing_over:
            return  # an outer hand-over loop (see the module docstring) takes this slot on
        self._handing_over = True
        try:
            while self._waiters and self.active < self._limit:
                self.active += 1
                self._waiters.popleft()()
        finally:
            self._handing_over = False
