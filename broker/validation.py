"""Tool schemas: checked and compiled once at registration, used on every call.

A validator is built with the ``jsonschema`` library for the dialect the schema declares
(``$schema``), Draft 2020-12 when it declares none. A schema that is not a valid JSON Schema
object, whose root is not ``"type": "object"``, or that is larger than the configured limit is
refused at registration with a message naming the tool, so nothing invalid reaches a call.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

import jsonschema
import jsonschema.exceptions
import jsonschema.validators
import msgspec

from .errors import RegistrationError

#: Registered tool names: MCP allows 1-128 of these characters; we also allow space, ``/`` and
#: ``:`` because apps use them, and map everything to model-safe agent-facing names.
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.\-/: ]{1,128}$")
_APP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.\-]{0,63}$")
#: App names that would shadow toolbridge's own tools.
RESERVED_APP_NAMES = frozenset({"toolbridge"})

_MAX_REPORTED_ERRORS = 5


class ArgumentValidator(Protocol):
    def __call__(self, arguments: dict[str, Any]) -> list[str]: ...


def check_app_name(name: str) -> None:
    if not _APP_NAME.match(name) or "__" in name:
        raise RegistrationError(
            "invalid_app_name",
            f"invalid appName {name!r}: use 1-64 letters, digits, spaces, '_', '-' or '.', "
            "starting with a letter or digit, without '__'",
        )
    if name.lower() in RESERVED_APP_NAMES:
        raise RegistrationError("invalid_app_name", f"appName {name!r} is reserved for toolbridge")


def check_tool_name(name: str) -> None:
    if not _TOOL_NAME.match(name) or name != name.strip():
        raise RegistrationError(
            "invalid_tool",
            f"invalid tool name {name!r}: use 1-128 letters, digits, '_', '-', '.', '/', ':' "
            "or inner spaces",
        )


def compile_schema(tool_name: str, schema: dict[str, Any], max_bytes: int) -> ArgumentValidator:
    """Check ``schema`` and return a function giving the errors of a set of arguments."""
    size = len(msgspec.json.encode(schema))
    if size > max_bytes:
        raise RegistrationError(
            "invalid_tool",
            f"tool {tool_name!r}: inputSchema is {size} bytes, over the limit of {max_bytes}",
        )
    if schema.get("type") != "object":
        raise RegistrationError(
            "invalid_tool", f'tool {tool_name!r}: inputSchema must have "type": "object" at its root'
        )
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
        validator = cls(schema)
    except jsonschema.exceptions.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        raise RegistrationError(
            "invalid_tool",
            f"tool {tool_name!r}: inputSchema is not a valid JSON Schema at {where}: {exc.message}",
        ) from None
    except Exception as exc:  # e.g. an unresolvable $ref raised while compiling
        raise RegistrationError(
            "invalid_tool", f"tool {tool_name!r}: inputSchema cannot be compiled: {exc}"
        ) from None

    def validate(arguments: dict[str, Any]) -> list[str]:
        try:
            errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))
        except Exception as exc:  # a $ref that fails only at call time
            return [f"the tool's schema could not be applied: {type(exc).__name__}"]
        return [_describe(error) for error in errors[:_MAX_REPORTED_ERRORS]]

    return validate


def _describe(error: jsonschema.exceptions.ValidationError) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    message = error.message
    if len(message) > 200:
        message = message[:200] + "..."
    return f"${path}: {message}" if path else f"arguments: {message}"
