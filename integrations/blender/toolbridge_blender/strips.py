"""How tall the next strip of a render is (pure Python: no ``bpy``, so it is tested outside
Blender). See :mod:`.snapshot`'s docstring for why strips are sized by time."""

from __future__ import annotations

__all__ = ["FIRST_STRIP_ROWS", "STRIP_SECONDS", "next_strip_rows"]

#: The first strip's rows (the second has twice as many): small, to measure the render soon.
FIRST_STRIP_ROWS = 40
#: About how long a strip should take (seconds): how soon a cancel or a repaint is served.
STRIP_SECONDS = 1.0


def next_strip_rows(timings: list[tuple[int, float]], remaining: int) -> int:
    """The next strip's rows, from the strips so far (rows, seconds): see the module docstring.
    The render's cost is fitted as ``set_up + rows * per_row`` (least squares, both ≥ 0)."""
    if len(timings) < 2:
        return min(remaining, FIRST_STRIP_ROWS * (len(timings) + 1))
    count = len(timings)
    mean_rows = sum(rows for rows, _ in timings) / count
    mean_seconds = sum(seconds for _, seconds in timings) / count
    spread = sum((rows - mean_rows) ** 2 for rows, _ in timings)
    covariance = sum((rows - mean_rows) * (seconds - mean_seconds) for rows, seconds in timings)
    per_row = max(0.0, covariance / spread) if spread else 0.0
    set_up = max(0.0, mean_seconds - per_row * mean_rows)
    most = 16 * timings[-1][0]
    if per_row <= 0:
        return min(remaining, most)
    wanted = round((max(STRIP_SECONDS, 3 * set_up) - set_up) / per_row)
    return max(1, min(remaining, most, wanted))
