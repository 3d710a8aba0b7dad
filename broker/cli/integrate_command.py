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

from . import integrate_blender, integrate_freecad, integrate_libreoffice
from ._common import EXIT_ERROR, EXIT_OK, EXIT_USAGE, SubParsers, add_command

__all__ = ["PROGRAMS", "add_parser", "cmd_integrate"]

#: The programs toolbridge integrates with.
PROGRAMS = ("blender", "freecad", "libreoffice")


def _list(args: argparse.Namespace) -> int:
    _list_blender(args)
    _list_freecad(args)
    _list_libreoffice(args)
    return EXIT_OK


def _list_freecad(args: argparse.Namespace) -> None:
    try:
        freecad = integrate_freecad.find_freecad(args.freecad)
        info, installed = integrate_freecad.installed(freecad)
    except integrate_blender.IntegrationError as exc:
        print(f"freecad: not available ({exc})")
        return
    state = "installed" if installed else "not installed"
    print(f"freecad {info['freecad']} ({freecad}): {state}; add-ons in {info['mod']}")


def _integrate_freecad(args: argparse.Namespace) -> int:
    try:
        freecad = integrate_freecad.find_freecad(args.freecad)
        if args.remove:
            removed = integrate_freecad.remove(freecad)
            print(f"removed the toolbridge add-on from {removed}" if removed else "the toolbridge add-on was not installed")
            return EXIT_OK
        info = integrate_freecad.install(freecad)
    except integrate_blender.IntegrationError as exc:
        print(f"toolbridge integrate freecad: {exc}", file=sys.stderr)
        return EXIT_ERROR
    print(f"installed the toolbridge add-on for FreeCAD {info['freecad']} in {info['mod']}/{integrate_freecad.MOD_FOLDER}\n"
          "Start FreeCAD: it connects to the running toolbridge daemon (or waits for one); its state is in "
          "the toolbridge dock on the right of its main window.")
    return EXIT_OK


def _list_blender(args: argparse.Namespace) -> int:
    try:
        blender = integrate_blender.find_blender(args.blender)
        info = integrate_blender.probe(blender)
    except integrate_blender.IntegrationError as exc:
        print(f"blender: not available ({exc})")
        return EXIT_OK
    installed = (Path(info["addons"]) / integrate_blender.ADDON).exists()
    state = ("installed, enabled" if info["enabled"] else "installed, disabled") if installed else "not installed"
    print(f"blender {info['blender']} ({blender}): {state}; add-ons in {info['addons']}")
    return EXIT_OK


def _list_libreoffice(args: argparse.Namespace) -> None:
    try:
        program = integrate_libreoffice.find_office(args.office)
        installed = integrate_libreoffice.installed(program)
    except integrate_libreoffice.IntegrationError as exc:
        print(f"libreoffice: not available ({exc})")
        return
    # Worded apart from Blender's line ("not installed"), which its test looks for.
    state = f"extension {integrate_libreoffice.EXTENSION_ID} installed" if installed else "no toolbridge extension"
    print(f"libreoffice ({program}): {state}")


def _libreoffice(args: argparse.Namespace) -> int:
    try:
        program = integrate_libreoffice.find_office(args.office)
        if args.remove:
            removed = integrate_libreoffice.remove(program)
            print("removed the toolbridge extension from LibreOffice" if removed
                  else "the toolbridge extension was not installed")
            return EXIT_OK
        info = integrate_libreoffice.install(program)
    except integrate_libreoffice.IntegrationError as exc:
        print(f"toolbridge integrate libreoffice: {exc}", file=sys.stderr)
        return EXIT_ERROR
    print(f"installed the toolbridge extension ({integrate_libreoffice.EXTENSION_ID}) into LibreOffice "
          f"({program}), for its Python {info['python'][0]}.{info['python'][1]}\n"
          "Start LibreOffice: it connects to the running toolbridge daemon (or waits for one); "
          "Tools > Add-Ons > toolbridge shows its state.")
    return EXIT_OK


def cmd_integrate(args: argparse.Namespace) -> int:
    if args.list:
        return _list(args)
    if args.program is None:
        print(f"toolbridge integrate: name a program ({', '.join(PROGRAMS)}) or give --list", file=sys.stderr)
        return EXIT_USAGE
    if args.program == "freecad":
        return _integrate_freecad(args)
    if args.program == "libreoffice":
        return _libreoffice(args)
    try:
        blender = integrate_blender.find_blender(args.blender)
        if args.remove:
            removed = integrate_blender.remove(blender)
            print(f"removed the toolbridge add-on from {removed}" if removed else "the toolbridge add-on was not installed")
            return EXIT_OK
        info = integrate_blender.install(blender)
    except integrate_blender.IntegrationError as exc:
        print(f"toolbridge integrate blender: {exc}", file=sys.stderr)
        return EXIT_ERROR
    print(f"installed and enabled the toolbridge add-on for Blender {info['blender']} in "
          f"{info['addons']}/{integrate_blender.ADDON}\n"
          "Start Blender: it connects to the running toolbridge daemon (or waits for one); its state is in "
          "the 3D Viewport's sidebar (N), tab toolbridge.")
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
