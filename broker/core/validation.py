"""Tool schemas: checked and compiled once at registration, used on every call.

A validator is built with the ``jsonschema`` library for the dialect the schema declares
(``$schema``), Draft 2020-12 when it declares none. A schema that is not a valid JSON Schema
object, whose root is not ``"type": "object"``, or that is larger than the configured limit is
refused at registration with a message naming the tool, so nothing invalid reaches a call.

Simple schemas (a flat object of typed properties, the common case) take a fast path found
once at registration (:func:`fast_validator`): no metaschema check (its rules are checked
directly) and a few ``isinstance`` tests per call. The fast path only ever answers "valid";
anything else goes to ``jsonschema``, so results and messages are the same either way.

Regular expressions (``pattern``, ``patternProperties``) are matched by ``broker.core.patterns``:
RE2 (linear time) where it can, else the ``regex`` module with a timeout, never Python's
backtracking ``re`` on the event loop; a pattern check that runs out of time refuses the call.

Each problem found is an :class:`ArgumentProblem`: the text for the agent (which may quote
the value it sent) plus ``log_text`` with the path and the rule only, which is what the
daemon's log gets (argument values may be secrets).

Compiling is CPU work (a large schema's metaschema check takes a good part of a second):
the registry runs :func:`compile_schema` in worker threads, never on the event loop.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Protocol

import attrs
import jsonschema
import jsonschema.exceptions
import jsonschema.validators
import msgspec

from ..errors import RegistrationError
from .patterns import TIMEOUT_RULE, PatternSet, PatternTimeout, collect_patterns, matching, safe_validator_class

#: Registered tool names: MCP allows 1-128 of these characters; we also allow space, ``/`` and
#: ``:`` because apps use them, and map everything to model-safe agent-facing names.
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.\-/: ]{1,128}$")
_APP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.\-]{0,63}$")
#: App names that would shadow toolbridge's own tools.
RESERVED_APP_NAMES = frozenset({"toolbridge"})

_MAX_REPORTED_ERRORS = 5


class ArgumentProblem(str):
    """One problem with a call's arguments: the agent's text, and ``log_text`` for the log."""

    log_text: str

    def __new__(cls, text: str, log_text: str) -> ArgumentProblem:
        problem = super().__new__(cls, text)
        problem.log_text = log_text
        return problem


def log_safe(problems: list[str]) -> str:
    """``problems`` as the daemon's log may show them: paths and rules, no argument values."""
    return "; ".join(p.log_text if isinstance(p, ArgumentProblem) else p for p in problems)


class ArgumentValidator(Protocol):
    #: A call's validation may take up to the pattern fallback's budget (a pattern RE2 cannot
    #: run): the router checks such calls off the event loop.
    @property
    def may_be_slow(self) -> bool: ...

    def __call__(self, arguments: dict[str, Any]) -> list[str]: ...


@attrs.frozen
class _Validator:
    check: Callable[[dict[str, Any]], list[str]]
    may_be_slow: bool
    #: ``fast_validator``'s check for a simple schema (True: valid), tried first; else None.
    fast: Callable[[dict[str, Any]], bool] | None = None

    def __call__(self, arguments: dict[str, Any]) -> list[str]:
        fast = self.fast
        if fast is not None and fast(arguments):  # the common case, without the full check's call
            return []
        return self.check(arguments)


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
    return compile_sized(tool_name, schema, max_bytes)[0]


def compile_sized(tool_name: str, schema: dict[str, Any], max_bytes: int) -> tuple[ArgumentValidator, int]:
    """:func:`compile_schema`, and the schema's size in bytes (JSON). CPU-heavy: run it in a thread."""
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
    fast = fast_validator(schema)
    try:
        if fast is None:  # a simple schema was checked against the metaschema's rules already
            cls.check_schema(schema)
        patterns = PatternSet(collect_patterns(schema)) if fast is None else PatternSet(set())
        validator = safe_validator_class(cls)(schema)
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

    def validate(arguments: dict[str, Any]) -> list[str]:  # after _Validator tried ``fast``
        try:
            with matching(patterns):
                errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))
        except PatternTimeout:  # in a jsonschema helper (unevaluatedProperties' pattern checks)
            text = ("the pattern check for a property name took too long; the tool's pattern is too "
                    "slow for this value: send shorter or simpler property names")
            return [ArgumentProblem(f"arguments: {text}", f"arguments: {text}")]
        except Exception as exc:  # a $ref that fails only at call time
            return [f"the tool's schema could not be applied: {type(exc).__name__}"]
        return [_describe(error) for error in errors[:_MAX_REPORTED_ERRORS]]

    return _Validator(validate, may_be_slow=not patterns.linear, fast=fast), size


def _describe(error: jsonschema.exceptions.ValidationError) -> ArgumentProblem:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    where = f"${path}" if path else "arguments"
    message = _json_spelling(error)
    if len(message) > 200:
        message = message[:200] + "..."
    return ArgumentProblem(f"{where}: {message}", f"{where}: {_rule(error)}")


def _has_python_literals(value: Any, depth: int = 0) -> bool:
    """Does Python's repr of ``value`` show ``True``, ``False`` or ``None`` (JSON: true/false/null)?"""
    if value is None or isinstance(value, bool):
        return True
    if depth > 20:  # deep enough: jsonschema's message is cut at 200 characters anyway
        return False
    if isinstance(value, dict):
        return any(_has_python_literals(v, depth + 1) for v in value.values())
    if isinstance(value, list):
        return any(_has_python_literals(v, depth + 1) for v in value)
    return False


