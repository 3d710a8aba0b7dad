"""A NATS operator, its account and users, made in-test (decentralised JWT auth, as ``nsc`` does).

NATS JWTs are ordinary JWTs signed with Ed25519 NKeys (``alg: ed25519-nkey``): the ``nkeys``
package (nats-py's own, ``nats-py[nkeys]``) makes and signs the keys; the JWT framing is the
few lines below (the one Python NATS JWT library on PyPI calls itself untested and pins old
dependencies). The operator JWT and the account JWT go into the server's configuration
(``resolver: MEMORY``), each user gets a ``.creds`` file (its JWT and NKey seed), as from an
operator's ``nsc generate creds``.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

import attrs
import nkeys

NO_LIMIT = -1


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def new_key(prefix: int) -> Any:
    """A new NKey pair: ``nkeys.PREFIX_BYTE_OPERATOR`` / ``_ACCOUNT`` / ``_USER``."""
    return nkeys.from_seed(nkeys.encode_seed(os.urandom(32), prefix))


def encode_jwt(issuer: Any, subject: str, name: str, nats: dict[str, Any]) -> str:
    """A NATS JWT (claims ``iss``, ``sub``, ``name``, ``nats``) signed by ``issuer``'s NKey."""
    header = {"typ": "JWT", "alg": "ed25519-nkey"}
    claims = {"jti": base64.b32encode(secrets.token_bytes(30)).decode(), "iat": int(time.time()),
              "iss": issuer.public_key.decode(), "name": name, "sub": subject, "nats": {**nats, "version": 2}}
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    return f"{signing_input}.{_b64(issuer.sign(signing_input.encode()))}"


def creds_text(user_jwt: str, seed: bytes) -> str:
    return (f"-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n"
            f"-----BEGIN USER NKEY SEED-----\n{seed.decode()}\n------END USER NKEY SEED------\n")


@attrs.define
class Operator:
    """One operator with one account; :meth:`user` issues users of that account."""

    operator: Any = attrs.Factory(lambda: new_key(nkeys.PREFIX_BYTE_OPERATOR))
    account: Any = attrs.Factory(lambda: new_key(nkeys.PREFIX_BYTE_ACCOUNT))

    def server_config(self) -> str:
        """The nats-server configuration lines of operator mode (JSON, which nats-server reads)."""
        operator_jwt = encode_jwt(self.operator, self.operator.public_key.decode(), "toolbridge-test-operator",
                                  {"type": "operator"})
        account_pub = self.account.public_key.decode()
        account_jwt = encode_jwt(self.operator, account_pub, "toolbridge", {
            "type": "account",
            "limits": {"subs": NO_LIMIT, "data": NO_LIMIT, "payload": NO_LIMIT, "imports": NO_LIMIT,
                       "exports": NO_LIMIT, "wildcards": True, "conn": NO_LIMIT, "leaf": NO_LIMIT}})
        return json.dumps({"operator": operator_jwt, "resolver": "MEMORY",
                           "resolver_preload": {account_pub: account_jwt}})

    def user(self, path: Path, name: str, permissions: dict[str, Any] | None = None) -> Path:
        """Write a ``.creds`` file for a new user ``name`` (with these publish/subscribe permissions)."""
        key = new_key(nkeys.PREFIX_BYTE_USER)
        claims: dict[str, Any] = {"type": "user", "subs": NO_LIMIT, "data": NO_LIMIT, "payload": NO_LIMIT}
        if permissions is not None:
            claims["pub"] = permissions["publish"]
            claims["sub"] = permissions["subscribe"]
            responses = permissions.get("allow_responses")
            if responses is not None:  # a JWT's "resp": max, and ttl in nanoseconds
                minutes = int(responses["expires"].removesuffix("m"))
                claims["resp"] = {"max": responses["max"], "ttl": minutes * 60 * 10**9}
        path.write_text(creds_text(encode_jwt(self.account, key.public_key.decode(), name, claims), key.seed))
        return path
