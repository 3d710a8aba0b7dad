"""``toolbridge token --issue/--list/--revoke``: named tokens from the command line.

The tokens themselves (files, hashing, scopes, the daemon's :class:`Authenticator`) are
``broker.config.tokens``; this module only prints and parses for the user.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ..config import home as home_files
from ..config.tokens import TOKENS_FILE, TokenError, issue, listing, revoke
from ._common import EXIT_ERROR, EXIT_OK, SubParsers, add_command, add_home, home_from

__all__ = ["add_parser", "cmd_token", "run_token_command"]


def run_token_command(home: Path, args: argparse.Namespace) -> int:
    """``toolbridge token --issue/--list/--revoke``; returns the exit code. Raises TokenError."""
    if args.scope and not args.issue:
        raise TokenError("--scope goes with --issue NAME")
    if getattr(args, "json", False) and not args.list:
        raise TokenError("--json goes with --list")
    if args.issue:
        secret = issue(home, args.issue, args.scope)
        print(secret)
        print(
            f"token {args.issue!r} issued ({', '.join(args.scope)}). It is shown only this once: only "
            f"its hash is kept in {home / TOKENS_FILE}. Revoke it with `toolbridge token --revoke {args.issue}`.",
            file=sys.stderr,
        )
        return 0
    if args.revoke:
        revoke(home, args.revoke)
        print(f"token {args.revoke!r} revoked: new connections with it are refused and a running "
              "daemon drops its live connections within a second", file=sys.stderr)
        return 0
    rows = listing(home)
    if getattr(args, "json", False):  # the same rows: name, created (Unix time), scopes
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no named tokens (the default token is `toolbridge token`)", file=sys.stderr)
        return 0
    width = max(len(r["name"]) for r in rows)
    for row in rows:
        created = time.strftime("%Y-%m-%d %H:%M", time.localtime(row["created"]))
        print(f"{row['name']:<{width}}  {created}  {', '.join(row['scopes'])}")
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    home = home_from(args)
    if args.issue or args.list or args.revoke or args.scope or args.json:
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


def add_parser(sub: SubParsers) -> None:
    token = add_command(sub, "token")
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
