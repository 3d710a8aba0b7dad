"""The tools and resources FreeCAD offers agents: a thin layer over FreeCAD's document API.

Theory of operation
-------------------
:func:`declare` puts every tool and resource on an :class:`app_client.App` whose
``gui_executor`` runs calls on FreeCAD's GUI thread (see ``__init__.py``): each sync handler
here runs there, one at a time, between two of Qt's events. Every change is one FreeCAD
transaction named ``toolbridge: ...``, so the ``undo`` tool (and the user's Ctrl+Z) steps back
through what the agent did. Solids are FreeCAD's parametric Part primitives (``Part::Box``,
...) and booleans (``Part::Cut``, ...), as the Part workbench makes them, so a user can edit
what an agent built.

``make_grid`` is the long one: ``async``, each copy one step on the GUI thread
(``ctx.run_on_gui_thread``); between steps the window repaints and other calls are answered,
the agent gets progress, and a cancel (or the deadline) ends it before the next copy and
removes the copies made so far.

Handlers raise :class:`app_client.ToolError` with a message that says what to do; anything
else a handler raises becomes a safe app error (app_client logs the details).
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

import FreeCAD
import FreeCADGui
import msgspec
import trio
from PySide2 import QtCore, QtWidgets

from app_client import App, ContentBlock, ToolContext, ToolError, image

__all__ = ["declare"]

READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False}
CHANGES = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": False}
DESTROYS = {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": False}

Vector = Annotated[tuple[float, float, float], msgspec.Meta(description="x, y, z in millimetres")]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=200,
                                   description="an object's name or label, as list_objects shows them")]
Solid = Literal["box", "cylinder", "sphere", "cone", "torus"]
_SOLIDS = {"box": "Part::Box", "cylinder": "Part::Cylinder", "sphere": "Part::Sphere", "cone": "Part::Cone",
           "torus": "Part::Torus"}
_BOOLEANS = {"cut": "Part::Cut", "fuse": "Part::Fuse", "common": "Part::Common"}
_PART_EXPORTS = (".step", ".stp", ".iges", ".igs", ".brep")
_MESH_EXPORTS = (".stl", ".obj")
#: How the last make_grid went (GUI thread only), for the document summary.
_last_grid: dict[str, object] = {}


def _doc() -> Any:
    doc = FreeCAD.ActiveDocument
    if doc is None:
        raise ToolError("no document is open: call new_document first")
    return doc


def _object(name: str) -> Any:
    doc = _doc()
    obj = doc.getObject(name) or next(iter(doc.getObjectsByLabel(name)), None)
    if obj is None:
        known = ", ".join(sorted(o.Label for o in doc.Objects)[:20]) or "none"
        raise ToolError(f"no object named {name!r} in {doc.Label}; objects are: {known}")
    return obj


def _round(values: Any) -> list[float]:
    return [round(float(v), 4) for v in values]


def _placement(obj: Any) -> dict[str, list[float]]:
    placement = obj.Placement
    yaw, pitch, roll = placement.Rotation.toEuler()
    return {"position": _round(placement.Base), "rotation_degrees": _round((roll, pitch, yaw))}


def describe(obj: Any) -> dict[str, Any]:
    """What an agent needs to know about one object (JSON)."""
    info: dict[str, Any] = {"name": obj.Name, "label": obj.Label, "type": obj.TypeId, **_placement(obj)}
    shape = getattr(obj, "Shape", None)
    if shape is not None and not shape.isNull():
        box = shape.BoundBox
        info.update(volume=round(shape.Volume, 3), area=round(shape.Area, 3), valid=shape.isValid(),
                    bounding_box={"min": _round((box.XMin, box.YMin, box.ZMin)),
                                  "max": _round((box.XMax, box.YMax, box.ZMax))})
    view = getattr(obj, "ViewObject", None)
    if view is not None:
        info["visible"] = bool(view.Visibility)
        if hasattr(view, "ShapeColor"):
            info["color"] = _round(view.ShapeColor[:3])
    info["inputs"] = [o.Name for o in obj.OutList]
    return info


class _Change:
    """One undoable change: a FreeCAD transaction, aborted if the handler fails."""

    def __init__(self, doc: Any, title: str) -> None:
        self.doc, self.title = doc, title

    def __enter__(self) -> None:
        self.doc.openTransaction(f"toolbridge: {self.title}")

    def __exit__(self, kind: object, *rest: object) -> None:
        if kind is None:
            self.doc.commitTransaction()
            self.doc.recompute()
        else:
            self.doc.abortTransaction()


def outline() -> dict[str, Any]:
    doc = _doc()
    return {"document": doc.Name, "label": doc.Label, "file": doc.FileName or None,
            "objects": [{"name": o.Name, "label": o.Label, "type": o.TypeId,
                         "inputs": [i.Name for i in o.OutList]} for o in doc.Objects]}


async def window_png(
    ctx: ToolContext,
    fit_all: Annotated[bool, msgspec.Meta(description="first turn the 3D view isometric and zoom it to "
                                          "show every object")] = False,
) -> ContentBlock:
    """A screenshot of FreeCAD's main window as the user sees it (PNG): the 3D view, the
    model tree, the toolbridge dock."""
    if fit_all:
        await ctx.run_on_gui_thread(_fit_all)  # then Qt's loop repaints before the picture
    return image(await ctx.run_on_gui_thread(_grab_window), "image/png")


def _fit_all() -> None:
    if FreeCADGui.ActiveDocument is not None:
        # Bring the active document's 3D view to the front (FreeCAD's start page may be there).
        label = FreeCAD.ActiveDocument.Label
        mdi = FreeCADGui.getMainWindow().findChild(QtWidgets.QMdiArea)
        for sub in mdi.subWindowList() if mdi is not None else []:
            if sub.windowTitle().split(" : ")[0] == label:
                mdi.setActiveSubWindow(sub)
                break
        view = FreeCADGui.ActiveDocument.ActiveView
        view.viewIsometric()
        view.fitAll()
        view.redraw()


def _grab_window() -> bytes:
    window = FreeCADGui.getMainWindow()
    # From the screen, not QWidget.grab(): the 3D view is drawn with OpenGL, which grab() misses.
    pixmap = QtWidgets.QApplication.primaryScreen().grabWindow(window.winId())
    buffer = QtCore.QBuffer()
    buffer.open(QtCore.QIODevice.WriteOnly)
    if pixmap.isNull() or not pixmap.save(buffer, "PNG"):
        raise ToolError("FreeCAD did not take the screenshot")
    return bytes(buffer.data())


def declare(app: App) -> None:
    """Declare FreeCAD's tools and resources on ``app`` (before it runs)."""

    @app.tool(annotations=READ_ONLY, title="Document summary",
              example_requests=["what's in my FreeCAD model right now?", "give me an overview of this design",
                                "are any of the shapes broken?", "is anything wrong with the model?"])
    def document_summary() -> dict[str, Any]:
        """Summarise FreeCAD's active document: name, file, how many objects of each type,
        whether all shapes are valid, how the last make_grid went. Start here."""
        doc = FreeCAD.ActiveDocument
        if doc is None:
            return {"document": None, "open_documents": list(FreeCAD.listDocuments()),
                    "freecad_version": ".".join(FreeCAD.Version()[:3])}
        counts: dict[str, int] = {}
        for obj in doc.Objects:
            counts[obj.TypeId] = counts.get(obj.TypeId, 0) + 1
        return {"document": doc.Name, "label": doc.Label, "file": doc.FileName or None,
                "object_count": len(doc.Objects), "objects_by_type": counts,
                "invalid_shapes": [o.Name for o in doc.Objects if hasattr(o, "Shape") and not o.Shape.isNull()
                                   and not o.Shape.isValid()],
                "can_undo": doc.UndoCount > 0, "open_documents": list(FreeCAD.listDocuments()),
                "freecad_version": ".".join(FreeCAD.Version()[:3]), "last_grid": dict(_last_grid) or None}

    @app.tool(annotations=READ_ONLY, title="List documents",
              example_requests=["which FreeCAD files are open?", "what projects do I have going?",
                                "which model am I working in?", "show me all my designs in progress"])
    def list_documents() -> list[dict[str, Any]]:
        """The open documents: name, label, file, object count, and which one is active."""
        active = FreeCAD.ActiveDocument
        return [{"name": name, "label": doc.Label, "file": doc.FileName or None, "objects": len(doc.Objects),
                 "active": active is not None and doc.Name == active.Name}
                for name, doc in FreeCAD.listDocuments().items()]

    @app.tool(annotations=CHANGES, title="New document",
              example_requests=["start a new FreeCAD project", "create a blank document called Bracket",
                                "I want to begin a fresh design", "set up a clean slate for another part"])
    def new_document(
        name: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,62}$",
                                          description="letters, digits, underscores")] = "Unnamed",
    ) -> dict[str, Any]:
        """Create an empty document and make it the active one (FreeCAD adds a number if the
        name is taken)."""
        doc = FreeCAD.newDocument(name)
        FreeCAD.setActiveDocument(doc.Name)
        return {"name": doc.Name, "label": doc.Label}

    @app.tool(annotations=READ_ONLY, title="List objects",
              example_requests=["list the parts in this model", "what boxes are there in the design?",
                                "show every cylinder and where it sits", "which bodies are hidden?"])
    def list_objects(
        type_contains: Annotated[str, msgspec.Meta(max_length=64, description="only types containing this, "
                                                   "case-insensitive: Box, Cut, Part::Feature, ...")] | None = None,
    ) -> list[dict[str, Any]]:
        """List the active document's objects: name, label, type, position, visibility."""
        wanted = type_contains.lower() if type_contains else None
        return [{"name": o.Name, "label": o.Label, "type": o.TypeId, "position": _round(o.Placement.Base),
                 "visible": bool(o.ViewObject.Visibility) if o.ViewObject else None}
                for o in _doc().Objects if hasattr(o, "Placement") and (wanted is None or wanted in o.TypeId.lower())]

    @app.tool(annotations=READ_ONLY, title="Get object",
              example_requests=["how big is the bracket?", "what's the volume of the cylinder?",
                                "what are the outer dimensions of the plate?", "what was the hole cut made from?"])
    def get_object(name: Name) -> dict[str, Any]:
        """Everything about one object: placement, volume, area, bounding box, colour, inputs."""
        return describe(_object(name))

    @app.tool(annotations=CHANGES, title="Create solid",
              example_requests=["add a 20 mm cube", "make a cylinder 10 mm wide and 50 tall",
                                "I need a ball 30 mm across", "put a donut shape at the origin"])
    def create_solid(
        kind: Solid,
        size: Annotated[float, msgspec.Meta(gt=0, le=1e6, description="edge length (box) or diameter, in mm")] = 10.0,
        height: Annotated[float, msgspec.Meta(gt=0, le=1e6, description="height of a box, cylinder or cone, "
                                              "in mm (default: size)")] | None = None,
        name: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,62}$",
                                          description="the new object's name (FreeCAD adds a number if taken)")] | None = None,
        position: Vector = (0.0, 0.0, 0.0),
    ) -> dict[str, Any]:
        """Add a parametric Part solid (box, cylinder, sphere, cone, torus) to the active
        document. Returns the new object with its volume."""
        doc = _doc()
        tall = height if height is not None else size
        with _Change(doc, f"create {kind}"):
            obj = doc.addObject(_SOLIDS[kind], name or kind.title())
            if kind == "box":
                obj.Length = obj.Width = size
                obj.Height = tall
            elif kind == "cylinder":
                obj.Radius, obj.Height = size / 2, tall
            elif kind == "sphere":
                obj.Radius = size / 2
            elif kind == "cone":
                obj.Radius1, obj.Radius2, obj.Height = size / 2, 0, tall
            else:
                obj.Radius1, obj.Radius2 = size / 2, size / 8
            obj.Placement = FreeCAD.Placement(FreeCAD.Vector(*position), FreeCAD.Rotation())
        return describe(obj)

    @app.tool(annotations=CHANGES, title="Set placement",
              example_requests=["move the box 10 mm up", "rotate the cylinder 90 degrees around X",
                                "put the peg at 0, 0, 20", "lay the tube on its side"])
    def set_placement(
        name: Name,
        position: Vector | None = None,
        rotation_degrees: Annotated[tuple[float, float, float], msgspec.Meta(
            description="rotation about x, y, z in degrees (applied z, then y, then x)")] | None = None,
    ) -> dict[str, Any]:
        """Move and/or rotate an object; what is omitted stays."""
        obj = _object(name)
        if position is None and rotation_degrees is None:
            raise ToolError("give position, rotation_degrees or both")
        if not hasattr(obj, "Placement"):
            raise ToolError(f"{obj.Label} is a {obj.TypeId}, which has no placement")
        with _Change(obj.Document, f"place {obj.Name}"):
            placement = obj.Placement
            if position is not None:
                placement.Base = FreeCAD.Vector(*position)
            if rotation_degrees is not None:
                x, y, z = rotation_degrees
                placement.Rotation = FreeCAD.Rotation(z, y, x)
            obj.Placement = placement
        return describe(obj)

    @app.tool(annotations=CHANGES, title="Boolean operation",
              example_requests=["cut the cylinder out of the box", "drill a hole through the plate with the cylinder",
                                "join the two parts into one", "keep only where the sphere and cube overlap"])
    def boolean(
        operation: Annotated[Literal["cut", "fuse", "common"], msgspec.Meta(
            description="cut: base minus tool; fuse: union; common: intersection")],
        base: Name,
        tool: Name,
        name: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")] | None = None,
    ) -> dict[str, Any]:
        """Combine two solids into a new parametric one (the inputs are kept, hidden, as the
        Part workbench does). Returns the result with its volume."""
        first, second = _object(base), _object(tool)
        if first is second:
            raise ToolError("base and tool must be two different objects")
        doc = first.Document
        with _Change(doc, f"{operation} {first.Name} {second.Name}"):
            result = doc.addObject(_BOOLEANS[operation], name or operation.title())
            result.Base, result.Tool = first, second
            doc.recompute()
            if result.Shape.isNull():
                raise ToolError(f"FreeCAD could not {operation} {first.Label} and {second.Label}")
            for used in (first, second):
                if used.ViewObject:
                    used.ViewObject.Visibility = False
        return describe(result)

    @app.tool(annotations=CHANGES, title="Set colour",
              example_requests=["make the box red", "colour the bracket blue",
                                "paint the base plate grey so I can tell them apart", "show the bolt in yellow"])
    def set_color(
        name: Name,
        color: Annotated[list[float], msgspec.Meta(min_length=3, max_length=3,
                                                   description="red, green, blue, each 0 to 1")],
    ) -> dict[str, Any]:
        """Set the colour an object is shown in (its shape colour in the 3D view)."""
        obj = _object(name)
        if obj.ViewObject is None or not hasattr(obj.ViewObject, "ShapeColor"):
            raise ToolError(f"{obj.Label} is a {obj.TypeId}, which has no colour; pick a solid")
        if any(not 0 <= c <= 1 for c in color):
            raise ToolError("colour components go from 0 to 1")
        with _Change(obj.Document, f"colour {obj.Name}"):
            obj.ViewObject.ShapeColor = (color[0], color[1], color[2])
        return describe(obj)

    @app.tool(annotations=DESTROYS, title="Delete object",
              example_requests=["delete the sphere", "get rid of Cylinder001", "remove the extra box",
                                "throw away the test part"])
    def delete_object(name: Name) -> dict[str, Any]:
        """Delete an object from the active document (undo brings it back). Objects built
        from it (a boolean using it) break until it is back. Returns the objects left."""
        obj = _object(name)
        doc, deleted = obj.Document, obj.Name
        with _Change(doc, f"delete {deleted}"):
            doc.removeObject(deleted)
        return {"deleted": deleted, "objects": [o.Name for o in doc.Objects]}

    @app.tool(annotations=CHANGES, title="Undo",
              example_requests=["undo that last step", "go back one step", "revert the last three changes",
                                "oops, that cut was wrong, take it back"])
    def undo(steps: Annotated[int, msgspec.Meta(ge=1, le=100)] = 1) -> dict[str, Any]:
        """Undo the last change(s) to the active document, the agent's or the user's, as
        Ctrl+Z does."""
        doc = _doc()
        for _ in range(steps):
            if doc.UndoCount == 0:
                raise ToolError("nothing (more) to undo")
            doc.undo()
        doc.recompute()
        return {"undone": steps, "objects": [o.Name for o in doc.Objects]}

    @app.tool(annotations=DESTROYS, title="Save document",
              example_requests=["save the model", "save this as bracket.FCStd in my projects folder",
                                "store the design on the desktop", "keep my work so I can continue tomorrow"])
    def save_document(
        path: Annotated[str, msgspec.Meta(min_length=1, max_length=4096,
                                          description="absolute path ending in .FCStd (overwritten)")],
    ) -> dict[str, Any]:
        """Save the active document as a FreeCAD file at this path; an existing file there is
        overwritten."""
        _check_path(path, (".fcstd",))
        doc = _doc()
        try:
            doc.saveAs(path)
        except OSError as exc:  # FreeCAD's Base.FileException: its own words, without the dict around them
            raise ToolError(f"FreeCAD could not save {path}: {_freecad_message(exc)}") from None
        return {"path": path, "bytes": os.path.getsize(path)}

    @app.tool(annotations=DESTROYS, title="Export shapes",
              example_requests=["export the part as STEP", "get this ready for my 3D printer",
                                "send the bracket to the machine shop in a format they can open",
                                "save the housing as an OBJ mesh"])
    def export_shapes(
        path: Annotated[str, msgspec.Meta(min_length=1, max_length=4096, description=(
            "absolute path ending in .step, .stp, .iges, .igs, .brep, .stl or .obj (overwritten)"))],
        names: Annotated[list[str], msgspec.Meta(max_length=1000, description="objects to export "
                                                 "(default: every visible solid)")] | None = None,
    ) -> dict[str, Any]:
        """Export solids to STEP, IGES, BREP (exact) or STL, OBJ (meshed). An existing file at
        that path is overwritten."""
        import Mesh
        import Part

        extension = _check_path(path, _PART_EXPORTS + _MESH_EXPORTS)
        if names:
            chosen = [_object(n) for n in names]
        else:
            chosen = [o for o in _doc().Objects if o.isDerivedFrom("Part::Feature") and not o.Shape.isNull()
                      and o.ViewObject is not None and o.ViewObject.Visibility]
        if not chosen:
            raise ToolError("nothing to export: no visible solid (or give names)")
        try:
            (Part if extension in _PART_EXPORTS else Mesh).export(chosen, path)
        except OSError as exc:
            raise ToolError(f"FreeCAD could not export {path}: {_freecad_message(exc)}") from None
        if not os.path.exists(path):
            raise ToolError(f"FreeCAD did not export {path}")
        return {"path": path, "objects": [o.Name for o in chosen], "bytes": os.path.getsize(path)}

    app.tool(name="screenshot_window", annotations=READ_ONLY, title="Screenshot of FreeCAD's window",
             example_requests=["take a screenshot of FreeCAD", "show me what the part looks like",
                               "zoom out to fit everything and grab a picture",
                               "let me see the model tree and 3D view"])(window_png)
    app.tool(name="make_grid", annotations=CHANGES, title="Grid of copies", timeout=600,
             example_requests=["make a 5 by 5 grid of the peg", "repeat the bolt ten times side by side",
                               "lay out 3 rows of 4 pins 15 mm apart",
                               "array the pin six times along the length"])(make_grid)

    @app.resource("freecad://documents", name="open documents", mime_type="application/json",
                  description="FreeCAD's open documents (JSON).")
    def documents() -> str:
        return msgspec.json.encode(list_documents()).decode()

    @app.resource("freecad://document/outline", name="document outline", mime_type="application/json",
                  description="The active document: its objects and what each is built from (JSON).")
    def document_outline() -> str:
        return msgspec.json.encode(outline()).decode()

    def object_names(typed: str) -> list[str]:
        doc = FreeCAD.ActiveDocument
        return sorted(o.Name for o in (doc.Objects if doc else []) if o.Name.lower().startswith(typed.lower()))

    @app.resource_template("freecad://objects/{name}", name="object", mime_type="application/json",
                           description="One object of the active document by name (JSON).",
                           complete={"name": object_names})
    def one_object(name: str) -> str:
        return msgspec.json.encode(describe(_object(name))).decode()


