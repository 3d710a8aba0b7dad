"""``toolbridge nats-permissions NAME``: the NATS permissions to give broker NAME's user.

A broker whose NATS user may publish or subscribe on other brokers' subjects can pose as them
(SECURITY.md); this prints exactly what broker NAME needs (``broker_permissions`` in
``broker.federation.nats_link``, protocol.md §14) as a ``nats-server`` users entry and as the
``nsc`` flags, or as JSON with ``--json``. Needs neither nats-py nor a daemon.
"""

from __future__ import annotations

import argparse
import json
import shlex

from ._common import EXIT_OK, SubParsers, add_command

__all__ = ["add_parser", "permissions_text"]


def permissions_text(name: str) -> str:
    from ..federation.nats_link import broker_permissions, check_broker_name  # only for this command

    perms = broker_permissions(check_broker_name(name))
    publish, subscribe = perms["publish"]["allow"], perms["subscribe"]["allow"]
    responses = perms["allow_responses"]  # replies only to requests it was sent (nats_calls)
    block = json.dumps({"user": name, "password": "<its password>", "permissions": perms}, indent=2)
    return (f"# nats-server.conf, in authorization {{ users = [ ... ] }}:\n{block}\n\n"
            f"# or, with an operator (nsc), for a new user of the toolbridge account:\n"
            f"nsc add user {shlex.quote(name)} --allow-pub {shlex.quote(','.join(publish))} "
            f"--allow-sub {shlex.quote(','.join(subscribe))} "
            f"--allow-pub-response={responses['max']} --response-ttl {responses['expires']}\n")


def cmd_nats_permissions(args: argparse.Namespace) -> int:
    from ..federation.nats_link import broker_permissions, check_broker_name

    if args.json:
        print(json.dumps(broker_permissions(check_broker_name(args.name)), indent=2))
    else:
        print(permissions_text(args.name), end="")
    return EXIT_OK


def add_parser(sub: SubParsers) -> None:
    parser = add_command(sub, "nats-permissions")
    parser.add_argument("name", help="the broker's name (its --broker-name)")
    parser.add_argument("--json", action="store_true", help="just the permissions, as JSON")
    parser.set_defaults(func=cmd_nats_permissions)
