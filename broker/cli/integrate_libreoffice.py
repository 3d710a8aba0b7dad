"""Installing the LibreOffice extension (``integrations/libreoffice/``) into a user's office.

Theory of operation
-------------------
The extension is an ordinary ``.oxt`` (a zip) installed with the office's own ``unopkg``, as
users install any extension. :func:`build` makes it: the extension's files, plus ``vendor/``
holding ``app_client`` (copied from this installation) and its dependencies as wheels for the
*office's* Python version and platform (``pip install --target``, run by this toolbridge's own
Python; nothing is installed into the office's or the system's Python). The office's Python
is ``program/python`` in LibreOffice's own builds (Windows, macOS, TDF packages), or the
system's ``python3`` with the ``uno`` module on Linux distributions (Debian's python3-uno);
:func:`probe` asks it for its version and platform.

``unopkg`` installs for the current user; it refuses that to root, so as root the extension is
installed for all users (``--shared``), which is what root can mean. ``UserInstallation`` in
the environment (a URL, as ``-env:UserInstallation``) picks another user profile: the
tests' private one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import app_client

from .integrate_blender import IntegrationError, program_env, vendor

__all__ = ["EXTENSION_ID", "IntegrationError", "build", "find_office", "install", "installed", "office_python", "probe",
           "remove"]

EXTENSION_ID = "org.toolbridge.libreoffice"
_PROBE = ("import json, sys, sysconfig, uno; "
          "print(json.dumps({'python': list(sys.version_info[:2]), 'platform': sysconfig.get_platform()}))")


def find_office(explicit: str | None = None) -> Path:
    """The office's ``program`` folder (where soffice and unopkg live)."""
    candidates: list[str] = []
    if explicit:
        candidates.append(shutil.which(explicit) or explicit)
    else:
        candidates += [found for name in ("soffice", "libreoffice") if (found := shutil.which(name))]
        candidates += ["/Applications/LibreOffice.app/Contents/MacOS/soffice",
                       str(Path(os.environ.get("ProgramFiles", "C:/Program Files"), "LibreOffice/program/soffice.exe"))]
    for candidate in candidates:
        path = Path(candidate)
        if path.exists():
            program = path.resolve().parent
            if any((program / name).exists() for name in ("unopkg", "unopkg.exe", "unopkg.com")):
                return program
            if explicit:
                raise IntegrationError(f"{program} has no unopkg: give the path of LibreOffice's soffice")
    if explicit:
        raise IntegrationError(f"no LibreOffice at {explicit}")
    raise IntegrationError("LibreOffice was not found: install it (Debian/Ubuntu: `sudo apt-get install "
                           "libreoffice-calc libreoffice-writer python3-uno`) or give soffice's path with --office")


def _unopkg(program: Path, *args: str) -> subprocess.CompletedProcess[str]:
    unopkg = next(str(program / n) for n in ("unopkg.com", "unopkg.exe", "unopkg") if (program / n).exists())
    scope = ["--shared"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    try:
        return subprocess.run([unopkg, *args, *scope], capture_output=True, text=True, timeout=300, env=program_env())
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise IntegrationError(f"could not run {unopkg}: {exc}") from exc


def office_python(program: Path) -> str:
    """The Python the office runs extensions with."""
    for name in ("python", "python.exe"):
        if (program / name).exists():
            return str(program / name)
    return "/usr/bin/python3" if Path("/usr/bin/python3").exists() else "python3"


def probe(program: Path) -> dict[str, Any]:
    """The office's Python: its version and platform (it must import ``uno``)."""
    python = office_python(program)
    try:
        done = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=60, env=program_env())
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise IntegrationError(f"could not run the office's Python {python}: {exc}") from exc
    if done.returncode != 0:
        raise IntegrationError(f"{python} cannot import uno: install LibreOffice's Python support "
                               "(Debian/Ubuntu: `sudo apt-get install python3-uno`)")
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    answer["python_path"] = python
    return answer


def extension_source() -> Path:
    source = Path(app_client.__file__).resolve().parent.parent / "integrations" / "libreoffice" / "toolbridge_libreoffice"
    if not (source / "description.xml").exists():
        raise IntegrationError(f"the extension's source is not at {source}: run toolbridge from its repository "
                               "(python3 dev.py ...), which has integrations/libreoffice/")
    return source


def build(destination: Path, python: list[int], platform: str) -> Path:
    """The ``.oxt`` at ``destination``: the extension with app_client vendored for that Python."""
    with tempfile.TemporaryDirectory(prefix="toolbridge-oxt-") as staging_dir:
        staging = Path(staging_dir) / "extension"
        shutil.copytree(extension_source(), staging, ignore=shutil.ignore_patterns("__pycache__", "vendor"))
        vendor(staging / "vendor", python, platform, "the office")
        with zipfile.ZipFile(destination, "w", zipfile.ZIP_DEFLATED) as oxt:
            for path in sorted(staging.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    oxt.write(path, path.relative_to(staging).as_posix())
    return destination


def install(program: Path) -> dict[str, Any]:
    """Build the extension for the office's Python and install it with unopkg (replacing an
    older one); returns :func:`probe`'s answer."""
    info = probe(program)
    with tempfile.TemporaryDirectory(prefix="toolbridge-oxt-") as folder:
        oxt = build(Path(folder) / "toolbridge.oxt", info["python"], info["platform"])
        done = _unopkg(program, "add", "--force", "--suppress-license", str(oxt))
    if done.returncode != 0:
        raise IntegrationError(f"unopkg could not install the extension (is LibreOffice running with this "
                               f"profile? quit it first):\n{(done.stderr or done.stdout).strip()[-800:]}")
    return info


def installed(program: Path) -> bool:
    done = _unopkg(program, "list", EXTENSION_ID)
    return done.returncode == 0 and EXTENSION_ID in done.stdout


def remove(program: Path) -> bool:
    """Remove the extension; False when it was not installed."""
    if not installed(program):
        return False
    done = _unopkg(program, "remove", EXTENSION_ID)
    if done.returncode != 0:
        raise IntegrationError(f"unopkg could not remove the extension (is LibreOffice running? quit it first):\n"
                               f"{(done.stderr or done.stdout).strip()[-800:]}")
    return True
