"""The ``toolbridge`` command line.

Each sub-command is a small function; ``main`` parses, and maps the package's errors to
one-line messages and exit codes (never a traceback for a user error).

:data:`~broker.cli._commands.COMMANDS` is the one table of sub-commands: each row names a
command, its summary and the module whose ``add_parser`` adds it to the sub-parser group
(``serve_command``, ``token_command``, ``codegen_command``, ``logs_command``,
``client_commands``, ``stdio_relay``, ``daemon_control``, ``doctor_command``, ``agent_config``,
``open_command``, ``conformance_command``, ``nats_command``). Only the module of the command
being run is imported; the others appear in ``--help`` from the table alone, so a client
command starts without importing the daemon (issue 30). The modules share ``_common`` (exit
codes, ``--home``) and never import this module back. The daemon's packages never import
``broker.cli``.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Sequence
from importlib import import_module
from typing import NoReturn, cast

from ..errors import BrokerError
from ..version import VERSION
from ._commands import COMMANDS
from ._common import EXIT_ERROR, EXIT_OK, EXIT_USAGE, SubParsers, add_home, home_from
from .help_text import describe

__all__ = ["COMMANDS", "EXIT_ERROR", "EXIT_OK", "EXIT_USAGE", "add_home", "build_parser", "home_from", "main"]

#: The exit status of a command whose output pipe was closed early (`toolbridge tools | head`):
#: 128 + SIGPIPE, as the shell reports a program killed by it.
EXIT_BROKEN_PIPE = 141


class CommandParser(argparse.ArgumentParser):
    """Every parser of the CLI: abbreviated options are refused (``--args`` is not taken as
    ``--args-json``), and an error prints the usage of the (sub-)command it is about."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras and not _top_parser(self):
            # argparse hands a sub-command's unknown options up to the top parser, which would
            # print the top-level usage; the sub-command's own usage says what it accepts.
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def _top_parser(parser: argparse.ArgumentParser) -> bool:
    return parser.prog == "toolbridge"


def _command_named(argv: Sequence[str]) -> str | None:
    """The sub-command ``argv`` names: its first word that is not an option (the top level has
    only -h and -V, which take no value)."""
    return next((word for word in argv if not word.startswith("-")), None)


def build_parser(command: str | None = None, *, summaries_only: bool = False) -> argparse.ArgumentParser:
    """The parser of ``toolbridge``: with every command's options; given ``command``, with that
    command's (and its module's) options and only the summary of the others; with
    ``summaries_only``, the summaries alone (what ``toolbridge --help`` shows)."""
    parser = CommandParser(prog="toolbridge", description="Let AI agents drive the tools of running desktop apps.")
    parser.add_argument("-V", "--version", action="version", version=f"toolbridge {VERSION}")
    # Sub-parsers are CommandParsers too (argparse makes them of the parent's class).
    sub = cast(SubParsers, parser.add_subparsers(dest="command", metavar="COMMAND"))
    chosen = {row.module for row in COMMANDS if not summaries_only and command in (None, row.name)}
    for row in COMMANDS:
        if row.name in sub.choices:
            continue  # added by its module, with an earlier command of the same module
        if row.module in chosen:
            import_module(f"{__name__}.{row.module}").add_parser(sub)
        else:
            sub.add_parser(row.name, help=row.summary, add_help=False)
    describe(sub)  # each command's description and example (help_text.HELP)
    return parser


def _unknown_command(word: str) -> NoReturn:
    names = [row.name for row in COMMANDS]
    close = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    hint = f"did you mean `toolbridge {close[0]}`?" if close else "`toolbridge --help` lists the commands"
    print(f"toolbridge: there is no command {word!r}; {hint}", file=sys.stderr)
    sys.exit(EXIT_USAGE)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        try:
            return _run(list(sys.argv[1:] if argv is None else argv))
        finally:
            sys.stdout.flush()  # here, where a closed pipe is caught, not at the interpreter's exit
    except BrokenPipeError:
        return _quiet_broken_pipe()


def _run(argv: list[str]) -> int:
    command = _command_named(argv)
    if command is not None and command not in {row.name for row in COMMANDS}:
        _unknown_command(command)
    parser = build_parser(command, summaries_only=command is None)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
    except BaseException as exc:  # noqa: BLE001 - turn known errors into one line
        if _has(exc, BrokenPipeError):
            raise BrokenPipeError from exc
        error = _first_known(exc)
        if error is None:
            raise
        print(f"toolbridge: {error}", file=sys.stderr)
        return EXIT_ERROR


def _quiet_broken_pipe() -> int:
    """The reader of our output went away (`| head`): stop quietly. Python would otherwise
    report the failed flush of stdout at exit; pointing stdout at devnull stops that (the
    recipe of the Python docs, "Note on SIGPIPE")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return EXIT_BROKEN_PIPE


def _has(exc: BaseException, kind: type[BaseException]) -> bool:
    if isinstance(exc, kind):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return any(_has(inner, kind) for inner in exc.exceptions)
    return False


def _first_known(exc: BaseException) -> BrokerError | None:
    if isinstance(exc, BrokerError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _first_known(inner)
            if found is not None:
                return found
    return None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
