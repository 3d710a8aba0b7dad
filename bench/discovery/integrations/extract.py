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
#: add-on: (folder put on sys.path, package, tool modules and their declare functions)
ADDONS = {
    "Blender": (ROOT / "integrations/blender", "toolbridge_blender", [("scene_tools", "declare")]),
    "LibreOffice": (ROOT / "integrations/libreoffice/toolbridge_libreoffice/pythonpath", "toolbridge_office",
                    [("office_tools", "declare"), ("writer_tools", "declare_writer")]),
    "FreeCAD": (ROOT / "integrations/freecad/toolbridge", "toolbridge_freecad", [("doc_tools", "declare")]),
}


def declared(app_name: str) -> Any:
    from app_client import App

    folder, package, modules = ADDONS[app_name]
    shell = types.ModuleType(package)  # the package without its __init__, which starts the add-on
    shell.__path__ = [str(folder / package)]
    sys.modules[package] = shell
    app = App(app_name)
    for module_name, function in modules:
        module = importlib.import_module(f"{package}.{module_name}")
        declare = getattr(module, function)
        declare(app) if function == "declare" and app_name != "LibreOffice" else declare(app, None)
        if app_name == "Blender":
            app.tool(**module.RUN_PYTHON_OPTIONS)(module.run_python_tool)
    return app


def main() -> None:
    for name in HOST_MODULES:
        sys.modules.setdefault(name, mock.MagicMock(name=name))
    apps, requests = [], {}
    for app_name in ADDONS:
        app = declared(app_name)
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
