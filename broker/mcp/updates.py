"""``notifications/resources/updated`` per agent: at most one per resource per window, the last one never lost.

Theory of operation
-------------------
An app may send ``resourceUpdated`` as often as it likes (a progress counter, a live view);
passing each one on made an agent re-read the resource tens of thousands of times and filled
its stream. The notification carries only the URI ("it changed, read it again"), so updates
of one URI that come close together say nothing more than the last of them. Each MCP session
has one :class:`UpdateThrottle`: the first update of a URI goes out at once and opens a window
of :data:`UPDATE_WINDOW` seconds; updates of that URI inside the window are folded into one,
sent when the window closes (which opens the next). So an agent hears of a URI at most once
per window, never later than one window after its last change, and always after the last
change: what it reads then is the latest state.

Only URIs the session subscribed to reach the throttle, so what it remembers is bounded by the
session's subscriptions. Offering is O(1) and never waits; the held updates are sent by one
task per session (:meth:`UpdateThrottle.run`), started by the session the first time one is
held, in the session's own nursery, so it ends with the session.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import trio

__all__ = ["UPDATE_WINDOW", "UpdateThrottle"]

#: Seconds during which further updates of a URI just sent to an agent are folded into one.
UPDATE_WINDOW: Final = 0.25
#: Windows remembered before the closed ones are dropped (then twice what is left).
_PRUNE_AT: Final = 1024


class UpdateThrottle:
    """One session's updates, by URI (module docstring). ``deliver(uri)`` sends one;
    ``start_runner()`` starts :meth:`run` in the session's nursery (called once, the first time
    an update is held)."""

    def __init__(self, deliver: Callable[[str], None], start_runner: Callable[[], None],
                 window: float = UPDATE_WINDOW) -> None:
        self._deliver = deliver
        self._start_runner: Callable[[], None] | None = start_runner
        self._window = window
        #: The URIs sent lately, and when their window closes.
        self._open_until: dict[str, float] = {}
        #: The URIs updated inside their window, to send when it closes (at that time).
        self._held: dict[str, float] = {}
        self._wake = trio.Event()
        self._prune_at = _PRUNE_AT

    def offer(self, uri: str) -> bool:
        """An update of ``uri``: sent now (True), or held for the end of its window (False)."""
        now = trio.current_time()
        until = self._open_until.get(uri)
        if until is None or now >= until:
            if len(self._open_until) >= self._prune_at:
                self._forget_closed(now)
            self._open_until[uri] = now + self._window
            self._deliver(uri)
            return True
        if uri not in self._held:
            self._held[uri] = until
            self._wake.set()  # it may be due before the one run() waits for
            if self._start_runner is not None:
                start, self._start_runner = self._start_runner, None
                start()
        return False

    async def run(self) -> None:
        """Send each held update when its window closes; for ever (cancelled with the session)."""
        while True:
            if self._held:
                with trio.move_on_at(min(self._held.values())):
                    await self._wake.wait()
            else:
                await self._wake.wait()
            self._wake = trio.Event()
            now = trio.current_time()
            for uri, due in list(self._held.items()):
                if due <= now:
                    del self._held[uri]
                    self._open_until[uri] = now + self._window
                    self._deliver(uri)

    def _forget_closed(self, now: float) -> None:
        """Drop the windows that closed with nothing held in them. Amortised: the next pass
        comes when the table has doubled again."""
        self._open_until = {uri: until for uri, until in self._open_until.items() if until > now or uri in self._held}
        self._prune_at = max(_PRUNE_AT, 2 * len(self._open_until))
