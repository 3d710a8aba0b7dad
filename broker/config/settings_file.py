"""Configuration: defaults < ``<home>/config.toml`` < ``TOOLBRIDGE_*`` environment < flags.

Every key of :class:`~broker.config.settings.Settings` except ``home`` can be set in the TOML file (same
name, e.g. ``default_timeout = 60``) or the environment (``TOOLBRIDGE_DEFAULT_TIMEOUT=60``;
where to listen: ``TOOLBRIDGE_LISTEN_HOST``, ``TOOLBRIDGE_LISTEN_PORT``, ``TOOLBRIDGE_LISTEN_HTTP_PORT``);
``serve`` flags override both. A value of the wrong type, a negative number or an unknown key
stops the daemon with a :class:`ConfigError` that names the key and what it accepts.
"""

from __future__ import annotations

import argparse
import os
import tomllib
from pathlib import Path
from typing import Any

import attrs

from .settings import Settings
from ..discovery import RERANK_MODES, SemanticUnavailable, load_embedder, semantic_available
from ..errors import ConfigError

CONFIG_FILE = "config.toml"
_CHOICES = {"log_format": ("auto", "console", "json"), "discovery_rerank": RERANK_MODES}
_FIELDS = {f.name: f for f in attrs.fields(Settings) if f.name != "home"}


def _expected(name: str) -> str:
    if name in _CHOICES:
        return "one of " + ", ".join(_CHOICES[name])
    kind = _FIELDS[name].type
    return {
        "bool": "true or false",
        "int": "a whole number >= 0",
        "float": "a number >= 0",
        "str": "a string",
        "int | None": "a whole number >= 0, or empty for none",
        "tuple[str, ...]": "a list of strings",
    }.get(str(kind), str(kind))


def _coerce(name: str, value: Any, source: str) -> Any:
    """Check ``value`` for setting ``name``; strings from the environment are parsed."""
    if name not in _FIELDS:
        allowed = ", ".join(sorted(_FIELDS))
        raise ConfigError(f"{source}: unknown setting {name!r}; known settings: {allowed}")
    kind = str(_FIELDS[name].type)
    bad = ConfigError(f"{source}: invalid value {value!r} for {name!r}: expected {_expected(name)}")
    if isinstance(value, str) and kind != "str":
        text = value.strip()
        if kind == "bool":
            if text.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                raise bad
            return text.lower() in ("1", "true", "yes", "on")
        if kind == "tuple[str, ...]":
            return tuple(p.strip() for p in text.split(",") if p.strip())
        if kind == "int | None" and text in ("", "none", "off"):
            return None
        try:
            value = int(text) if kind.startswith("int") else float(text)
        except ValueError:
            raise bad from None
    if kind == "bool" and not isinstance(value, bool):
        raise bad
    if kind.startswith("int") and not (value is None and kind == "int | None"):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise bad
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise bad
        value = float(value)
    if kind == "str" and not isinstance(value, str):
        raise bad
    if kind == "tuple[str, ...]":
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise bad
        value = tuple(value)
    if name in _CHOICES and value not in _CHOICES[name]:
        raise bad
    return value


def _from_file(home: Path) -> dict[str, Any]:
    path = home / CONFIG_FILE
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    return {k: _coerce(k, v, str(path)) for k, v in data.items()}


#: Where the daemon listens has names of its own (issue 19 item 14): ``TOOLBRIDGE_PORT`` and
#: ``TOOLBRIDGE_HOST`` also mean "where to connect" to apps, the CLI and the relay
#: (``app_client.discovery``), so ``TOOLBRIDGE_PORT=0`` (any free port) broke every client.
#: The old names still work for ``serve`` when the new one is unset (see :func:`env_deprecations`).
LISTEN_ENV = {
    "host": "TOOLBRIDGE_LISTEN_HOST",
    "port": "TOOLBRIDGE_LISTEN_PORT",
    "http_port": "TOOLBRIDGE_LISTEN_HTTP_PORT",
}


def _from_env(environ: dict[str, str]) -> dict[str, Any]:
    found = {}
    for name in _FIELDS:
        key = "TOOLBRIDGE_" + name.upper()
        listen_key = LISTEN_ENV.get(name)
        if listen_key is not None and listen_key in environ:
            key = listen_key
        if key in environ:
            found[name] = _coerce(name, environ[key], f"environment variable {key}")
    return found


def env_deprecations(environ: dict[str, str] | None = None) -> list[str]:
    """One line per old listen variable ``serve`` used (what to set instead), for its log."""
    environ = dict(os.environ) if environ is None else environ
    return [
        f"{old} sets where the daemon listens only for backward compatibility: use {new} "
        f"({old} is the address clients connect to)"
        for old, new in ((f"TOOLBRIDGE_{name.upper()}", new) for name, new in LISTEN_ENV.items())
        if old in environ and new not in environ
    ]


def _from_flags(args: argparse.Namespace) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name in ("host", "port", "http_port", "log_format", "tls_cert", "tls_key", "uplink", "uplink_name",
                 "uplink_token_file", "uplink_tls_ca", "discovery_rerank",
                 "nats_url", "broker_name", "nats_credentials", "nats_tls_ca", "nats_nkey_seed",
                 "nats_user", "nats_password_file", "nats_token_file"):
        value = getattr(args, name, None)
        if value is not None:
            found[name] = _coerce(name, value, f"--{name.replace('_', '-')}")
    if getattr(args, "no_http", False):
        found["http_port"] = None
    for name in ("allow_remote", "allow_insecure_remote", "uplink_tls"):
        if getattr(args, name, False):
            found[name] = True
    if getattr(args, "no_unix_socket", False):
        found["unix_socket"] = False
    return found


def load_settings(
    args: argparse.Namespace | None, home: Path, environ: dict[str, str] | None = None
) -> Settings:
    values: dict[str, Any] = {}
    values.update(_from_file(home))
    values.update(_from_env(dict(os.environ) if environ is None else environ))
    if args is not None:
        values.update(_from_flags(args))
    settings = Settings(home=home, **values)
    for name in ("port", "http_port"):
        port = getattr(settings, name)
        if port is not None and port > 65535:
            raise ConfigError(f"invalid value {port} for {name!r}: expected a port from 0 to 65535")
    check_discovery_rerank(settings.discovery_rerank)
    return settings


def check_discovery_rerank(mode: str) -> None:
    """Refuse ``semantic`` re-ranking at start-up, with the fix, when its extra is missing."""
    if mode == "semantic" and not semantic_available():
        try:
            load_embedder()
        except SemanticUnavailable as exc:
            raise ConfigError(str(exc)) from None


__all__ = ["CONFIG_FILE", "LISTEN_ENV", "env_deprecations", "load_settings", "check_discovery_rerank"]
