"""``toolbridge codegen``: typed bindings from the live registry, and the ``tools`` admin command.

Theory of operation
-------------------
The command asks the running daemon for its tools with one admin request on the app port
(``{"type":"admin","token":...,"command":"tools","args":{}}`` -> one ``adminResult`` line,
see protocol.md) through :func:`broker.cli.daemon_client.admin_request`, which finds the daemon
from ``<home>/runtime.json`` and ``<home>/token`` (or the environment). It keeps the tools of the ``--app`` labels (or app names) asked for, renders
them with :mod:`broker.codegen` and writes the text to ``-o FILE`` (atomically) or stdout.

The daemon side is :func:`broker.daemon.admin.admin_tools`, which ``run_daemon`` hands to
``BrokerCore`` as its ``tools`` admin handler; it answers with every tool of the router's list.

The same ``tools`` answer feeds ``toolbridge tools`` (``broker.cli.client_commands``).

Exit codes: 0 when bindings were written; 1 when the daemon cannot be reached or refuses,
no tool matches ``--app`` or the file cannot be written (a one-line message on stderr names
the cause).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Final

import trio

from ..codegen import LANGUAGES, CodegenTool, generate, tools_from_admin
from ._common import EXIT_OK, SubParsers, add_command, add_home, home_from
from .daemon_client import admin_request
from ..errors import BrokerError

__all__ = [
    "CodegenError",
    "fetch_tools",
    "fetch_tools_async",
    "select_tools",
    "cmd_codegen",
    "add_parser",
]

ADMIN_COMMAND: Final = "tools"
#: Seconds to connect to the daemon and to read its answer.
DEFAULT_TIMEOUT: Final = 10.0


class CodegenError(BrokerError):
    """``toolbridge codegen`` cannot go on; the message says why and what to do."""


async def fetch_tools_async(home: Path, *, timeout: float = DEFAULT_TIMEOUT) -> list[dict[str, Any]]:
    """Ask the daemon owning ``home`` for its tools (the ``tools`` admin command).

    Raises :class:`~broker.cli.daemon_client.DaemonUnavailable` when the daemon is not running,
    cannot be reached, refuses the token or does not answer within ``timeout`` seconds, and
    :class:`CodegenError` when its answer is not a list of tools.
    """
    result = await admin_request(home, ADMIN_COMMAND, {}, timeout=timeout)
    if not isinstance(result, list):
        raise CodegenError("the daemon's answer to `tools` is not a list of tools")
    return [row for row in result if isinstance(row, dict)]


def fetch_tools(home: Path, *, timeout: float = DEFAULT_TIMEOUT) -> list[dict[str, Any]]:
    """:func:`fetch_tools_async` for synchronous callers (runs its own trio loop)."""
    return trio.run(lambda: fetch_tools_async(home, timeout=timeout))


def select_tools(tools: list[CodegenTool], apps: list[str] | None) -> list[CodegenTool]:
    """The tools of the given app labels or app names (all when ``apps`` is empty).

    Raises :class:`CodegenError` naming the apps that exist when one asked for has no tools.
    """
    if not apps:
        return tools
    chosen = [t for t in tools if t.app_label in apps or (t.app_name is not None and t.app_name in apps)]
    found = {t.app_label for t in chosen} | {t.app_name for t in chosen if t.app_name}
    missing = [a for a in apps if a not in found]
    if missing:
        known = sorted({t.app_label for t in tools})
        raise CodegenError(
            f"no connected app {', '.join(repr(m) for m in missing)}; connected: {', '.join(known) or 'none'}"
        )
    return chosen


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise CodegenError(f"cannot write {path}: {exc.strerror or exc}") from None


def cmd_codegen(args: argparse.Namespace) -> int:
    home = home_from(args)
    tools = select_tools(tools_from_admin(fetch_tools(home, timeout=args.timeout)), args.app)
    source = f"toolbridge codegen --lang {args.lang}" + "".join(f" --app {a}" for a in args.app or [])
    text = generate(args.lang, tools, source=source)
    if args.output and args.output != "-":
        _write_atomic(Path(args.output), text)
        apps = len({t.app_label for t in tools})
        print(f"wrote {args.output}: {len(tools)} tools of {apps} apps", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def add_parser(sub: SubParsers) -> None:
    parser = add_command(
        sub, "codegen",
        description="Write typed bindings for the tools of the running daemon's apps.",
    )
    add_home(parser)
    parser.add_argument("--lang", required=True, choices=LANGUAGES, help="language of the bindings")
    parser.add_argument(
        "--app", action="append", metavar="NAME", help="only this app (label or app name); repeatable"
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help=argparse.SUPPRESS)
    parser.set_defaults(func=cmd_codegen)
