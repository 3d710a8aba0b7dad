"""The Blender add-on's render strips, sized by time (``integrations/blender/.../strips.py``,
pure Python): a render whose set-up dominates ends in few strips, a slow one keeps steps of
about ``STRIP_SECONDS``. The render itself is tested in Blender (test_blender_integration.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

STRIPS = Path(__file__).resolve().parent.parent / "integrations" / "blender" / "toolbridge_blender" / "strips.py"


@pytest.fixture(scope="module")
def strips() -> ModuleType:
    spec = importlib.util.spec_from_file_location("toolbridge_blender_strips", STRIPS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def render(strips: ModuleType, height: int, set_up: float, per_row: float) -> list[tuple[int, float]]:
    """The strips of a simulated render whose strips cost ``set_up + rows * per_row`` seconds."""
    timings: list[tuple[int, float]] = []
    done = 0
    while done < height:
        rows = strips.next_strip_rows(timings, height - done)
        assert 1 <= rows <= height - done
        timings.append((rows, set_up + rows * per_row))
        done += rows
    return timings


def test_a_render_whose_set_up_dominates_ends_in_three_strips(strips: ModuleType) -> None:
    # Workbench on llvmpipe, measured: ~1.6 s a strip whatever its height, 0.6 s of rows in all.
    timings = render(strips, 1080, 1.6, 0.6 / 1080)
    assert [rows for rows, _ in timings] == [40, 80, 960]  # 27 fixed strips of 40 rows before


def test_a_slow_render_keeps_steps_of_about_a_second_with_a_small_set_up_share(strips: ModuleType) -> None:
    timings = render(strips, 1080, 0.2, 60 / 1080)  # a minute of rendering
    later = [seconds for _, seconds in timings[2:-1]]
    assert later and all(0.8 <= seconds <= 1.2 * strips.STRIP_SECONDS for seconds in later)
    set_up_share = 0.2 * len(timings) / sum(seconds for _, seconds in timings)
    assert set_up_share <= 0.25


def test_strips_grow_at_most_sixteenfold_when_rows_seem_free(strips: ModuleType) -> None:
    timings = [(40, 1.0), (80, 0.9)]  # the taller strip was quicker: noise, no cost per row seen
    assert strips.next_strip_rows(timings, 5000) == 16 * 80
    assert strips.next_strip_rows(timings, 100) == 100


def test_small_images_take_one_or_two_strips(strips: ModuleType) -> None:
    assert [rows for rows, _ in render(strips, 30, 1.0, 0.001)] == [30]
    assert [rows for rows, _ in render(strips, 100, 1.0, 0.001)] == [40, 60]
