"""Installing the FreeCAD add-on (``integrations/freecad/toolbridge``) into a user's FreeCAD.

Theory of operation
-------------------
FreeCAD's users install add-ons (by hand or with its Addon Manager) as a folder in
``<user data>/Mod``; FreeCAD runs each such folder's ``InitGui.py`` when its GUI starts, so
there is nothing to "enable". FreeCAD itself is asked where that folder is: :func:`probe` runs
``freecadcmd`` (FreeCAD without its GUI, same Python, same user folders) on a short script
that prints one JSON line: the ``Mod`` folder, FreeCAD's Python version and platform. FreeCAD
keeps its user data under ``XDG_DATA_HOME`` (``~/.local/share/FreeCAD`` by default), so a test
(or a user with a portable set-up) can point it elsewhere.

:func:`install` copies the add-on folder there as ``Mod/toolbridge`` and vendors
``app_client`` and its dependencies (wheels for *FreeCAD's* Python version and platform,
fetched by this toolbridge's own pip; never installed into the system Python) into its
``vendor/`` folder, with the same helper as the Blender add-on. :func:`remove` deletes it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import app_client

from .integrate_blender import IntegrationError, install_staged, program_env

__all__ = ["MOD_FOLDER", "addon_source", "find_freecad", "install", "installed", "probe", "remove"]

#: The add-on's folder name under FreeCAD's Mod folder.
MOD_FOLDER = "toolbridge"
_MARK = "TOOLBRIDGE-PROBE "
_PROBE = f"""
import json, sys, sysconfig, FreeCAD
print({_MARK!r} + json.dumps({{
    "mod": FreeCAD.getUserAppDataDir() + "Mod",
    "python": list(sys.version_info[:2]),
    "platform": sysconfig.get_platform(),
    "freecad": ".".join(FreeCAD.Version()[:3]),
}}), flush=True)
"""


def find_freecad(explicit: str | None = None) -> str:
    """``freecadcmd`` (FreeCAD's console program) given, on PATH or in the usual places."""
    if explicit:
        if not Path(explicit).exists() and shutil.which(explicit) is None:
            raise IntegrationError(f"no FreeCAD console program at {explicit}")
        return shutil.which(explicit) or explicit
    for name in ("freecadcmd", "FreeCADCmd"):
        found = shutil.which(name)
        if found:
            return found
    candidates = ["/Applications/FreeCAD.app/Contents/Resources/bin/FreeCADCmd",
                  *(str(p) for p in sorted(Path(os.environ.get("ProgramFiles", "C:/Program Files"))
                                           .glob("FreeCAD */bin/FreeCADCmd.exe")))]
    for candidate in candidates:
        if Path(candidate).exists():
            return candidate
    raise IntegrationError("FreeCAD was not found: install it (Debian/Ubuntu: `sudo apt-get install freecad`) "
                           "or give its console program (freecadcmd) with --freecad")


def probe(freecadcmd: str) -> dict[str, Any]:
    """Where FreeCAD keeps user add-ons (Mod), its Python and its platform."""
    with tempfile.TemporaryDirectory(prefix="toolbridge-freecad-") as folder:
        script = Path(folder) / "probe.py"
        script.write_text(_PROBE)
        try:
            done = subprocess.run([freecadcmd, str(script)], capture_output=True, text=True, timeout=120,
                                  stdin=subprocess.DEVNULL, env=program_env())
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise IntegrationError(f"could not run {freecadcmd}: {exc}") from exc
    for line in done.stdout.splitlines():
        if line.startswith(_MARK):
            answer: dict[str, Any] = json.loads(line[len(_MARK):])
            return answer
    tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
    raise IntegrationError(f"{freecadcmd} did not answer (exit status {done.returncode}):\n{tail}")


def addon_source() -> Path:
    """The add-on folder in this toolbridge checkout (``integrations/freecad/toolbridge``)."""
    source = Path(app_client.__file__).resolve().parent.parent / "integrations" / "freecad" / MOD_FOLDER
    if not (source / "InitGui.py").exists():
        raise IntegrationError(f"the add-on's source is not at {source}: run toolbridge from its repository "
                               "(python3 dev.py ...), which has integrations/freecad/")
    return source


def install(freecadcmd: str) -> dict[str, Any]:
    """Install (or reinstall) the add-on; returns what :func:`probe` said."""
    source = addon_source()
    info = probe(freecadcmd)
    install_staged(source, Path(info["mod"]) / MOD_FOLDER, info["python"], info["platform"], "FreeCAD")
    return info


def installed(freecadcmd: str) -> tuple[dict[str, Any], bool]:
    """What :func:`probe` says, and whether the add-on is in FreeCAD's Mod folder."""
    info = probe(freecadcmd)
    return info, (Path(info["mod"]) / MOD_FOLDER / "InitGui.py").exists()


def remove(freecadcmd: str) -> Path | None:
    """Delete the add-on; the folder removed, or None when it was not installed."""
    destination = Path(probe(freecadcmd)["mod"]) / MOD_FOLDER
    if not destination.exists():
        return None
    shutil.rmtree(destination)
    return destination
