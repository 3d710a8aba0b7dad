"""Scoped tokens: named secrets with limited rights, stored hashed in the home directory.

Theory of operation
-------------------
The home's ``token`` file holds the *default token*, for same-user local use: it may do
everything (register apps and uplinks, connect agents, ask admin questions). ``toolbridge
token --issue NAME --scope SCOPE`` adds a *named token* to ``tokens.json`` (mode 0600) and
prints its secret once; the file keeps only the secret's SHA-256, its scopes and when it was
made. Tokens are 256-bit random strings, so a fast hash is enough (nothing to brute-force)
and every comparison is constant-time (:func:`hmac.compare_digest`).

Scopes (a token has one or more):

``app:<pattern>``
    register apps whose ``appName`` matches the pattern (``fnmatch`` glob, case-sensitive:
    ``*``, ``?``, ``[...]``), e.g. ``app:WatchTower`` or ``app:Watch*``.
``uplink`` / ``uplink:<pattern>``
    register broker uplinks (a ``register`` carrying ``via``) under any name, or a name
    matching the pattern. An uplink token cannot register a plain app, and an app token
    cannot register an uplink: give a token both scopes if it needs both.
``agent``
    connect agents: ``agentConnect`` (``toolbridge stdio``) and MCP over HTTP (bearer).
``agent:<pattern>``
    connect agents only to one-app scopes (``toolbridge stdio --app NAME``, ``/mcp/apps/NAME``)
    whose app label matches the pattern (same glob rules), e.g. ``agent:WatchTower`` or
    ``agent:WatchTower*`` (every running copy: ``WatchTower_2`` too). Not ``/mcp`` itself,
    discovery mode or another app's scope.

The admin channel (``toolbridge status``, ``tools``, ``call``, ...) needs the default token.

:class:`Authenticator` checks a presented secret and returns a :class:`Grant`. It re-reads
``tokens.json`` whenever the file's identity (inode, size, mtime) changed — checked at every
connection, so a revocation holds for new connections at once — and :meth:`Authenticator.watch`
polls it every second so that live connections made with a token that was revoked (or
re-issued with a new secret) are dropped within about a second. An unreadable or malformed
file counts as holding no named tokens (fail closed), and the daemon logs why.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import json
import os
import re
import secrets
import time
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final, Protocol

import attrs
import structlog
import trio

from ..errors import BrokerError

log = structlog.get_logger("toolbridge.tokens")

TOKENS_FILE: Final = "tokens.json"
DEFAULT_NAME: Final = "default"
TOKEN_PREFIX: Final = "tbk_"
#: How often the daemon looks at tokens.json to drop connections of revoked tokens.
WATCH_INTERVAL: Final = 1.0
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
_KINDS: Final = ("app", "uplink", "agent")


class TokenError(BrokerError):
    """A token command cannot be done (bad name or scope, name taken, no such token)."""


@attrs.frozen
class Scope:
    kind: str  # "app" | "uplink" | "agent" | "all" (the default token)
    pattern: str = "*"

    def __str__(self) -> str:
        if self.kind == "all" or (self.kind in ("uplink", "agent") and self.pattern == "*"):
            return self.kind
        return f"{self.kind}:{self.pattern}"


def parse_scope(text: str) -> Scope:
    """``app:<pattern>``, ``uplink``, ``uplink:<pattern>``, ``agent`` or ``agent:<pattern>``.
    Raises TokenError."""
    kind, sep, pattern = text.strip().partition(":")
    if kind not in _KINDS:
        raise TokenError(
            f"unknown scope {text!r}: use app:<name-pattern>, uplink[:<name-pattern>] or agent[:<app-label-pattern>]"
        )
    if kind == "agent" and sep and not pattern:
        raise TokenError(f"scope {text!r}: say which apps' scopes, e.g. agent:WatchTower, or plain agent for all")
    if kind == "app" and not pattern:
        raise TokenError(f"scope {text!r}: say which apps, e.g. app:WatchTower or app:Watch*")
    return Scope(kind, pattern or "*")


@attrs.frozen
class Grant:
    """What a presented token may do."""

    name: str
    scopes: tuple[Scope, ...]
    #: The stored hash (named tokens); None for the default token.
    digest: str | None = None

    @property
    def is_default(self) -> bool:
        return self.digest is None

    def _matches(self, kind: str, name: str) -> bool:
        return any(
            s.kind == "all" or (s.kind == kind and fnmatch.fnmatchcase(name, s.pattern)) for s in self.scopes
        )

    def allows_register(self, app_name: str, *, uplink: bool) -> bool:
        return self._matches("uplink" if uplink else "app", app_name)

    @property
    def allows_agent(self) -> bool:
        """May connect agents to everything (``/mcp``, discovery mode, any one-app scope)."""
        return any(s.kind == "all" or (s.kind == "agent" and s.pattern == "*") for s in self.scopes)

    def allows_agent_to(self, app: str | None) -> bool:
        """May connect an agent to the one-app scope of the label ``app`` (None: to everything)."""
        if app is None:
            return self.allows_agent
        return self._matches("agent", app)

    def describe(self) -> str:
        return ", ".join(str(s) for s in self.scopes)


DEFAULT_GRANT_SCOPES: Final = (Scope("all"),)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


# --- the file ------------------------------------------------------------------------------


@attrs.frozen
class TokenEntry:
    name: str
    digest: str
    scopes: tuple[Scope, ...]
    created: float

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "sha256": self.digest, "scopes": [str(s) for s in self.scopes],
                "created": self.created}


def _parse_entries(data: Any) -> list[TokenEntry]:
    if not isinstance(data, dict) or not isinstance(data.get("tokens"), list):
        raise ValueError('expected {"version": 1, "tokens": [...]}')
    entries = []
    for item in data["tokens"]:
        if not isinstance(item, dict):
            raise ValueError("each token must be an object")
        name, digest, scopes = item.get("name"), item.get("sha256"), item.get("scopes")
        if not isinstance(name, str) or not isinstance(digest, str) or not isinstance(scopes, list):
            raise ValueError("each token needs a name, a sha256 and scopes")
        entries.append(TokenEntry(name, digest, tuple(parse_scope(str(s)) for s in scopes),
                                  float(item.get("created", 0.0))))
    return entries


def read_entries(home: Path) -> list[TokenEntry]:
    """The named tokens in ``home`` (none if there is no file). Raises OSError, ValueError."""
    try:
        text = (home / TOKENS_FILE).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    try:
        return _parse_entries(json.loads(text))
    except TokenError as exc:
        raise ValueError(str(exc)) from None


def _write_entries(home: Path, entries: Iterable[TokenEntry]) -> None:
    from .home import _write_private, ensure_home

    ensure_home(home)
    body = {"version": 1, "tokens": [e.to_json() for e in entries]}
    _write_private(home / TOKENS_FILE, json.dumps(body, indent=2) + "\n")


def _read_for_change(home: Path) -> list[TokenEntry]:
    try:
        return read_entries(home)
    except (OSError, ValueError) as exc:
        raise TokenError(f"cannot read {home / TOKENS_FILE}: {exc}") from None


def issue(home: Path, name: str, scopes: Iterable[str]) -> str:
    """Add a named token; return its secret (shown once, never stored). Raises TokenError."""
    if not _NAME.match(name) or name == DEFAULT_NAME:
        raise TokenError(
            f"invalid token name {name!r}: 1-64 letters, digits, '_', '-' or '.', starting with a "
            f"letter or digit, not {DEFAULT_NAME!r}"
        )
    parsed = tuple(parse_scope(s) for s in scopes)
    if not parsed:
        raise TokenError("say what the token may do: --scope app:<name-pattern>, uplink or agent")
    entries = _read_for_change(home)
    if any(e.name == name for e in entries):
        raise TokenError(f"a token named {name!r} exists; revoke it first (toolbridge token --revoke {name})")
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    _write_entries(home, [*entries, TokenEntry(name, hash_secret(secret), parsed, time.time())])
    return secret


def revoke(home: Path, name: str) -> None:
    """Remove a named token. Raises TokenError if there is none by that name."""
    entries = _read_for_change(home)
    kept = [e for e in entries if e.name != name]
    if len(kept) == len(entries):
        known = ", ".join(e.name for e in entries) or "none"
        raise TokenError(f"no token named {name!r} (named tokens: {known})")
    _write_entries(home, kept)


def listing(home: Path) -> list[dict[str, Any]]:
    """Name, scopes and creation time of each named token (never a secret or hash)."""
    return [{"name": e.name, "scopes": [str(s) for s in e.scopes], "created": e.created}
            for e in _read_for_change(home)]


# --- checking ------------------------------------------------------------------------------


class Abortable(Protocol):
    def abort(self, reason: str) -> None: ...


class Authenticator:
    """Checks presented tokens (see the module docstring); one per daemon."""

    def __init__(self, default_token: str, home: Path | None) -> None:
        self._default = default_token.encode()
        self._home = home
        self._instance = secrets.token_urlsafe(18)
        self._entries: list[TokenEntry] = []
        self._signature: tuple[int, int, int] | None = None
        #: Live connections by the (name, digest) of the named token they used.
        self._live: dict[tuple[str, str], weakref.WeakSet[Any]] = {}
        self.reload_if_changed()

    @property
    def instance(self) -> str:
        """A random id of this start of the daemon (runtime.json's ``daemonInstance``): keys derived
        for it (the status page's login tickets, ``web_login``) end with the process."""
        return self._instance

    def derive_key(self, label: bytes) -> bytes:
        """HMAC-SHA256 of ``label`` under the default token: a key of its own for ``label``'s use
        (the status page's login tickets, ``web_login``), so the token itself stays here."""
        return hmac.new(self._default, label, hashlib.sha256).digest()

    def _stat(self) -> tuple[int, int, int] | None:
        if self._home is None:
            return None
        try:
            st = os.stat(self._home / TOKENS_FILE)
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def reload_if_changed(self) -> bool:
        """Re-read tokens.json if it changed; drop connections of tokens that went. True if it did."""
        signature = self._stat()
        if signature == self._signature:
            return False
        self._signature = signature
        if signature is None or self._home is None:
            entries: list[TokenEntry] = []
        else:
            try:
                entries = read_entries(self._home)
            except (OSError, ValueError) as exc:
                log.error("tokens_file_invalid", path=str(self._home / TOKENS_FILE), error=str(exc),
                          effect="no named token is accepted until it is fixed")
                entries = []
        self._entries = entries
        valid = {(e.name, e.digest) for e in entries}
        for key in [k for k in self._live if k not in valid]:
            conns = list(self._live.pop(key))
            if conns:
                log.warning("token_revoked_connections_dropped", token=key[0], connections=len(conns))
            for conn in conns:
                conn.abort(f"the token {key[0]!r} was revoked")
        return True

    def check(self, secret: str) -> Grant | None:
        """The grant of ``secret``, or None if it is not a valid token."""
        if not secret:
            return None
        presented = secret.encode("utf-8", "surrogatepass")
        if hmac.compare_digest(presented, self._default):
            return Grant(DEFAULT_NAME, DEFAULT_GRANT_SCOPES)
        self.reload_if_changed()
        digest = hash_secret(secret)
        found: Grant | None = None
        for entry in self._entries:  # compare with every entry: no early exit on a match
            if hmac.compare_digest(digest, entry.digest):
                found = Grant(entry.name, entry.scopes, entry.digest)
        return found

    def track(self, grant: Grant, conn: Abortable) -> None:
        """Drop ``conn`` (``conn.abort``) if ``grant``'s token is revoked while it lives."""
        if grant.digest is None:
            return
        self._live.setdefault((grant.name, grant.digest), weakref.WeakSet()).add(conn)

    async def watch(self, interval: float = WATCH_INTERVAL) -> None:
        """Poll tokens.json forever, so revocations reach live connections."""
        while True:
            await trio.sleep(interval)
            self.reload_if_changed()
