"""The status page's 15-minute timeline and its quantiles (broker.mcp.timeline), pure (issue 31)."""

from __future__ import annotations

import pytest

from broker.mcp.timeline import LATENCY_BUCKETS, SLOT_SECONDS, SLOTS, Timeline, quantile


def test_quantiles_interpolate_inside_a_bucket_like_histogram_quantile() -> None:
    counts = [0] * (len(LATENCY_BUCKETS) + 1)
    assert quantile(0.5, counts) is None
    counts[LATENCY_BUCKETS.index(0.1)] = 10  # ten calls in (0.05, 0.1]
    assert quantile(0.5, counts) == pytest.approx(0.075)
    assert quantile(1.0, counts) == pytest.approx(0.1)
    counts[-1] = 90  # ninety past the last bound: the last bound, as Prometheus answers
    assert quantile(0.95, counts) == LATENCY_BUCKETS[-1]
    assert quantile(0.05, counts) == pytest.approx(0.05 + 0.05 * 0.5)


def test_the_timeline_counts_per_slot_and_forgets_after_fifteen_minutes() -> None:
    timeline = Timeline()
    start = 1_700_000_000.0
    timeline.record(start, "Demo", 0.004, None)
    timeline.record(start + 1, "Demo", 0.2, "timeout")
    timeline.record(start + 2, "Other", 0.004, None)
    series = timeline.series(start + 5)
    assert len(series["t"]) == SLOTS and series["t"][-1] <= start + 5 < series["t"][-1] + SLOT_SECONDS
    assert series["all"]["rate"][-1] == pytest.approx(3 / SLOT_SECONDS)
    assert series["apps"]["Demo"]["rate"][-1] == pytest.approx(2 / SLOT_SECONDS)
    assert series["all"]["rate"][0] == 0 and series["all"]["p50"][0] is None
    assert series["errors"] == {"timeout": [0] * (SLOTS - 1) + [60 / SLOT_SECONDS]}
    assert series["apps"]["Demo"]["p95"][-1] > series["apps"]["Other"]["p95"][-1]
    later = start + SLOTS * SLOT_SECONDS + 60
    timeline.record(later, "Demo", 0.004, None)
    series = timeline.series(later)
    assert sum(series["all"]["rate"]) == pytest.approx(1 / SLOT_SECONDS) and series["errors"] == {}