def _json_spelling(error: jsonschema.exceptions.ValidationError) -> str:
    """jsonschema's message with the argument (and the schema's value) spelled as JSON.

    jsonschema quotes values with Python's ``repr``: an agent that sent ``true`` would read
    ``True is not of type 'string'``. Values holding true/false/null are re-spelled (the rest
    read the same either way and keep their text).
    """
    message = error.message
    for value, at_start in ((error.instance, True), (error.validator_value, False)):
        if not _has_python_literals(value):
            continue
        shown = repr(value)
        try:
            spelled = msgspec.json.encode(value).decode()
        except (TypeError, ValueError, OverflowError):
            continue
        if at_start and message.startswith(shown):
            message = spelled + message[len(shown):]
        elif not at_start and message.endswith(shown):
            message = message[: -len(shown)] + spelled
        elif not at_start and message.startswith(shown):  # const: "<value> was expected"
            message = spelled + message[len(shown):]
    return message


#: Keywords whose error message quotes only schema text (never the argument's value).
_SCHEMA_TEXT_MESSAGES = frozenset({"required", "dependentRequired", "dependencies", TIMEOUT_RULE})


def _rule(error: jsonschema.exceptions.ValidationError) -> str:
    """The rule ``error`` broke, without the value that broke it (for the log).

    ``validator_value`` is schema text (the type, the enum's members, the pattern), so it may be
    shown; ``instance`` and ``message`` (which quotes the instance) may not, except for the
    keywords whose message is built from schema text only.
    """
    rule = str(error.validator)
    if rule in _SCHEMA_TEXT_MESSAGES:
        return error.message[:200]
    shown = repr(error.validator_value)
    if len(shown) > 100:
        shown = shown[:100] + "..."
    if rule == "type":
        return f"not of type {shown}"
    if isinstance(error.validator_value, (dict, list)) and rule not in ("enum", "const"):
        return f"fails {rule!r}"  # a subschema: naming the keyword is enough
    return f"fails {rule!r} {shown}"


# --- the fast path for simple schemas --------------------------------------------------------
#
# Most tools declare a flat object: typed properties, some required, maybe no extras. For such a
# schema (recognised once, at registration) the metaschema check is skipped — every keyword and
# value in it is one the metaschema accepts, checked here — and a call's arguments are checked by
# a few isinstance tests. The fast check only ever says "valid": anything it is unsure of goes
# to jsonschema, which also writes the error messages, so the answers are the same either way.

#: ``$schema`` values for which the fast path applies (draft 6 and later: their ``type``,
#: ``properties``, ``required`` and ``additionalProperties`` mean the same; a float with a zero
#: fraction is an integer).
_FAST_DIALECTS = frozenset({
    "https://json-schema.org/draft/2020-12/schema",
    "https://json-schema.org/draft/2019-09/schema",
    "http://json-schema.org/draft-07/schema#",
    "http://json-schema.org/draft-07/schema",
    "http://json-schema.org/draft-06/schema#",
    "http://json-schema.org/draft-06/schema",
})
_STRING_ANNOTATIONS = frozenset({"title", "description", "$comment", "format"})
_BOOL_ANNOTATIONS = frozenset({"deprecated", "readOnly", "writeOnly"})
_ROOT_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "$schema", "default", "examples"})
_PROPERTY_KEYWORDS = frozenset({"type", "default", "examples"})


def _is_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": _is_integer,
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}


def _annotations_ok(schema: dict[str, Any], allowed: frozenset[str]) -> bool:
    for key, value in schema.items():
        if key in _STRING_ANNOTATIONS:
            if not isinstance(value, str):
                return False
        elif key in _BOOL_ANNOTATIONS:
            if not isinstance(value, bool):
                return False
        elif key == "examples":
            if not isinstance(value, list):
                return False
        elif key not in allowed:
            return False
    return True


def _type_check(schema: dict[str, Any]) -> Callable[[Any], bool] | None:
    """The check for a property schema made of ``type`` and annotations only, else None."""
    if not _annotations_ok(schema, _PROPERTY_KEYWORDS):
        return None
    kind = schema.get("type")
    if kind is None:
        return lambda v: True
    if isinstance(kind, str):
        return _TYPE_CHECKS.get(kind)
    if (isinstance(kind, list) and kind and all(isinstance(k, str) and k in _TYPE_CHECKS for k in kind)
            and len(set(kind)) == len(kind)):
        checks = [_TYPE_CHECKS[k] for k in kind]
        return lambda v: any(check(v) for check in checks)
    return None


def fast_validator(schema: dict[str, Any]) -> Callable[[dict[str, Any]], bool] | None:
    """A function telling (True) that arguments are valid against a simple ``schema``; else None.

    Returns None when ``schema`` is not one this module can judge alone (then it needs the
    metaschema check and jsonschema). When it returns a function, ``schema`` is also known to
    be a valid JSON Schema. The function returning False means "not sure": ask jsonschema.
    """
    dialect = schema.get("$schema")
    if dialect is not None and dialect not in _FAST_DIALECTS:
        return None
    if schema.get("type") != "object" or not _annotations_ok(schema, _ROOT_KEYWORDS):
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(extra, bool):
        return None
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return None
    if len(set(required)) != len(required):
        return None
    checks: dict[str, Callable[[Any], bool]] = {}
    for name, subschema in properties.items():
        check = _type_check(subschema) if isinstance(subschema, dict) else None
        if check is None:
            return None
        checks[name] = check
    needed = tuple(required)

    def valid(arguments: dict[str, Any]) -> bool:
        for name in needed:
            if name not in arguments:
                return False
        for name, value in arguments.items():
            check = checks.get(name)
            if check is None:
                if not extra:
                    return False
            elif not check(value):
                return False
        return True

    return valid
