"""Installing the Blender add-on (``integrations/blender/``) into a user's Blender.

Theory of operation
-------------------
Blender itself is asked where things are: :func:`probe` runs ``blender --background`` with a
short Python expression that prints one JSON line (the user add-on folder, Blender's Python
version and platform, whether the add-on is enabled). Blender honours
``BLENDER_USER_SCRIPTS`` / ``BLENDER_USER_CONFIG``, so a test (or a user with a portable set-up)
can point it elsewhere.

:func:`install` copies the add-on package into that folder and vendors what it imports into
its ``vendor/`` folder: ``app_client`` (copied from this installation) and its dependencies as
wheels for *Blender's* Python version and platform (``pip install --target`` run by this
toolbridge's own Python, never Blender's and never into a system site-packages). Then Blender
enables the add-on and saves its preferences, as the Preferences window would.
:func:`remove` disables it and deletes the folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from collections.abc import Mapping
from typing import Any

import app_client

from ..errors import BrokerError

__all__ = ["ADDON", "APP_CLIENT_DEPENDENCIES", "IntegrationError", "addon_source", "find_blender", "install", "program_env",
           "install_staged", "platform_tags", "probe", "remove", "vendor"]

ADDON = "toolbridge_blender"
#: What app_client needs at run time (pyproject.toml's dependencies that app_client imports;
#: tests/test_blender_integration.py checks the two lists agree).
APP_CLIENT_DEPENDENCIES = ("trio>=0.27", "msgspec>=0.19", "attrs>=23.1", "structlog>=24.1", "platformdirs>=4.0",
                           "outcome>=1.2")
_MARK = "TOOLBRIDGE-PROBE "
_PROBE = f"""
import json, sys, sysconfig, addon_utils, bpy
print({_MARK!r} + json.dumps({{
    "addons": bpy.utils.user_resource("SCRIPTS", path="addons", create=True),
    "python": list(sys.version_info[:2]),
    "platform": sysconfig.get_platform(),
    "blender": bpy.app.version_string,
    "enabled": addon_utils.check({ADDON!r})[1],
}}), flush=True)
"""
_ENABLE = f"""
import addon_utils, bpy
module = addon_utils.enable({ADDON!r}, default_set=True, persistent=True)
bpy.ops.wm.save_userpref()
print({_MARK!r} + ("enabled" if module is not None else "failed"), flush=True)
"""
_DISABLE = f"""
import addon_utils, bpy
addon_utils.disable({ADDON!r}, default_set=True)
bpy.ops.wm.save_userpref()
print({_MARK!r} + "disabled", flush=True)
"""


class IntegrationError(BrokerError):
    """Something the user can fix; the message says what."""


def program_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment to start a program that embeds the system's Python in.

    Debian's Blender finds its Python's standard library by looking for ``python3.X`` on PATH:
    with a virtual environment's or pyenv's folder first there (``python3 dev.py test``, an
    activated venv) it loads that Python's compiled modules, which do not fit its own libpython
    (``ImportError: ... _ssl ... undefined symbol``), and the add-on never starts. Folders whose
    ``python3*`` is not the system's move after the others; PYTHONHOME and PYTHONPATH go."""
    result = dict(os.environ if env is None else env)
    entries = [entry for entry in result.get("PATH", "").split(os.pathsep) if entry]

    def other_python(entry: str) -> bool:
        try:
            found = [p for p in Path(entry).glob("python3*") if p.is_file()]
        except OSError:
            return False
        return any(not str(p.resolve()).startswith("/usr/") for p in found)

    result["PATH"] = os.pathsep.join([e for e in entries if not other_python(e)] +
                                     [e for e in entries if other_python(e)])
    result.pop("PYTHONHOME", None)
    result.pop("PYTHONPATH", None)
    return result


def find_blender(explicit: str | None = None) -> str:
    """``explicit``, else ``blender`` on PATH, else the usual install places."""
    if explicit:
        if not Path(explicit).exists() and shutil.which(explicit) is None:
            raise IntegrationError(f"no Blender at {explicit}")
        return shutil.which(explicit) or explicit
    found = shutil.which("blender")
    candidates = [found] if found else []
    candidates += ["/Applications/Blender.app/Contents/MacOS/Blender",
                   *(str(p) for p in sorted(Path(os.environ.get("ProgramFiles", "C:/Program Files"),
                                                 "Blender Foundation").glob("Blender */blender.exe")))]
    for candidate in candidates:
        if candidate and Path(candidate).exists():
            return candidate
    raise IntegrationError("Blender was not found: install it (Debian/Ubuntu: `sudo apt-get install blender`) "
                           "or give its path with --blender")