def _freecad_message(exc: OSError) -> str:
    """What FreeCAD said (its exceptions carry a dict with the message under sErrMsg)."""
    detail = exc.args[0] if exc.args else ""
    if isinstance(detail, dict):
        detail = detail.get("sErrMsg") or detail.get("swhat") or ""
    return str(detail)[:200] or type(exc).__name__


def _check_path(path: str, extensions: tuple[str, ...]) -> str:
    if not os.path.isabs(path):
        raise ToolError("give an absolute path")
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        raise ToolError(f"the folder {folder!r} does not exist")
    extension = os.path.splitext(path)[1].lower()
    if extension not in extensions:
        raise ToolError(f"the path must end in {', '.join(extensions)}")
    return extension


class _Grid:
    """One make_grid in progress (GUI thread): the source, the group, the copies so far."""

    def __init__(self, source: Any, group: Any, columns: int, rows: int, spacing: float) -> None:
        self.source, self.group = source, group
        self.columns, self.rows, self.spacing = columns, rows, spacing
        self.copies: list[str] = []


async def make_grid(
    ctx: ToolContext,
    name: Name,
    columns: Annotated[int, msgspec.Meta(ge=1, le=100)] = 5,
    rows: Annotated[int, msgspec.Meta(ge=1, le=100)] = 5,
    spacing: Annotated[float, msgspec.Meta(gt=0, le=1e6, description="distance between copies, in mm")] = 20.0,
) -> dict[str, Any]:
    """Lay out columns x rows copies of a solid on a grid in the XY plane, in a new group.
    Long for big grids: reports progress copy by copy, FreeCAD stays usable meanwhile, and a
    cancel removes the copies made so far."""
    # This coroutine runs in app_client's thread: every FreeCAD access is a step on the GUI thread.
    job = await ctx.run_on_gui_thread(_grid_begin, name, columns, rows, spacing)
    total = columns * rows
    finished = False
    try:
        for index in range(total):
            await ctx.run_on_gui_thread(_grid_copy, job, index)
            await ctx.report_progress(index + 1, total, f"{index + 1} of {total} copies")
        finished = True
        return {"group": job.group.Name, "copies": len(job.copies)}
    finally:
        # Also after a cancel: remove a half-made grid (bounded: a FreeCAD that is quitting
        # runs no more GUI steps).
        with trio.move_on_after(10) as cleanup:
            cleanup.shield = True
            await ctx.run_on_gui_thread(_grid_end, job, finished)


