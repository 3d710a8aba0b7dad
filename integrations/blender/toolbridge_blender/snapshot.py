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
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from array import array
from typing import Annotated, Literal

import bpy
import msgspec
import trio

from app_client import ContentBlock, ToolContext, ToolError, image

__all__ = ["last_render", "render_png", "window_png"]

#: Rows per strip: small enough that a cancel is heard quickly, large enough to keep the
#: per-render overhead low.
STRIP_ROWS = 40
_SETTINGS = ("engine", "resolution_x", "resolution_y", "resolution_percentage", "use_border",
             "use_crop_to_border", "border_min_x", "border_max_x", "border_min_y", "border_max_y")
_ENGINES = {"workbench": "BLENDER_WORKBENCH", "eevee": "BLENDER_EEVEE"}
#: How the last render went (main thread only), for the scene summary: strips, strips_done, cancelled.
_last: dict[str, object] = {}


def last_render() -> dict[str, object] | None:
    """How the last render went, or None before the first."""
    return dict(_last) or None


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
        for index in range(job.strips):
            await ctx.run_on_gui_thread(_render_strip, job, index)
            await ctx.report_progress(index + 1, job.strips, f"rendered {index + 1} of {job.strips} strips")
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
        self.strips = max(1, math.ceil(height / STRIP_ROWS))
        self.folder = tempfile.mkdtemp(prefix="toolbridge-blender-")
        self.pixels = array("f", bytes(width * height * 4 * 4))


def _begin(width: int, height: int, engine: str) -> _Job:
    scene = bpy.context.scene
    if scene.camera is None:
        raise ToolError("the scene has no active camera: add one (or set scene.camera) before rendering")
    render = scene.render
    job = _Job(width, height, {name: getattr(render, name) for name in _SETTINGS})
    _last.clear()
    _last.update(strips=job.strips, strips_done=0, cancelled=False)
    render.engine = _ENGINES[engine]
    render.resolution_x, render.resolution_y, render.resolution_percentage = width, height, 100
    render.use_border = render.use_crop_to_border = True
    render.border_min_x, render.border_max_x = 0.0, 1.0
    return job


def _end(job: _Job, finished: bool) -> None:
    render = bpy.context.scene.render
    for name, value in job.saved.items():
        setattr(render, name, value)
    shutil.rmtree(job.folder, ignore_errors=True)
    if not finished:
        _last["cancelled"] = True


def _render_strip(job: _Job, index: int) -> None:
    render = bpy.context.scene.render
    first = index * job.height // job.strips
    render.border_min_y, render.border_max_y = first / job.height, (index + 1) * job.height // job.strips / job.height
    path = os.path.join(job.folder, f"strip{index}.png")
    bpy.ops.render.render()
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
    for row in range(min(strip_height, job.height - first)):
        target = ((first + row) * job.width) * 4
        source = (row * strip_width) * 4
        job.pixels[target:target + columns * 4] = buffer[source:source + columns * 4]
    _last["strips_done"] = index + 1


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


