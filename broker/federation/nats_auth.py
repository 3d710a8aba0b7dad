"""How this broker reaches and proves itself to a NATS cluster: seed URLs, credentials, errors.

Theory of operation
-------------------
``--nats`` takes one URL or several separated by commas (``nats://h1:4222,nats://h2:4222``):
the seeds nats-py tries first; it learns the cluster's other servers from them (``connect_urls``
in the server's INFO) and moves between all of them when a node is lost.

Credentials must hold for **every** server, the learned ones too: nats-py sends a URL's
``user:password@`` only to that URL's own server, so a broker whose password was in the URL
could not log in to any other node and never came back after its node died (issue 27 item 2).
Here credentials are connect options instead, which nats-py sends to whichever server it
reaches. Exactly one way at a time (:class:`NatsAuth`):

* ``creds`` — ``--nats-credentials``: a ``.creds`` file (user JWT + NKey seed, operator mode);
* ``nkey`` — ``--nats-nkey-seed``: a file holding a user NKey seed (``nkeys`` in the server's
  ``authorization`` block);
* ``user`` — ``--nats-user`` with the password from ``--nats-password-file`` or the environment
  variable ``TOOLBRIDGE_NATS_PASSWORD`` (never a command-line value: ``ps`` shows those);
* ``token`` — ``--nats-token-file`` or ``TOOLBRIDGE_NATS_TOKEN``;
* ``none``.

A ``user:password@`` or ``token@`` still found in a URL (the old way) is taken out of every URL
and used as those options, with a warning that ``ps`` shows it. What reaches logs and status is
:func:`redacted`: never a user name, password or token.

nats-py reports every failed (re)connection attempt, twice a second per server while a node is
down or a credential is refused; :class:`RepeatFilter` lets each distinct reason through once
per :data:`REPEAT_SECONDS` (so two alternating reasons no longer log ~8 lines a second).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import SplitResult, urlsplit

import attrs

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..config.settings import Settings

#: Seed URLs in one ``--nats`` value, at most.
MAX_SEEDS: Final = 32
#: A credential file bigger than this is not a credential (read whole, at start).
MAX_SECRET_FILE: Final = 64 * 1024
#: The same connection error is logged at most once per this many seconds.
REPEAT_SECONDS: Final = 60.0
#: Distinct error reasons remembered (beyond, the oldest is forgotten).
MAX_REASONS: Final = 64

AUTH_MODES: Final = ("creds", "nkey", "user", "token", "none")


@attrs.frozen
class NatsAuth:
    """The one way this broker authenticates to every server of the cluster."""

    mode: str = "none"
    credentials: str | None = None
    nkey_seed: str | None = None
    user: str | None = None
    password: str | None = attrs.field(default=None, repr=False)
    token: str | None = attrs.field(default=None, repr=False)

    def connect_options(self) -> dict[str, Any]:
        """nats-py ``connect()`` keyword arguments: they apply to every server, learned ones too."""
        if self.mode == "creds":
            return {"user_credentials": self.credentials}
        if self.mode == "nkey":
            return {"nkeys_seed": self.nkey_seed}
        if self.mode == "user":
            return {"user": self.user, "password": self.password}
        if self.mode == "token":
            return {"token": self.token}
        return {}


def split_seeds(text: str) -> list[SplitResult]:
    """The seed URLs of a ``--nats`` value (comma-separated; ``HOST:PORT`` means ``nats://``).

    Raises ConfigError for an empty list, too many seeds, a scheme other than ``nats``/``tls``,
    a URL without a host, or ``nats://`` mixed with ``tls://``.
    """
    seeds = [part.strip() for part in text.split(",") if part.strip()]
    if not seeds or len(seeds) > MAX_SEEDS:
        raise ConfigError(f"invalid nats_url: give 1-{MAX_SEEDS} URLs separated by commas "
                          "(nats://HOST:PORT or tls://HOST:PORT)")
    parsed = []
    for seed in seeds:
        parts = urlsplit(seed if "://" in seed else f"nats://{seed}")
        try:
            parts.port  # noqa: B018 (a port that is not a number raises here)
        except ValueError:
            parts = parts._replace(netloc="")
        if parts.scheme not in ("nats", "tls") or not parts.hostname:
            raise ConfigError(f"invalid nats_url {redacted(seed)!r}: expected nats://HOST:PORT or tls://HOST:PORT "
                              "(several: separated by commas)")
        parsed.append(parts)
    if len({parts.scheme for parts in parsed}) > 1:
        raise ConfigError("invalid nats_url: use tls:// for every seed or for none (nats-py cannot mix them)")
    return parsed


def strip_userinfo(parts: SplitResult) -> SplitResult:
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return parts._replace(netloc=f"{host}:{parts.port}" if parts.port else host)


def redacted(url: str) -> str:
    """``url`` (one or several, comma-separated) without user names, passwords or tokens."""
    if "@" not in url:
        return url
    out = []
    for seed in url.split(","):
        try:
            parts = urlsplit(seed.strip())
            if parts.username is None and parts.password is None:
                out.append(seed.strip())
            else:
                out.append(strip_userinfo(parts)._replace(netloc="***@" + strip_userinfo(parts).netloc).geturl())
        except ValueError:
            out.append("<invalid URL>")
    return ",".join(out)


def _read_secret(path_text: str, what: str) -> str:
    path = Path(path_text).expanduser()
    try:
        if path.stat().st_size > MAX_SECRET_FILE:
            raise ConfigError(f"{what} {path} is over {MAX_SECRET_FILE // 1024} KiB: not a credential file")
        secret = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{what} {path} is not UTF-8 text") from None
    if not secret:
        raise ConfigError(f"{what} {path} is empty")
    return secret


def _existing_file(path_text: str, what: str, hint: str) -> str:
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise ConfigError(f"{what} {path} is not a file: {hint}")
    return str(path)


def nats_auth(settings: Settings, seeds: list[SplitResult], warn: Callable[[str], None]) -> NatsAuth:
    """The credentials of ``settings`` (and of the seed URLs, the old way). Raises ConfigError
    when two ways are given, a file cannot be read, or a user has no password."""
    password = settings.nats_password or None
    if settings.nats_password_file:
        password = _read_secret(settings.nats_password_file, "nats_password_file")
    token = settings.nats_token or None
    if settings.nats_token_file:
        token = _read_secret(settings.nats_token_file, "nats_token_file")
    user = settings.nats_user or None
    in_urls = {(parts.username, parts.password) for parts in seeds if parts.username is not None}
    if in_urls:
        if len(in_urls) > 1:
            raise ConfigError("the --nats URLs carry different credentials: one broker has one user on every server")
        url_user, url_password = in_urls.pop()
        warn("a password or token in the --nats URL shows in `ps` and shell history: use --nats-user with "
             "--nats-password-file (or TOOLBRIDGE_NATS_PASSWORD), or --nats-token-file")
        if url_password is None:
            token = token or url_user
        else:
            user, password = user or url_user, password or url_password
    ways = [name for name, given in (
        ("--nats-credentials", settings.nats_credentials), ("--nats-nkey-seed", settings.nats_nkey_seed),
        ("--nats-user", user), ("--nats-token-file (or TOOLBRIDGE_NATS_TOKEN)", token)) if given]
    if len(ways) > 1:
        raise ConfigError(f"give one way to log in to NATS, not {' and '.join(ways)}")
    if settings.nats_credentials:
        return NatsAuth("creds", credentials=_existing_file(
            settings.nats_credentials, "nats_credentials", "give the .creds file your NATS operator issued"))
    if settings.nats_nkey_seed:
        seed = _existing_file(settings.nats_nkey_seed, "nats_nkey_seed", "give a file holding the user's NKey seed (SU...)")
        if not _read_secret(seed, "nats_nkey_seed").startswith("SU"):
            raise ConfigError(f"nats_nkey_seed {seed} does not hold a user NKey seed (it starts with SU)")
        return NatsAuth("nkey", nkey_seed=seed)
    if user is not None:
        if password is None:
            raise ConfigError(f"--nats-user {user!r} needs its password: --nats-password-file PATH or the "
                              "environment variable TOOLBRIDGE_NATS_PASSWORD")
        return NatsAuth("user", user=user, password=password)
    if password is not None:
        raise ConfigError("a NATS password needs --nats-user (or give a token with --nats-token-file)")
    if token is not None:
        return NatsAuth("token", token=token)
    return NatsAuth()


@attrs.define
class RepeatFilter:
    """Which connection errors to log: each distinct reason once per ``every`` seconds."""

    clock: Callable[[], float]
    every: float = REPEAT_SECONDS
    _logged: dict[tuple[str, str], float] = attrs.field(factory=dict)
    #: Repeats not logged since each reason was last logged.
    _held: dict[tuple[str, str], int] = attrs.field(factory=dict)

    def admit(self, reason: tuple[str, str]) -> int | None:
        """None: do not log ``reason`` now; else log it, with this many repeats held back since."""
        now = self.clock()
        last = self._logged.get(reason)
        if last is not None and now - last < self.every:
            self._held[reason] = self._held.get(reason, 0) + 1
            return None
        self._logged.pop(reason, None)
        if len(self._logged) >= MAX_REASONS:
            oldest = next(iter(self._logged))
            del self._logged[oldest]
            self._held.pop(oldest, None)
        self._logged[reason] = now
        return self._held.pop(reason, 0)

