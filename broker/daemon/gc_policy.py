"""Garbage collection without long pauses of the event loop: freeze what survives a long pass.

Theory of operation
-------------------
CPython's cyclic garbage collector visits every tracked object of the generations it collects.
Its oldest generation holds nearly everything the daemon keeps: with 19,000 tools registered
(~33 tracked objects each: specs, schemas, entries) a full pass took 64-158 ms, on the loop, and
the passes come during registration bursts (a full pass runs each time the old generation grew
by a quarter). Raising the thresholds only makes the passes rarer, not shorter.

So, when a full pass took longer than :data:`FREEZE_AFTER_MS`, everything that survived it is
moved to the permanent generation (``gc.freeze()``), which later passes do not visit: the next
ones see only what was made since, and the pass that triggers a freeze is itself at most about
a quarter longer than the limit (a pass runs when the old generation grew by a quarter). Right
after a full pass no cyclic garbage is left among the survivors, so a freeze takes nothing that
could be collected. The price: an object frozen while alive that later becomes part of garbage
*cycles* is never collected (reference counting still frees everything else, frozen or not).
Measured: three rounds of an app with 1,000 tools registering and leaving left 0 unreachable
cycles among the frozen objects (the registry's objects are freed by reference counting), so
what stays is what was alive anyway. The numbers and the command are in BENCHMARKS.md
("Garbage-collection pauses").

Installed by ``toolbridge serve`` (and the benchmarks' daemon) around the daemon's whole run,
not by :func:`broker.daemon.run.run_daemon`, which tests also run inside their own process.
The callback runs in whichever thread triggered the collection, under the GIL; ``gc.freeze()``
only splices lists and is safe there.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterator
from typing import Any, Final

__all__ = ["FREEZE_AFTER_MS", "GcPolicy", "freezing_after_long_passes"]

#: A full pass longer than this (milliseconds) freezes its survivors. Well under the 100 ms a
#: stall is; passes of the daemon's young objects take a few ms (BENCHMARKS.md).
FREEZE_AFTER_MS: Final = 20.0


class GcPolicy:
    """The ``gc.callbacks`` entry that times full passes and freezes after a long one."""

    def __init__(self, freeze_after_ms: float = FREEZE_AFTER_MS) -> None:
        self.freeze_after = freeze_after_ms / 1000
        #: How many times it froze, and the longest full pass it saw (ms).
        self.freezes = 0
        self.longest_pass_ms = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
            return
        took = time.perf_counter() - self._started
        self.longest_pass_ms = max(self.longest_pass_ms, took * 1000)
        if took > self.freeze_after:
            gc.freeze()
            self.freezes += 1


@contextlib.contextmanager
def freezing_after_long_passes(freeze_after_ms: float = FREEZE_AFTER_MS) -> Iterator[GcPolicy]:
    """Install a :class:`GcPolicy` for the ``with`` block (the daemon's whole run)."""
    policy = GcPolicy(freeze_after_ms)
    gc.callbacks.append(policy)
    try:
        yield policy
    finally:
        gc.callbacks.remove(policy)