def _grid_begin(name: str, columns: int, rows: int, spacing: float) -> _Grid:
    source = _object(name)
    if getattr(source, "Shape", None) is None or source.Shape.isNull():
        raise ToolError(f"{source.Label} has no shape to copy; pick a solid")
    doc = source.Document
    group = doc.addObject("App::DocumentObjectGroup", f"{source.Name}_grid")
    _last_grid.clear()
    _last_grid.update(source=source.Name, copies=columns * rows, done=0, cancelled=False)
    return _Grid(source, group, columns, rows, spacing)


def _grid_copy(job: _Grid, index: int) -> None:
    doc = job.source.Document
    column, row = index % job.columns, index // job.columns
    copy = doc.addObject("Part::Feature", f"{job.source.Name}_copy")
    copy.Shape = job.source.Shape.copy()
    placement = job.source.Placement.copy()
    placement.Base = placement.Base + FreeCAD.Vector(column * job.spacing, row * job.spacing, 0)
    copy.Placement = placement
    if copy.ViewObject and job.source.ViewObject:
        copy.ViewObject.ShapeColor = job.source.ViewObject.ShapeColor
    job.group.addObject(copy)
    job.copies.append(copy.Name)
    _last_grid["done"] = len(job.copies)


def _grid_end(job: _Grid, finished: bool) -> None:
    doc = job.source.Document
    if not finished:
        for name in [*job.copies, job.group.Name]:
            if doc.getObject(name) is not None:
                doc.removeObject(name)
        _last_grid["cancelled"] = True
    doc.recompute()


