"""Images of the scene: a render returned strip by strip, and a screenshot of Blender's window.

Theory of operation
-------------------
A render in Blender blocks the main thread until it ends and cannot be stopped from Python.
:func:`render_png` therefore renders the image in horizontal strips (the render border,
cropped). It is an ``async`` tool, run in app_client's thread, and each strip is one step on
the main thread (``ctx.run_on_gui_thread``): between two strips Blender's event loop runs (the
window stays responsive), the agent gets progress, and a cancel (or the deadline) ends the
render before the next strip. The strips are saved, read back as pixels and assembled into one
PNG; the scene's render settings are restored afterwards, whatever happened.

Every strip costs a whole render's set-up (for Workbench on a software OpenGL, ~1.6 s a strip
whatever its height: fixed 40-row strips made a full-HD render 20x slower than one render,
BENCHMARKS "Blender: toolbridge beside blender-mcp"). So strips are sized by time
(:func:`.strips.next_strip_rows`): the first two (40 and 80 rows) measure the set-up and the cost per
row, and each later strip is as tall as takes about a second of rendering, or three times the
set-up when that is longer (the set-up stays under a quarter of the time), growing at most 16x
a step. A cheap render ends in three strips; a slow one keeps steps of about a second.

Between strips other calls run too (the add-on takes a few calls at once, each still one step
on the main thread): an agent's question (the scene summary, a screenshot) is answered during
a long render instead of waiting behind it. A change to the scene would change the strips still
to come, so the tools that change it refuse while a render runs
(:func:`refuse_while_rendering`), and so does a second render.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from array import array
from typing import Annotated, Literal

import bpy
import msgspec
import trio

from app_client import ContentBlock, ToolContext, ToolError, image

from .strips import next_strip_rows

__all__ = ["last_render", "refuse_while_rendering", "render_png", "rendering", "window_png"]

_SETTINGS = ("engine", "resolution_x", "resolution_y", "resolution_percentage", "use_border",
             "use_crop_to_border", "border_min_x", "border_max_x", "border_min_y", "border_max_y")
_ENGINES = {"workbench": "BLENDER_WORKBENCH", "eevee": "BLENDER_EEVEE"}
#: The render in progress, and the last one begun (main thread only), or None.
_active: _Job | None = None
_last: _Job | None = None


def last_render() -> dict[str, object] | None:
    """How the last render went (for the scene summary), or None before the first."""
    job = _last
    if job is None:
        return None
    return {"rows": job.height, "rows_done": job.rows_done, "strips_done": job.strips_done, "cancelled": job.cancelled}


def rendering() -> dict[str, int] | None:
    """The render in progress, rows done of all, or None (main thread)."""
    job = _active
    return None if job is None else {"rows": job.height, "rows_done": job.rows_done}


def refuse_while_rendering(what: str) -> None:
    """Refuse ``what`` (a ToolError that says when to retry) while a render runs (main thread)."""
    job = _active
    if job is not None:
        raise ToolError(f"Blender is rendering an image ({job.rows_done} of {job.height} rows done): {what} once "
                        "the render has finished (scene_summary's `rendering` is null then), or cancel the render")


async def render_png(
    ctx: ToolContext,
    width: Annotated[int, msgspec.Meta(ge=16, le=1920)] = 480,
    height: Annotated[int, msgspec.Meta(ge=16, le=1080)] = 360,
    engine: Annotated[Literal["workbench", "eevee"], msgspec.Meta(
        description="workbench: fast solid shading; eevee: materials and lights")] = "workbench",
) -> ContentBlock:
    """Render the scene through its active camera and return the image (PNG). Reports
    progress strip by strip and can be cancelled; the scene's render settings are left as
    they were."""
    # This coroutine runs in app_client's thread: every bpy access is a step on the main thread.
    job = await ctx.run_on_gui_thread(_begin, width, height, engine)
    finished = False
    try:
        timings: list[tuple[int, float]] = []
        while job.rows_done < job.height:
            rows = next_strip_rows(timings, job.height - job.rows_done)
            seconds = await ctx.run_on_gui_thread(_render_strip, job, rows)
            timings.append((rows, seconds))
            await ctx.report_progress(job.rows_done, job.height, f"rendered {job.rows_done} of {job.height} rows")
        data = await ctx.run_on_gui_thread(_png, job)
        finished = True
        return image(data, "image/png")
    finally:
        # Also after a cancel: put the settings back (bounded: a Blender that is quitting
        # runs no more main-thread steps).
        with trio.move_on_after(10) as cleanup:
            cleanup.shield = True
            await ctx.run_on_gui_thread(_end, job, finished)


class _Job:
    """One render in strips: its size, the saved settings, the pixels so far (main thread)."""

    def __init__(self, width: int, height: int, saved: dict[str, object]) -> None:
        self.width, self.height, self.saved = width, height, saved
        self.rows_done = self.strips_done = 0
        self.cancelled = False
        self.folder = tempfile.mkdtemp(prefix="toolbridge-blender-")
        self.pixels = array("f", bytes(width * height * 4 * 4))


def _begin(width: int, height: int, engine: str) -> _Job:
    global _active, _last
    refuse_while_rendering("render again")
    scene = bpy.context.scene
    if scene.camera is None:
        raise ToolError("the scene has no active camera: add one (or set scene.camera) before rendering")
    render = scene.render
    job = _Job(width, height, {name: getattr(render, name) for name in _SETTINGS})
    render.engine = _ENGINES[engine]
    render.resolution_x, render.resolution_y, render.resolution_percentage = width, height, 100
    render.use_border = render.use_crop_to_border = True
    render.border_min_x, render.border_max_x = 0.0, 1.0
    _active = _last = job
    return job


def _end(job: _Job, finished: bool) -> None:
    global _active
    if _active is job:
        _active = None
    render = bpy.context.scene.render
    for name, value in job.saved.items():
        setattr(render, name, value)
    shutil.rmtree(job.folder, ignore_errors=True)
    job.pixels = array("f")  # kept as the last render for the summary: without its pixels
    if not finished:
        job.cancelled = True


def _render_strip(job: _Job, rows: int) -> float:
    """Render the next ``rows`` rows into the job's pixels; the seconds the render took."""
    render = bpy.context.scene.render
    first = job.rows_done
    render.border_min_y, render.border_max_y = first / job.height, (first + rows) / job.height
    path = os.path.join(job.folder, f"strip{job.strips_done}.png")
    started = time.perf_counter()
    bpy.ops.render.render()
    seconds = time.perf_counter() - started
    bpy.data.images["Render Result"].save_render(path)
    strip = bpy.data.images.load(path)
    try:
        strip_width, strip_height = strip.size
        buffer = array("f", bytes(strip_width * strip_height * 4 * 4))
        strip.pixels.foreach_get(buffer)
    finally:
        bpy.data.images.remove(strip)
    # Blender's rows run bottom to top, and so does the border: row 0 is the bottom row.
    columns = min(job.width, strip_width)
    for row in range(min(strip_height, rows, job.height - first)):
        target = ((first + row) * job.width) * 4
        source = (row * strip_width) * 4
        job.pixels[target:target + columns * 4] = buffer[source:source + columns * 4]
    job.rows_done += rows
    job.strips_done += 1
    return seconds


def _png(job: _Job) -> bytes:
    path = os.path.join(job.folder, "render.png")
    picture = bpy.data.images.new("toolbridge render", job.width, job.height, alpha=True)
    try:
        picture.pixels.foreach_set(job.pixels)
        picture.filepath_raw = path
        picture.file_format = "PNG"
        picture.save()
    finally:
        bpy.data.images.remove(picture)
    with open(path, "rb") as file:
        return file.read()


def window_png() -> ContentBlock:
    """A screenshot of Blender's main window as the user sees it (PNG): viewport, panels,
    the toolbridge sidebar."""
    folder = tempfile.mkdtemp(prefix="toolbridge-blender-")
    path = os.path.join(folder, "window.png")
    try:
        window = bpy.context.window_manager.windows[0]
        with bpy.context.temp_override(window=window, screen=window.screen):
            bpy.ops.screen.screenshot(filepath=path)
        if not os.path.exists(path):
            raise ToolError("Blender did not take the screenshot")
        with open(path, "rb") as file:
            return image(file.read(), "image/png")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


