"""``toolbridge open``: the daemon's status page in the browser, logged in by a one-time link.

The link is ``http://<host>:<http port>/login#<ticket>``: the ticket (``broker.config.web_login``)
is minted here from the token in the home and the daemon's start (runtime.json's
``daemonInstance``), works once, for a minute and only until that daemon stops, and sits in the URL's
fragment, which the browser never sends, so it is in no request line or log. ``--print`` prints
the link instead of opening a browser (SSH sessions, scripts); open it on this machine.
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
import webbrowser
from pathlib import Path

from ..config import home as home_files
from ..config.web_login import TICKET_SECONDS, login_key, mint_ticket
from ..errors import BrokerError
from ._common import EXIT_ERROR, EXIT_OK, SubParsers, add_command, add_home, home_from

__all__ = ["add_parser", "login_link"]


class NotServing(BrokerError):
    """No daemon serves a status page for this home (the message says what to do)."""


def login_link(home: Path, now: float | None = None) -> str:
    """A one-time login link to the status page of the daemon of ``home``. Raises NotServing."""
    info = home_files.read_runtime(home)
    if not info:
        raise NotServing(f"no daemon is running for {home}: start it with `toolbridge serve`")
    http_port = info.get("httpPort")
    if not isinstance(http_port, int):
        raise NotServing("the daemon serves no HTTP port (it was started with --no-http), so it has no status page")
    try:
        token = (home / home_files.TOKEN_FILE).read_text().strip()
    except OSError as exc:
        raise NotServing(f"cannot read the token in {home}: {exc.strerror}") from None
    host = str(info.get("host") or "127.0.0.1")
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.settimeout(1.0)
        if probe.connect_ex((host, http_port)) != 0:
            raise NotServing(f"the daemon of {home} does not answer on {host}:{http_port}: is it still running? "
                             "(`toolbridge status`)")
    scheme = "https" if info.get("tls") else "http"
    netloc = f"[{host}]" if ":" in host else host
    instance = info.get("daemonInstance")  # this start of the daemon: its login key dies with it
    ticket = mint_ticket(login_key(token, instance if isinstance(instance, str) else ""),
                         time.time() if now is None else now)
    return f"{scheme}://{netloc}:{http_port}/login#{ticket}"


def cmd_open(args: argparse.Namespace) -> int:
    try:
        link = login_link(home_from(args))
    except NotServing as exc:
        print(f"toolbridge: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if args.print or not webbrowser.open(link):
        print(link)
        print(f"(a one-time link, valid for {TICKET_SECONDS:g} s: open it in a browser on this machine)",
              file=sys.stderr)
    else:
        print("opened the status page in your browser", file=sys.stderr)
    return EXIT_OK


def add_parser(sub: SubParsers) -> None:
    parser = add_command(
        sub, "open",
        description="Open the daemon's status page (apps, agents, calls in flight, recent calls) in the "
        "browser, logged in by a one-time link that works for a minute; the token never appears in a URL.",
    )
    add_home(parser)
    parser.add_argument("--print", action="store_true", help="print the one-time link instead of opening a browser")
    parser.set_defaults(func=cmd_open)
