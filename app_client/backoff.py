"""Reconnect delays: capped exponential backoff with full jitter.

Theory of operation
-------------------
Attempt *n* (counting from 0 since the last success) waits a uniformly random time between
0 and ``min(cap, initial * factor ** n)`` ("full jitter", as in the AWS architecture blog's
analysis): many apps that lost the same daemon do not reconnect in lock-step, and the
expected wait still grows quickly to the cap. :meth:`Backoff.reset` starts over after a
successful registration. The random source is injectable, so tests can pin the delays.
"""

from __future__ import annotations

import random

import attrs

__all__ = ["Backoff"]


@attrs.define
class Backoff:
    """Delays for successive reconnect attempts (seconds)."""

    initial: float = 0.1
    cap: float = 5.0
    factor: float = 2.0
    rng: random.Random = attrs.field(factory=random.Random, repr=False)
    _attempt: int = attrs.field(default=0, init=False)

    def ceiling(self) -> float:
        """The largest delay the next attempt may draw."""
        exponent = min(self._attempt, 64)  # bounded, so the power never overflows
        return min(self.cap, self.initial * self.factor**exponent)

    def next_delay(self) -> float:
        """Draw the delay before the next attempt and count the attempt."""
        delay = self.rng.uniform(0, self.ceiling())
        self._attempt += 1
        return delay

    def reset(self) -> None:
        """Start over from ``initial`` (after a successful connection)."""
        self._attempt = 0
