"""Matching an app's wire line against a vector's pattern, and filling in the runner's values.

Theory of operation
-------------------
A vector's expected line is a *pattern*: plain JSON, where

* an object matches an object that has at least the pattern's keys, each matching (extra keys
  are allowed: optional fields, and fields a newer app adds);
* an array matches an array of the same length, element by element;
* any other JSON value matches an equal value (``1`` and ``1.0`` are equal);
* a string starting with ``$`` is a placeholder (see :data:`PLACEHOLDERS`; ``$$x`` is the
  literal string ``$x``);
* ``{"$contains": [p, ...]}`` matches an array that has, for each ``p``, a distinct element
  matching it (in any order, other elements allowed);
* ``{"$oneOf": [p, ...]}`` matches what any ``p`` matches.

Before matching, the app's line is decoded with the wire module's message types (the single
source of message shapes) and every field the app left out is filled in with its protocol
default, so a pattern ``"success": true`` matches an app that omits ``success`` (it defaults
to true) — the line is compared as the broker would understand it. A line the wire module
refuses matches nothing, and the mismatch says why.

Values the runner knows (``$token``, ``$ref:NAME``) are substituted into lines it sends by
:func:`fill`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec

from app_client.errors import RemoteProtocolError
from app_client.wire import decode_message

from ..errors import BrokerError

__all__ = ["PLACEHOLDERS", "Mismatch", "fill", "match", "normalize"]

#: Placeholders a pattern may use, and what each matches.
PLACEHOLDERS: Final = {
    "$any": "any value (the field must be present, after defaults are filled in)",
    "$int": "an integer",
    "$number": "a number",
    "$string": "a string",
    "$nonEmptyString": "a string of at least one character",
    "$bool": "true or false",
    "$object": "a JSON object",
    "$array": "a JSON array",
    "$null": "null, or a field left out",
    "$token": "the token the runner wrote into the home directory (the current one)",
    "$capture:NAME": "any value; remembered as NAME for later steps",
    "$capture:NAME:$type": "as $capture:NAME, and the value must match $type (e.g. $nonEmptyString)",
    "$ref:NAME": "the value remembered as NAME",
}

_TYPES: Final[dict[str, Callable[[Any], bool]]] = {
    "$int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "$number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "$string": lambda v: isinstance(v, str),
    "$nonEmptyString": lambda v: isinstance(v, str) and v != "",
    "$bool": lambda v: isinstance(v, bool),
    "$object": lambda v: isinstance(v, dict),
    "$array": lambda v: isinstance(v, list),
    "$null": lambda v: v is None,
    "$any": lambda v: True,
}


class Mismatch(BrokerError):
    """The line does not match; ``str()`` says where and why."""


def _builtins(value: Any) -> Any:
    """``value`` as plain JSON values, with every struct field present (defaults included)."""
    if isinstance(value, msgspec.Struct):
        out: dict[str, Any] = {}
        config = value.__struct_config__
        if config.tag_field is not None:
            out[config.tag_field] = config.tag
        for field in msgspec.structs.fields(value):
            out[field.encode_name] = _builtins(getattr(value, field.name))
        return out
    if isinstance(value, msgspec.Raw):  # a payload the broker forwards unread (a log's data)
        return msgspec.json.decode(value)
    if isinstance(value, dict):
        return {key: _builtins(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_builtins(item) for item in value]
    return value


def normalize(line: bytes) -> Any:
    """The app's line as the broker understands it (defaults filled in).

    Raises :class:`Mismatch` if the wire module refuses the line.
    """
    try:
        message = decode_message(line)
    except RemoteProtocolError as exc:
        raise Mismatch(f"the line is not a valid message ({exc.code}: {exc.message})") from None
    return _builtins(message)


def fill(value: Any, env: dict[str, Any]) -> Any:
    """Substitute ``$token`` and ``$ref:NAME`` in a line the runner sends."""
    if isinstance(value, dict):
        return {key: fill(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [fill(item, env) for item in value]
    if isinstance(value, str) and value.startswith("$"):
        if value.startswith("$$"):
            return value[1:]
        if value == "$token":
            return env["token"]
        if value.startswith("$ref:"):
            return env["captures"][value[5:]]
    return value


def match(pattern: Any, actual: Any, env: dict[str, Any], path: str = "$") -> None:
    """Raise :class:`Mismatch` unless ``actual`` matches ``pattern``; record captures in ``env``."""
    if isinstance(pattern, str) and pattern.startswith("$") and not pattern.startswith("$$"):
        _placeholder(pattern, actual, env, path)
        return
    if isinstance(pattern, str) and pattern.startswith("$$"):
        pattern = pattern[1:]
    if isinstance(pattern, dict):
        if "$contains" in pattern:
            _contains(pattern["$contains"], actual, env, path)
            return
        if "$oneOf" in pattern:
            _one_of(pattern["$oneOf"], actual, env, path)
            return
        if not isinstance(actual, dict):
            raise Mismatch(f"{path}: expected an object, got {_short(actual)}")
        for key, sub in pattern.items():
            if key not in actual:
                if sub == "$null" or sub is None:
                    continue
                raise Mismatch(f"{path}.{key}: missing")
            match(sub, actual[key], env, f"{path}.{key}")
        return
    if isinstance(pattern, list):
        if not isinstance(actual, list) or len(actual) != len(pattern):
            raise Mismatch(f"{path}: expected an array of {len(pattern)}, got {_short(actual)}")
        for index, (sub, item) in enumerate(zip(pattern, actual)):
            match(sub, item, env, f"{path}[{index}]")
        return
    if isinstance(pattern, bool) or isinstance(actual, bool):
        if pattern is not actual:
            raise Mismatch(f"{path}: expected {_short(pattern)}, got {_short(actual)}")
        return
    if pattern != actual:
        raise Mismatch(f"{path}: expected {_short(pattern)}, got {_short(actual)}")


def _placeholder(pattern: str, actual: Any, env: dict[str, Any], path: str) -> None:
    if pattern in _TYPES:
        if not _TYPES[pattern](actual):
            raise Mismatch(f"{path}: expected {PLACEHOLDERS[pattern]}, got {_short(actual)}")
    elif pattern == "$token":
        if actual != env["token"]:
            raise Mismatch(f"{path}: expected the current token from the home directory")
    elif pattern.startswith("$capture:"):
        name, _, kind = pattern[9:].partition(":")
        if kind:  # "$capture:NAME:$type" also checks the value
            _placeholder(kind, actual, env, path)
        env["captures"][name] = actual
    elif pattern.startswith("$ref:"):
        name = pattern[5:]
        if actual != env["captures"].get(name):
            raise Mismatch(
                f"{path}: expected {_short(env['captures'].get(name))} (the {name} seen earlier), "
                f"got {_short(actual)}"
            )
    else:
        raise ValueError(f"unknown placeholder {pattern!r} in a vector")


def _contains(patterns: list[Any], actual: Any, env: dict[str, Any], path: str) -> None:
    if not isinstance(actual, list):
        raise Mismatch(f"{path}: expected an array, got {_short(actual)}")
    used: set[int] = set()
    for sub in patterns:
        for index, item in enumerate(actual):
            if index in used:
                continue
            try:
                match(sub, item, env, f"{path}[{index}]")
            except Mismatch:
                continue
            used.add(index)
            break
        else:
            raise Mismatch(f"{path}: no element matches {_short(sub)}")


def _one_of(patterns: list[Any], actual: Any, env: dict[str, Any], path: str) -> None:
    reasons = []
    for sub in patterns:
        try:
            match(sub, actual, env, path)
            return
        except Mismatch as exc:
            reasons.append(str(exc))
    raise Mismatch(" / ".join(reasons) or f"{path}: no alternative")


def _short(value: Any, limit: int = 120) -> str:
    text = msgspec.json.encode(value).decode() if not isinstance(value, bytes) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
