"""Write the catalogue and typical requests of the Blender, LibreOffice and FreeCAD add-ons' tools.

    .venv/bin/python bench/discovery/integrations/extract.py

Each add-on's ``declare`` runs against an ``app_client.App`` that never connects, with its host
program's modules (``bpy``, ``uno``, ``FreeCAD``...) stood in for by empty stand-ins: declaring a
tool reads only its signature, docstring and options, never the host. Writes
``catalogue_integrations.json`` (the round-5 catalogue format: apps, tools with name, title,
description, inputSchema, annotations) and ``requests_integrations.json`` (``{"App": {"tool":
[requests]}}``, what each add-on's author wrote as ``example_requests``) beside this file.
Blender's ``run_python_UNSAFE`` (off unless the user allows code execution) is included, as a
user who allowed it would have it.
"""

from __future__ import annotations

import importlib
import json
import sys
import types
from pathlib import Path
from typing import Any
from unittest import mock

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
HOST_MODULES = ["bpy", "bmesh", "uno", "com", "com.sun", "com.sun.star", "com.sun.star.beans", "com.sun.star.io",
                "FreeCAD", "FreeCADGui", "PySide2", "Mesh", "Part"]


def _package(folder: Path, name: str) -> str:
    """Make ``name`` importable from ``folder`` without running its ``__init__`` (which starts the
    add-on inside its host program); returns the name, for the imports that follow."""
    shell = types.ModuleType(name)
    shell.__path__ = [str(folder / name)]
    sys.modules[name] = shell
    return name


def _blender(app: Any) -> None:
    package = _package(ROOT / "integrations/blender", "toolbridge_blender")
    scene_tools = importlib.import_module(package + ".scene_tools")
    scene_tools.declare(app)
    app.tool(**scene_tools.RUN_PYTHON_OPTIONS)(scene_tools.run_python_tool)  # opt-in (allow_code_execution)


def _libreoffice(app: Any) -> None:
    package = _package(ROOT / "integrations/libreoffice/toolbridge_libreoffice/pythonpath", "toolbridge_office")
    # the Office object only serves calls, so declaring needs none
    importlib.import_module(package + ".office_tools").declare(app, None)
    importlib.import_module(package + ".writer_tools").declare_writer(app, None)


def _freecad(app: Any) -> None:
    package = _package(ROOT / "integrations/freecad/toolbridge", "toolbridge_freecad")
    importlib.import_module(package + ".doc_tools").declare(app)


#: Each add-on's app name and how it declares its tools (as its ``__init__`` does).
ADDONS = {"Blender": _blender, "LibreOffice": _libreoffice, "FreeCAD": _freecad}


def main() -> None:
    from app_client import App

    for name in HOST_MODULES:
        sys.modules.setdefault(name, mock.MagicMock(name=name))
    apps, requests = [], {}
    for app_name, declare in ADDONS.items():
        app = App(app_name)
        declare(app)
        tools = []
        for definition in app.tools.values():
            spec = definition.spec
            tool: dict[str, Any] = {"name": spec.name, "description": spec.description or "",
                                    "inputSchema": spec.input_schema}
            if spec.title:
                tool["title"] = spec.title
            if spec.annotations:
                tool["annotations"] = spec.annotations
            tools.append(tool)
            if spec.example_requests:
                requests.setdefault(app_name, {})[spec.name] = list(spec.example_requests)
        apps.append({"name": app_name, "tools": tools})
    (HERE / "catalogue_integrations.json").write_text(json.dumps({"apps": apps}, indent=1) + "\n")
    (HERE / "requests_integrations.json").write_text(json.dumps(requests, indent=1) + "\n")
    print(", ".join(f"{a['name']} {len(a['tools'])} tools" for a in apps))


if __name__ == "__main__":
    main()
