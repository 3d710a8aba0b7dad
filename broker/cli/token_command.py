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

from ..config.tokens import TOKENS_FILE, TokenError, issue, listing, revoke

__all__ = ["run_token_command"]


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
