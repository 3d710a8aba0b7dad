"""A "something changed" signal, for code (mostly tests) that waits for a state of the core.

Theory of operation: :class:`Changed` carries no value. Code that changes state the outside
may wait for (a call ended, a tool list changed, an app's link closed, an admission slot was
taken, an agent session began or ended) calls :meth:`Changed.pulse`. A waiter calls
``await changed.wait_until(predicate)``: it checks the predicate, and while it is false waits
for the next pulse and checks again. Check and wait run on the trio thread with no
checkpoint between them, so no change is missed. The signal says nothing about *what*
changed, so a predicate may be checked more often than it turns true; it is never checked
less often than it could have turned true. Waits have no time limit of their own: bound them
with ``trio.fail_after``.

Cost: :meth:`pulse` is on the router's hot path (every call's end). With nobody waiting it is
one attribute test and returns; it allocates nothing. An event is made only by a waiter, and
one event serves every waiter of a pulse.

The core has one (``BrokerCore.changed``: the registry makes it, the router shares it);
the uplink has its own.
Leaf module: imports trio only.
"""

from __future__ import annotations

from collections.abc import Callable

import trio


class Changed:
    __slots__ = ("_event",)

    def __init__(self) -> None:
        #: The event the current waiters wait on; None while nobody waits.
        self._event: trio.Event | None = None

    def pulse(self) -> None:
        """Wake every waiter (they re-check their predicates). O(1); no allocation."""
        event = self._event
        if event is not None:
            self._event = None
            event.set()

    async def wait(self) -> None:
        """Wait for the next :meth:`pulse`."""
        event = self._event
        if event is None:
            event = self._event = trio.Event()
        await event.wait()

    async def wait_until(self, predicate: Callable[[], object]) -> None:
        """Return once ``predicate()`` is true, checking it now and after each pulse."""
        while not predicate():
            await self.wait()