def _run_in_blender(blender: str, expression: str) -> str:
    """Run ``expression`` in ``blender --background``; the text after the marker it printed."""
    try:
        done = subprocess.run([blender, "--background", "--python-exit-code", "1", "--python-expr", expression],
                              capture_output=True, text=True, timeout=300, env=program_env())
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise IntegrationError(f"could not run {blender}: {exc}") from exc
    for line in done.stdout.splitlines():
        if line.startswith(_MARK):
            return line[len(_MARK):]
    tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
    raise IntegrationError(f"{blender} did not answer (exit status {done.returncode}):\n{tail}")


def probe(blender: str) -> dict[str, Any]:
    """Where Blender keeps user add-ons, its Python, its platform, whether ours is enabled."""
    answer: dict[str, Any] = json.loads(_run_in_blender(blender, _PROBE))
    return answer


def addon_source() -> Path:
    """The add-on package in this toolbridge checkout (``integrations/blender/toolbridge_blender``)."""
    source = Path(app_client.__file__).resolve().parent.parent / "integrations" / "blender" / ADDON
    if not (source / "__init__.py").exists():
        raise IntegrationError(f"the add-on's source is not at {source}: run toolbridge from its repository "
                               "(python3 dev.py ...), which has integrations/blender/")
    return source


def platform_tags(platform: str) -> list[str]:
    """pip ``--platform`` tags for a ``sysconfig.get_platform()`` value of Blender's Python."""
    if platform.startswith("linux-"):
        machine = platform.split("-", 1)[1]
        return [f"manylinux_2_{minor}_{machine}" for minor in (17, 28, 31, 34)] + [f"manylinux2014_{machine}"]
    if platform.startswith("macosx-"):
        machine = platform.rsplit("-", 1)[1]
        machines = ["arm64", "universal2"] if machine == "arm64" else ["x86_64", "universal2"]
        return [f"macosx_{major}_0_{m}" for major in (10, 11, 12, 13, 14) for m in machines]
    return [platform.replace("-", "_").replace(".", "_")]


def vendor(target: Path, python: list[int], platform: str, program: str = "Blender") -> None:
    """app_client and its dependencies into ``target`` for ``program``'s Python and platform
    (wheels only; never installed into that Python itself)."""
    target.mkdir(parents=True)
    shutil.copytree(Path(app_client.__file__).resolve().parent, target / "app_client",
                    ignore=shutil.ignore_patterns("__pycache__", "testing.py"))
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
               "--target", str(target), "--only-binary=:all:"]
    if tuple(python) != sys.version_info[:2] or platform != sysconfig.get_platform():
        command += ["--python-version", f"{python[0]}.{python[1]}", "--implementation", "cp"]
        for tag in platform_tags(platform):
            command += ["--platform", tag]
    done = subprocess.run([*command, *APP_CLIENT_DEPENDENCIES], capture_output=True, text=True)
    if done.returncode != 0:
        raise IntegrationError(f"pip could not fetch app_client's dependencies for {program}'s Python "
                               f"{python[0]}.{python[1]} ({platform}):\n{done.stderr.strip()[-800:]}")


def install_staged(source: Path, destination: Path, python: list[int], platform: str, program: str) -> None:
    """``source`` with app_client vendored for ``program``'s Python, as ``destination``: built
    beside it first, so a failed install leaves the previous one as it was."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = destination.with_name(f".{destination.name}.installing")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source, staging, ignore=shutil.ignore_patterns("__pycache__", "vendor"))
    try:
        vendor(staging / "vendor", python, platform, program)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(destination, ignore_errors=True)
    staging.rename(destination)


def install(blender: str) -> dict[str, Any]:
    """Install (or reinstall) and enable the add-on; returns what :func:`probe` says after."""
    source = addon_source()
    info = probe(blender)
    destination = Path(info["addons"]) / ADDON
    install_staged(source, destination, info["python"], info["platform"], "Blender")
    if _run_in_blender(blender, _ENABLE) != "enabled":
        raise IntegrationError(f"Blender could not enable the add-on in {destination}: start Blender and look "
                               "at Edit > Preferences > Add-ons > toolbridge")
    return probe(blender)


def remove(blender: str) -> Path | None:
    """Disable and delete the add-on; the folder removed, or None when it was not installed."""
    info = probe(blender)
    destination = Path(info["addons"]) / ADDON
    if not destination.exists():
        return None
    _run_in_blender(blender, _DISABLE)
    shutil.rmtree(destination)
    return destination
