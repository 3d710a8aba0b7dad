"""The tools and resources Blender offers agents: a thin layer over ``bpy``.

Theory of operation
-------------------
:func:`declare` puts every tool and resource on an :class:`app_client.App` whose
``gui_executor`` runs calls on Blender's main thread (see ``__init__.py``): each sync handler
here runs there, one at a time, so ``bpy`` is only ever touched where Blender allows it.
Objects are made with the data API and ``bmesh`` rather than ``bpy.ops`` (operators depend on
the UI context under the mouse); every change pushes an undo step named ``toolbridge: ...`` so
the ``undo`` tool (and the user's Ctrl+Z) steps back through what the agent did.

Handlers raise :class:`app_client.ToolError` with a message that says what to do; anything
else a handler raises becomes a safe app error (app_client logs the details).
"""

from __future__ import annotations

import math
import os
from typing import Annotated, Any, Literal

import bmesh
import bpy
import msgspec

from app_client import App, ToolError

from .snapshot import last_render, refuse_while_rendering, render_png, rendering, window_png

__all__ = ["declare", "run_python_tool"]

READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False}
CHANGES = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": False}
DESTROYS = {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": False}

Vector = Annotated[tuple[float, float, float], msgspec.Meta(description="x, y, z")]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=63, description="an object's name, as listed by list_objects")]
Primitive = Literal["cube", "uv_sphere", "ico_sphere", "cylinder", "cone", "plane", "monkey"]


def _object(name: str) -> Any:
    obj = bpy.data.objects.get(name)
    if obj is None:
        known = ", ".join(sorted(o.name for o in bpy.context.scene.objects)[:20]) or "none"
        raise ToolError(f"no object named {name!r} in the scene; objects are: {known}")
    return obj


def _round(values: Any) -> list[float]:
    return [round(float(v), 4) for v in values]


def describe(obj: Any) -> dict[str, Any]:
    """What an agent needs to know about one object (JSON)."""
    material = obj.active_material
    return {
        "name": obj.name,
        "type": obj.type,
        "location": _round(obj.location),
        "rotation_degrees": [round(math.degrees(a), 3) for a in obj.rotation_euler],
        "scale": _round(obj.scale),
        "dimensions": _round(obj.dimensions),
        "selected": obj.select_get(),
        "visible": obj.visible_get(),
        "parent": obj.parent.name if obj.parent else None,
        "materials": [slot.material.name for slot in obj.material_slots if slot.material],
        "color": _round(material.diffuse_color) if material is not None else None,
        "vertices": len(obj.data.vertices) if obj.type == "MESH" else None,
    }


def undo_push(message: str) -> None:
    """An undo step for a change made through the data API (operators push their own)."""
    bpy.ops.ed.undo_push(message=f"toolbridge: {message}")


def _mesh(kind: str, size: float) -> Any:
    mesh = bpy.data.meshes.new(kind)
    shape = bmesh.new()
    try:
        radius = size / 2
        if kind == "cube":
            bmesh.ops.create_cube(shape, size=size)
        elif kind == "uv_sphere":
            bmesh.ops.create_uvsphere(shape, u_segments=32, v_segments=16, radius=radius)
        elif kind == "ico_sphere":
            bmesh.ops.create_icosphere(shape, subdivisions=2, radius=radius)
        elif kind == "cylinder":
            bmesh.ops.create_cone(shape, cap_ends=True, segments=32, radius1=radius, radius2=radius, depth=size)
        elif kind == "cone":
            bmesh.ops.create_cone(shape, cap_ends=True, segments=32, radius1=radius, radius2=0, depth=size)
        elif kind == "plane":
            bmesh.ops.create_grid(shape, x_segments=1, y_segments=1, size=radius)
        else:
            bmesh.ops.create_monkey(shape)
            bmesh.ops.scale(shape, vec=(radius, radius, radius), verts=shape.verts)
        shape.to_mesh(mesh)
    finally:
        shape.free()
    return mesh


