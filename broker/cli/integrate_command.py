"""``toolbridge integrate PROGRAM``: install toolbridge's add-on into a real desktop program.

``toolbridge integrate blender`` installs and enables the Blender add-on
(:mod:`broker.cli.integrate_blender`), ``toolbridge integrate freecad`` the FreeCAD add-on
(:mod:`broker.cli.integrate_freecad`), ``toolbridge integrate libreoffice`` the LibreOffice
extension (:mod:`broker.cli.integrate_libreoffice`); ``--remove`` undoes that, ``--list``
shows what is installed. Each program's module does the work; this one parses and prints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable, NamedTuple

from . import integrate_blender, integrate_freecad, integrate_libreoffice
from .integrate_blender import IntegrationError
from ._common import EXIT_ERROR, EXIT_OK, EXIT_USAGE, SubParsers, add_command

__all__ = ["PROGRAMS", "add_parser", "cmd_integrate"]


class _Program(NamedTuple):
    """One program's part of the command: find it, then say what is installed, install, remove.

    Each returns the line to print; each may raise ``IntegrationError`` (printed as such)."""

    locate: Callable[[argparse.Namespace], Any]
    status: Callable[[Any], str]
    install: Callable[[Any], str]
    remove: Callable[[Any], str]


def _blender_status(blender: str) -> str:
    info = integrate_blender.probe(blender)
    installed = (Path(info["addons"]) / integrate_blender.ADDON).exists()
    state = ("installed, enabled" if info["enabled"] else "installed, disabled") if installed else "not installed"
    return f"blender {info['blender']} ({blender}): {state}; add-ons in {info['addons']}"


def _blender_install(blender: str) -> str:
    info = integrate_blender.install(blender)
    return (f"installed and enabled the toolbridge add-on for Blender {info['blender']} in "
            f"{info['addons']}/{integrate_blender.ADDON}\n"
            "Start Blender: it connects to the running toolbridge daemon (or waits for one); its state is in "
            "the 3D Viewport's sidebar (N), tab toolbridge.")


def _freecad_status(freecad: str) -> str:
    info, installed = integrate_freecad.installed(freecad)
    state = "installed" if installed else "not installed"
    return f"freecad {info['freecad']} ({freecad}): {state}; add-ons in {info['mod']}"


def _freecad_install(freecad: str) -> str:
    info = integrate_freecad.install(freecad)
    return (f"installed the toolbridge add-on for FreeCAD {info['freecad']} in "
            f"{info['mod']}/{integrate_freecad.MOD_FOLDER}\n"
            "Start FreeCAD: it connects to the running toolbridge daemon (or waits for one); its state is in "
            "the toolbridge dock on the right of its main window.")


def _add_on_removed(removed: Path | None) -> str:
    return f"removed the toolbridge add-on from {removed}" if removed else "the toolbridge add-on was not installed"


def _office_status(program: Path) -> str:
    # Worded apart from Blender's line ("not installed"), which its test looks for.
    installed = integrate_libreoffice.installed(program)
    state = f"extension {integrate_libreoffice.EXTENSION_ID} installed" if installed else "no toolbridge extension"
    return f"libreoffice ({program}): {state}"


def _office_install(program: Path) -> str:
    info = integrate_libreoffice.install(program)
    return (f"installed the toolbridge extension ({integrate_libreoffice.EXTENSION_ID}) into LibreOffice "
            f"({program}), for its Python {info['python'][0]}.{info['python'][1]}\n"
            "Start LibreOffice: it connects to the running toolbridge daemon (or waits for one); "
            "Tools > Add-Ons > toolbridge shows its state.")


def _office_remove(program: Path) -> str:
    removed = integrate_libreoffice.remove(program)
    return "removed the toolbridge extension from LibreOffice" if removed else "the toolbridge extension was not installed"


_PROGRAMS: dict[str, _Program] = {
    "blender": _Program(lambda args: integrate_blender.find_blender(args.blender), _blender_status,
                        _blender_install, lambda blender: _add_on_removed(integrate_blender.remove(blender))),
    "freecad": _Program(lambda args: integrate_freecad.find_freecad(args.freecad), _freecad_status,
                        _freecad_install, lambda freecad: _add_on_removed(integrate_freecad.remove(freecad))),
    "libreoffice": _Program(lambda args: integrate_libreoffice.find_office(args.office), _office_status,
                            _office_install, _office_remove),
}


#: The programs toolbridge integrates with.
PROGRAMS = tuple(_PROGRAMS)


def _list(args: argparse.Namespace) -> int:
    for name, program in _PROGRAMS.items():
        try:
            print(program.status(program.locate(args)))
        except IntegrationError as exc:
            print(f"{name}: not available ({exc})")
    return EXIT_OK


def cmd_integrate(args: argparse.Namespace) -> int:
    if args.list:
        return _list(args)
    if args.program is None:
        print(f"toolbridge integrate: name a program ({', '.join(PROGRAMS)}) or give --list", file=sys.stderr)
        return EXIT_USAGE
    program = _PROGRAMS[args.program]
    try:
        located = program.locate(args)
        print(program.remove(located) if args.remove else program.install(located))
    except IntegrationError as exc:
        print(f"toolbridge integrate {args.program}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def add_parser(sub: SubParsers) -> None:
    parser = add_command(sub, "integrate")
    parser.add_argument("program", nargs="?", choices=PROGRAMS, help="the program")
    parser.add_argument("--list", action="store_true", help="show where the add-ons are installed")
    parser.add_argument("--remove", action="store_true", help="disable and delete the add-on")
    parser.add_argument("--blender", metavar="PATH", help="the Blender executable (default: blender on PATH)")
    parser.add_argument("--freecad", metavar="PATH",
                        help="FreeCAD's console program, freecadcmd (default: freecadcmd on PATH)")
    parser.add_argument("--office", metavar="PATH",
                        help="LibreOffice's soffice executable (default: soffice on PATH)")
    parser.set_defaults(func=cmd_integrate)
