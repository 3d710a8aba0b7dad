"""Images of the scene: a render returned strip by strip, and a screenshot of Blender's window.

Theory of operation
-------------------
A render in Blender blocks the main thread until it ends and cannot be stopped from Python.
:func:`render_png` therefore renders the image in horizontal strips (the render border, cropped)
on the main thread, reporting progress after each strip and checking ``ctx.cancelled`` before
the next, so an agent sees progress and a cancel (or the deadline) stops the render within one
strip. The strips are saved, read back as pixels and assembled into one PNG; the scene's render
settings are restored afterwards, whatever happened.
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


def render_png(
    ctx: ToolContext,
    width: Annotated[int, msgspec.Meta(ge=16, le=1920)] = 480,
    height: Annotated[int, msgspec.Meta(ge=16, le=1080)] = 360,
    engine: Annotated[Literal["workbench", "eevee"], msgspec.Meta(
        description="workbench: fast solid shading; eevee: materials and lights")] = "workbench",
) -> ContentBlock:
    """Render the scene through its active camera and return the image (PNG). Reports
    progress strip by strip and can be cancelled; the scene's render settings are left as
    they were."""
    scene = bpy.context.scene
    if scene.camera is None:
        raise ToolError("the scene has no active camera: add one (or set scene.camera) before rendering")
    render = scene.render
    saved = {name: getattr(render, name) for name in _SETTINGS}
    folder = tempfile.mkdtemp(prefix="toolbridge-blender-")
    strips = max(1, math.ceil(height / STRIP_ROWS))
    pixels = array("f", bytes(width * height * 4 * 4))
    _last.clear()
    _last.update(strips=strips, strips_done=0, cancelled=False)
    try:
        render.engine = _ENGINES[engine]
        render.resolution_x, render.resolution_y, render.resolution_percentage = width, height, 100
        render.use_border = render.use_crop_to_border = True
        render.border_min_x, render.border_max_x = 0.0, 1.0
        for index in range(strips):
            if ctx.cancelled:
                _last["cancelled"] = True
                raise ToolError("the render was cancelled")
            first = index * height // strips
            last = (index + 1) * height // strips
            render.border_min_y, render.border_max_y = first / height, last / height
            _render_strip(os.path.join(folder, f"strip{index}.png"), pixels, width, height, first)
            _last["strips_done"] = index + 1
            ctx.report_progress_threadsafe(index + 1, strips, f"rendered {index + 1} of {strips} strips")
        return image(_png(pixels, width, height, os.path.join(folder, "render.png")), "image/png")
    finally:
        for name, value in saved.items():
            setattr(render, name, value)
        shutil.rmtree(folder, ignore_errors=True)


def _render_strip(path: str, pixels: array[float], width: int, height: int, first_row: int) -> None:
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
    columns = min(width, strip_width)
    for row in range(min(strip_height, height - first_row)):
        target = ((first_row + row) * width) * 4
        source = (row * strip_width) * 4
        pixels[target:target + columns * 4] = buffer[source:source + columns * 4]


def _png(pixels: array[float], width: int, height: int, path: str) -> bytes:
    picture = bpy.data.images.new("toolbridge render", width, height, alpha=True)
    try:
        picture.pixels.foreach_set(pixels)
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