def scene_outline() -> dict[str, Any]:
    scene = bpy.context.scene
    return {
        "scene": scene.name,
        "file": bpy.data.filepath or None,
        "frame": scene.frame_current,
        "render_engine": scene.render.engine,
        "active_object": bpy.context.view_layer.objects.active.name if bpy.context.view_layer.objects.active else None,
        "collections": {c.name: sorted(o.name for o in c.objects) for c in [scene.collection, *scene.collection.children_recursive]},
        "objects": [{"name": o.name, "type": o.type, "parent": o.parent.name if o.parent else None}
                    for o in scene.objects],
    }


def declare(app: App) -> None:
    """Declare Blender's tools and resources on ``app`` (before it runs)."""

    @app.tool(annotations=READ_ONLY, title="Scene summary",
              example_requests=["give me a quick overview of what I've got", "is the render still going?",
                                "which render engine and resolution am I using?", "catch me up on this project"])
    def scene_summary() -> dict[str, Any]:
        """Summarise the open Blender scene: file, frame, render engine, how many objects of
        each type, the active and the selected objects, the render in progress (if any) and
        how the last render went. Start here."""
        scene = bpy.context.scene
        counts: dict[str, int] = {}
        for obj in scene.objects:
            counts[obj.type] = counts.get(obj.type, 0) + 1
        active = bpy.context.view_layer.objects.active
        return {
            "scene": scene.name,
            "file": bpy.data.filepath or None,
            "frame": scene.frame_current,
            "render_engine": scene.render.engine,
            "resolution": [scene.render.resolution_x, scene.render.resolution_y],
            "object_count": len(scene.objects),
            "objects_by_type": counts,
            "active_object": active.name if active else None,
            "selected_objects": [o.name for o in scene.objects if o.select_get()],
            "blender_version": bpy.app.version_string,
            "rendering": rendering(),
            "last_render": last_render(),
        }

    @app.tool(annotations=READ_ONLY, title="List objects",
              example_requests=["what objects are in the scene?", "what lights do I have?", "show me all the cameras",
                                "which meshes are there and where are they?"])
    def list_objects(
        object_type: Annotated[str, msgspec.Meta(
            max_length=32, description="only objects of this type: MESH, CAMERA, LIGHT, EMPTY, CURVE, ...")] | None = None,
    ) -> list[dict[str, Any]]:
        """List the scene's objects with their type, location and whether they are selected."""
        wanted = object_type.upper() if object_type else None
        return [{"name": o.name, "type": o.type, "location": _round(o.location), "selected": o.select_get()}
                for o in bpy.context.scene.objects if wanted is None or o.type == wanted]

    @app.tool(annotations=READ_ONLY, title="Get object",
              example_requests=["how big is the chair?", "what colour is the cube right now?",
                                "how many vertices does the monkey have?",
                                "where exactly is the lamp and how is it turned?"])
    def get_object(name: Name) -> dict[str, Any]:
        """Everything about one object: transform, dimensions, materials, colour, vertex count."""
        return describe(_object(name))

    @app.tool(annotations=CHANGES, title="Create primitive",
              example_requests=["add a cube to the scene", "I need a ball to bounce",
                                "put a flat floor under everything", "drop a Suzanne head at 0, 0, 2"])
    def create_primitive(
        kind: Primitive,
        name: Annotated[str, msgspec.Meta(min_length=1, max_length=63,
                                          description="the new object's name (Blender adds .001 if taken)")] | None = None,
        location: Vector = (0.0, 0.0, 0.0),
        size: Annotated[float, msgspec.Meta(gt=0, le=10000, description="edge length or diameter, in metres")] = 2.0,
    ) -> dict[str, Any]:
        """Add a mesh primitive (cube, sphere, cylinder, cone, plane, monkey) to the scene and
        make it the active, only selected object. Returns the new object."""
        refuse_while_rendering("change the scene")
        obj = bpy.data.objects.new(name or kind.replace("_", " ").title(), _mesh(kind, size))
        obj.location = location
        bpy.context.scene.collection.objects.link(obj)
        for other in bpy.context.scene.objects:
            other.select_set(False)
        obj.select_set(True)
        bpy.context.view_layer.objects.active = obj
        undo_push(f"create {obj.name}")
        return describe(obj)

    @app.tool(annotations=CHANGES, title="Transform object",
              example_requests=["move the cube up a bit", "make the sphere twice as big", "turn the chair 90 degrees",
                                "shift the lamp one metre to the left"])
    def transform_object(
        name: Name,
        location: Vector | None = None,
        rotation_degrees: Annotated[tuple[float, float, float], msgspec.Meta(description="Euler XYZ, degrees")] | None = None,
        scale: Vector | None = None,
    ) -> dict[str, Any]:
        """Set an object's location, rotation (degrees) and/or scale; omitted ones stay."""
        refuse_while_rendering("change the scene")
        obj = _object(name)
        if location is None and rotation_degrees is None and scale is None:
            raise ToolError("give at least one of location, rotation_degrees, scale")
        if location is not None:
            obj.location = location
        if rotation_degrees is not None:
            obj.rotation_euler = [math.radians(a) for a in rotation_degrees]
        if scale is not None:
            obj.scale = scale
        undo_push(f"transform {obj.name}")
        return describe(obj)

    @app.tool(annotations=DESTROYS, title="Delete object",
              example_requests=["delete the default cube", "get rid of the extra lamp",
                                "remove that cone, I don't need it", "throw away the old chair"])
    def delete_object(name: Name) -> dict[str, Any]:
        """Delete an object from the file (undo brings it back). Returns the objects left."""
        refuse_while_rendering("change the scene")
        obj = _object(name)
        bpy.data.objects.remove(obj, do_unlink=True)
        undo_push(f"delete {name}")
        return {"deleted": name, "objects": [o.name for o in bpy.context.scene.objects]}

    @app.tool(annotations=CHANGES, title="Set material colour",
              example_requests=["make the cube red", "paint the car blue", "I want the floor a light grey",
                                "colour the walls pale blue"])
    def set_material_color(
        name: Name,
        color: Annotated[list[float], msgspec.Meta(min_length=3, max_length=4,
                                                   description="red, green, blue (and alpha), each 0 to 1")],
    ) -> dict[str, Any]:
        """Give an object a material of this colour (its own material, created if needed),
        for renders (Principled BSDF base colour) and the viewport (display colour)."""
        refuse_while_rendering("change the scene")
        obj = _object(name)
        if obj.type not in {"MESH", "CURVE", "SURFACE", "META", "FONT"}:
            raise ToolError(f"{name} is a {obj.type}, which has no material; pick a mesh")
        if any(not 0 <= c <= 1 for c in color):
            raise ToolError("colour components go from 0 to 1")
        rgba = (*color[:3], color[3] if len(color) == 4 else 1.0)
        material = bpy.data.materials.get(f"{obj.name} colour") or bpy.data.materials.new(f"{obj.name} colour")
        material.diffuse_color = rgba
        material.use_nodes = True
        bsdf = material.node_tree.nodes.get("Principled BSDF")
        if bsdf is not None:
            bsdf.inputs["Base Color"].default_value = rgba
        if obj.material_slots:
            obj.material_slots[0].material = material
        else:
            obj.data.materials.append(material)
        undo_push(f"colour {obj.name}")
        return describe(obj)

    @app.tool(annotations=CHANGES, title="Select objects",
              example_requests=["select the cube and the sphere", "pick the lamp so I can work on it",
                                "highlight both chairs", "add the table to what I've got selected"])
    def select_objects(
        names: Annotated[list[str], msgspec.Meta(max_length=1000, description="objects to select")],
        extend: Annotated[bool, msgspec.Meta(description="keep the current selection")] = False,
    ) -> list[str]:
        """Select objects (the first becomes active); without extend, others are deselected.
        Returns the selection."""
        refuse_while_rendering("change the selection")
        chosen = [_object(n) for n in names]
        scene_objects = bpy.context.scene.objects
        if not extend:
            for obj in scene_objects:
                obj.select_set(False)
        for obj in chosen:
            obj.select_set(True)
        if chosen:
            bpy.context.view_layer.objects.active = chosen[0]
        undo_push("select")
        return [o.name for o in scene_objects if o.select_get()]

    app.tool(name="render_image", annotations=READ_ONLY, title="Render image", timeout=300,
             example_requests=["render the scene", "what will the final shot look like?", "do a quick preview render",
                               "let me see the finished picture with lights and materials"])(render_png)
    app.tool(name="screenshot_window", annotations=READ_ONLY, title="Screenshot of Blender's window",
             example_requests=["take a screenshot of Blender", "what's on my screen right now?",
                               "can you see what I'm looking at?", "grab a picture of my whole display"])(window_png)

    @app.tool(annotations=DESTROYS, title="Export glTF or STL",
              example_requests=["export the scene as a glb file", "save the model for 3D printing",
                                "I need this for a game engine", "export just the selected objects to STL"])
    def export_scene(
        path: Annotated[str, msgspec.Meta(min_length=1, max_length=4096,
                                          description="absolute file path ending in .glb, .gltf or .stl (overwritten)")],
        selected_only: bool = False,
    ) -> dict[str, Any]:
        """Export the scene (or only the selected objects) to glTF (.glb/.gltf) or STL (.stl).
        An existing file at that path is overwritten."""
        if not os.path.isabs(path):
            raise ToolError("give an absolute path")
        folder = os.path.dirname(path)
        if not os.path.isdir(folder):
            raise ToolError(f"the folder {folder!r} does not exist")
        extension = os.path.splitext(path)[1].lower()
        if extension in (".glb", ".gltf"):
            result = bpy.ops.export_scene.gltf(
                filepath=path, export_format="GLB" if extension == ".glb" else "GLTF_SEPARATE",
                use_selection=selected_only)
        elif extension == ".stl":
            result = bpy.ops.export_mesh.stl(filepath=path, use_selection=selected_only)
        else:
            raise ToolError("the path must end in .glb, .gltf or .stl")
        if "FINISHED" not in result or not os.path.exists(path):
            raise ToolError(f"Blender did not export {path}")
        return {"path": path, "bytes": os.path.getsize(path)}

    @app.tool(annotations=CHANGES, title="Undo",
              example_requests=["undo what you just did", "go back two steps", "oops, revert the last change",
                                "put it back the way it was"])
    def undo(steps: Annotated[int, msgspec.Meta(ge=1, le=100)] = 1) -> dict[str, Any]:
        """Undo the last change(s), the agent's or the user's, as Ctrl+Z does."""
        refuse_while_rendering("undo")
        for _ in range(steps):
            if bpy.ops.ed.undo() != {"FINISHED"}:
                raise ToolError("nothing (more) to undo")
        return {"undone": steps, "objects": [o.name for o in bpy.context.scene.objects]}

    @app.resource("blender://scene/outline", name="scene outline", mime_type="application/json",
                  description="The open scene: its collections and objects (JSON).")
    def outline() -> str:
        return msgspec.json.encode(scene_outline()).decode()

    def object_names(typed: str) -> list[str]:
        return sorted(o.name for o in bpy.context.scene.objects if o.name.lower().startswith(typed.lower()))

    @app.resource_template("blender://objects/{name}", name="object", mime_type="application/json",
                           description="One object of the scene by name (JSON).", complete={"name": object_names})
    def one_object(name: str) -> str:
        return msgspec.json.encode(describe(_object(name))).decode()


def run_python_tool(code: Annotated[str, msgspec.Meta(max_length=100_000, description="Python source; bpy is imported; "
                                                      "assign what to return to `result`")]) -> Any:
    """UNSAFE: run arbitrary Python inside Blender, with full access to bpy, the files and the
    network of the user's machine. Only offered because the user turned it on in the add-on's
    preferences. Assign the value to return (JSON) to `result`. Prefer the specific tools."""
    refuse_while_rendering("run code")
    namespace: dict[str, Any] = {"bpy": bpy, "result": None}
    exec(compile(code, "<agent code>", "exec"), namespace)  # noqa: S102 - the user opted in
    return namespace["result"]


RUN_PYTHON_OPTIONS: dict[str, Any] = {
    "name": "run_python_UNSAFE",
    "title": "Run arbitrary Python in Blender (unsafe)",
    "annotations": {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": True},
    "path_guard": False,
    # only requests that ask for a script: the unsafe tool must not come first for everyday work
    "example_requests": [
        "run this Python snippet in Blender", "execute my bpy code", "rename all the materials with a script",
    ],
}
