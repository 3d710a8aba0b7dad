"""Login tickets for the status page: what ``toolbridge open`` mints and the daemon redeems.

Theory of operation
-------------------
The status page must not need the token in a URL (URLs end up in shell history, browser
history and logs), so ``toolbridge open``, which can read the token from the home like every
local client, mints a *ticket* instead: an expiry time, a random nonce and an HMAC-SHA256 of
both, keyed by a key derived from the daemon's token and the *instance* of this start of the
daemon (a random id it makes at start and writes into runtime.json, whence the CLI reads it
with the port). The ticket travels in the link's
fragment (``/login#<ticket>``), which browsers never send to the server; the login page's
script posts it once and the daemon answers with a session cookie. The daemon checks the MAC
in constant time, the expiry (:data:`TICKET_SECONDS`) and that the nonce was not redeemed
before (:class:`TicketBook`, in memory), so a ticket works once, for a minute, and only for
the daemon whose token made it. Binding the key to the instance is what makes "once" hold
across a restart: the used nonces die with the process, and so does the key that a used
ticket was made under (the restarted daemon refuses it as forged). Minting needs no round trip to the daemon and no state in it.

Pure functions and one small class: no I/O, no trio; both ``broker.cli`` and the daemon's
HTTP front door import it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from typing import Final

__all__ = ["LOGIN_LABEL", "TICKET_SECONDS", "TicketBook", "check_ticket", "login_key", "login_label", "mint_ticket"]

#: How long a login link works after ``toolbridge open`` made it.
TICKET_SECONDS: Final = 60.0
_VERSION: Final = "v1"
#: What the tickets' key is derived for (``Authenticator.derive_key(LOGIN_LABEL)`` in the daemon).
LOGIN_LABEL: Final = b"toolbridge status-page login v1"
_MAX_TICKET_CHARS: Final = 200


def login_label(instance: str) -> bytes:
    """What the tickets' key is derived for, for the daemon start ``instance`` (runtime.json's
    ``instance``; empty for a daemon too old to write one)."""
    return LOGIN_LABEL + (b" " + instance.encode() if instance else b"")


def login_key(token: str, instance: str) -> bytes:
    """The tickets' key for the start ``instance`` of the daemon whose token is ``token``: a key
    of its own, so a ticket's MAC is never one the token makes anywhere else (the daemon gets
    the same key from its ``Authenticator.derive_key(login_label(instance))``, without handing
    the token out), and one that ends with that start of the daemon."""
    return hmac.new(token.encode(), login_label(instance), hashlib.sha256).digest()


def _mac(key: bytes, body: str) -> str:
    digest = hmac.new(key, body.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def mint_ticket(key: bytes, now: float, *, nonce: str | None = None) -> str:
    """A ticket under ``key`` (:func:`login_key`), valid from ``now`` (Unix time) for
    :data:`TICKET_SECONDS`."""
    nonce = nonce if nonce is not None else secrets.token_urlsafe(18)
    body = f"{_VERSION}.{int(now + TICKET_SECONDS)}.{nonce}"
    return f"{body}.{_mac(key, body)}"


def check_ticket(key: bytes, ticket: str, now: float) -> str | None:
    """The ticket's nonce if it was made under ``key`` and has not expired at ``now``; else None."""
    if len(ticket) > _MAX_TICKET_CHARS:
        return None
    parts = ticket.split(".")
    if len(parts) != 4 or parts[0] != _VERSION or not parts[1].isdigit():
        return None
    body = ".".join(parts[:3])
    if not hmac.compare_digest(_mac(key, body), parts[3]):
        return None
    if now > int(parts[1]) or int(parts[1]) > now + TICKET_SECONDS + 5:
        return None
    return parts[2]


class TicketBook:
    """Redeems tickets once each: remembers the nonces used until their tickets expire."""

    def __init__(self) -> None:
        self._used: dict[str, float] = {}

    def redeem(self, key: bytes, ticket: str, now: float) -> bool:
        """True the first time a valid ticket is redeemed; False for a bad, old or used one."""
        nonce = check_ticket(key, ticket, now)
        if nonce is None:
            return False
        self._used = {n: t for n, t in self._used.items() if t > now}  # drop the expired
        if nonce in self._used:
            return False
        self._used[nonce] = now + TICKET_SECONDS + 5
        return True
