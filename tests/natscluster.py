"""A real 3-node nats-server cluster in each way brokers log in, for node-loss tests.

:func:`natskit.nats_cluster` starts the nodes (routes on loopback ports, one configuration file
every node reads); this module writes that file for an auth mode and gives each broker the
settings to log in with, the way a user would pass them (files, never a password in a URL):

* ``creds`` — operator mode: an operator and account JWT in the server (``natsauth.Operator``),
  a ``.creds`` file per broker with the permissions ``toolbridge nats-permissions`` prints;
* ``nkey`` — a server ``nkeys`` user per broker (public key + permissions), its seed in a file;
* ``user`` — a server user and password per broker (``--nats-user``, ``--nats-password-file``);
  ``user-in-url`` the same users, with ``user:password@`` in the seed URL (the old way);
* ``token`` — one token for everyone (``--nats-token-file``);
* ``none`` — no authentication.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import attrs

from broker.federation.nats_link import broker_permissions

AUTH_MODES = ("creds", "nkey", "user", "user-in-url", "token", "none")


@attrs.frozen
class ClusterAuth:
    """An auth mode's server configuration and each broker's login settings."""

    mode: str
    config: Path | None
    #: Per broker name, the settings ``start_broker`` passes to its daemon.
    logins: dict[str, dict[str, Any]]
    #: Secrets that must never show in a log, status or command line.
    secrets: tuple[str, ...] = ()


def cluster_auth(mode: str, folder: Path, brokers: list[str]) -> ClusterAuth:
    """Write ``mode``'s server configuration and the brokers' credential files under ``folder``."""
    config = folder / f"nats-{mode}.conf"
    if mode == "none":
        return ClusterAuth(mode, None, {name: {} for name in brokers})
    if mode == "creds":
        from natsauth import Operator

        operator = Operator()
        config.write_text(operator.server_config())
        return ClusterAuth(mode, config, {
            name: {"nats_credentials": str(operator.user(folder / f"{name}.creds", name, broker_permissions(name)))}
            for name in brokers})
    if mode == "nkey":
        import nkeys
        from natsauth import new_key

        keys = {name: new_key(nkeys.PREFIX_BYTE_USER) for name in brokers}
        users = [{"nkey": key.public_key.decode(), "permissions": broker_permissions(name)}
                 for name, key in keys.items()]
        config.write_text(json.dumps({"authorization": {"users": users}}))
        logins = {}
        for name, key in keys.items():
            seed = folder / f"{name}.nk"
            seed.write_bytes(key.seed)
            logins[name] = {"nats_nkey_seed": str(seed)}
        return ClusterAuth(mode, config, logins)
    if mode in ("user", "user-in-url"):
        passwords = {name: f"pw-{secrets.token_hex(8)}" for name in brokers}
        config.write_text(json.dumps({"authorization": {"users": [
            {"user": name, "password": password, "permissions": broker_permissions(name)}
            for name, password in passwords.items()]}}))
        logins = {}
        for name, password in passwords.items():
            path = folder / f"{name}.password"
            path.write_text(password + "\n")
            # The old way puts them in the URL (``start_broker`` then adds them to the seed).
            logins[name] = {"nats_user": name, "nats_password_file": str(path)} if mode == "user" \
                else {"url_userinfo": f"{name}:{password}@"}
        return ClusterAuth(mode, config, logins, tuple(passwords.values()))
    if mode == "token":
        token = f"tok-{secrets.token_hex(12)}"
        config.write_text(json.dumps({"authorization": {"token": token}}))
        path = folder / "nats.token"
        path.write_text(token)
        return ClusterAuth(mode, config, {name: {"nats_token_file": str(path)} for name in brokers}, (token,))
    raise ValueError(f"unknown auth mode {mode!r}")
