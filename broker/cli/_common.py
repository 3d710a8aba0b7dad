"""What every sub-command module shares: exit codes and the ``--home`` option.

A leaf of ``broker.cli``: the command modules import it, and ``broker.cli`` (the command table)
imports them, so nothing inside the package imports back into ``broker.cli`` itself.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TypeAlias

from ._commands import summary_of

__all__ = ["EXIT_OK", "EXIT_ERROR", "EXIT_USAGE", "SubParsers", "add_command", "add_home", "home_from", "short_id"]

#: What each sub-command module's ``add_parser`` gets: the ``add_subparsers()`` group.
SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2


def home_from(args: argparse.Namespace) -> Path:
    """``--home``, else ``$TOOLBRIDGE_HOME``, else the user data dir: as apps resolve it."""
    # Imported here: importing app_client imports trio, which `toolbridge --help` does not need.
    from app_client.discovery import resolve_home

    return resolve_home(getattr(args, "home", None) or None).expanduser()


def add_home(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--home", help="state directory (default: $TOOLBRIDGE_HOME or the user data dir)")


def add_command(sub: SubParsers, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    """Add the sub-command ``name`` with its summary from the command table (``_commands``)."""
    return sub.add_parser(name, help=summary_of(name), **kwargs)


def short_id(value: object) -> str:
    """An id as listings show it: random ids (app instances, sessions: long hex) by their first
    8 characters, enough to tell them apart (``--json`` output has them whole); short, chosen
    ones (``main``) whole."""
    text = str(value)
    return text[:8] if len(text) > 12 else text
