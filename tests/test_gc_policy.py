"""``broker.daemon.gc_policy``: a long full pass freezes its survivors; a short one does not."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from broker.daemon.gc_policy import freezing_after_long_passes


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the rest of the test run collects as before


def test_a_full_pass_over_the_limit_freezes_what_survived_it() -> None:
    kept = [{"n": i} for i in range(10_000)]
    with freezing_after_long_passes(freeze_after_ms=0.0) as policy:  # every full pass is "long"
        gc.collect(1)
        assert policy.freezes == 0 and gc.get_freeze_count() == 0  # young passes never freeze
        gc.collect()
        assert policy.freezes == 1 and gc.get_freeze_count() >= len(kept)
        assert policy.longest_pass_ms > 0
        frozen = gc.get_freeze_count()
        gc.collect()  # the next pass visits only what is new
        assert gc.get_freeze_count() - frozen < 1000
    assert policy not in gc.callbacks


def test_short_passes_freeze_nothing() -> None:
    with freezing_after_long_passes(freeze_after_ms=60_000.0) as policy:
        gc.collect()
    assert policy.freezes == 0 and gc.get_freeze_count() == 0


def test_frozen_objects_are_still_freed_by_reference_counting() -> None:
    import weakref

    class Spec:
        pass

    spec = Spec()
    watch = weakref.ref(spec)
    with freezing_after_long_passes(freeze_after_ms=0.0):
        gc.collect()
    assert gc.get_freeze_count() > 0
    del spec
    assert watch() is None
