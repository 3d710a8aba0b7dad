"""``toolbridge call``'s arguments read by the tool's schema, and its unknown-tool message.

Theory of operation
-------------------
``--arg key=value`` gives every value as text; what JSON value it becomes is decided by the
tool's ``inputSchema`` (fetched with ``tools/list`` on the same connection as the call), by
the JSON types the property accepts (:func:`accepted_types`: ``type``, ``enum``/``const``,
the branches of ``anyOf``/``oneOf``/``allOf``, local ``$ref``s):

* only strings: the text as it is (``text=123`` sends ``"123"``, ``text=true`` ``"true"``);
* no string: the text parsed as JSON, which must be of an accepted type (``count=3``,
  ``flags=[1,2]``, ``on=true``, ``x=null``), else a usage error naming the key and types;
* a union with string (``string | integer``): the JSON value when the text is JSON of another
  accepted type (``n=3`` sends 3), else the text as a string; quote it (``n='"3"'``) to
  force a string;
* no schema for the key (no ``properties`` entry, no ``additionalProperties`` schema, a tool
  ``tools/list`` does not show): as before, the text parsed as JSON if it is JSON, else the
  text. ``--args-json`` values are sent as given.

The daemon still validates the arguments; this only chooses how to read the text. Errors
spell values as JSON (``true``, not Python's ``True``).

:func:`unknown_tool_message` is what the CLI prints for a name no app offers: it points at
``toolbridge tools`` (the daemon's own message speaks MCP, for agents), suggests the names
it probably meant (:func:`broker.core.names.near_names`, with typos too) and says when no
app is connected at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from ..core.names import near_names

__all__ = ["accepted_types", "argument_hints", "convert_value", "parse_arguments", "unknown_tool_message"]

#: Every JSON Schema type; ``None`` from :func:`accepted_types` means "any of these".
ALL_TYPES: Final = frozenset({"string", "integer", "number", "boolean", "null", "array", "object"})
_MAX_DEPTH: Final = 32


def json_type(value: Any) -> str:
    """The JSON Schema type name of a decoded JSON value (an integral number is "integer")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _resolve(schema: Any, root: Mapping[str, Any]) -> Any:
    """``schema`` with a local ``$ref`` (``#/$defs/X``, ``#/definitions/X``) followed once."""
    if isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str):
        ref: str = schema["$ref"]
        if ref.startswith("#/"):
            target: Any = root
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, Mapping) or part not in target:
                    return {}
                target = target[part]
            return target
        return {}  # a remote $ref: unknown, so unconstrained
    return schema


def accepted_types(schema: Any, root: Mapping[str, Any], depth: int = 0) -> frozenset[str] | None:
    """The JSON types ``schema`` may accept (a superset), or None when it does not say."""
    if depth > _MAX_DEPTH:
        return None
    schema = _resolve(schema, root)
    if schema is True or not isinstance(schema, Mapping):
        return None
    found: frozenset[str] | None = None

    def narrow(types: frozenset[str] | None) -> None:
        nonlocal found
        if types is not None:
            found = types if found is None else found & types

    kind = schema.get("type")
    if isinstance(kind, str):
        narrow(frozenset({kind}))
    elif isinstance(kind, list):
        narrow(frozenset(k for k in kind if isinstance(k, str)))
    if "const" in schema:
        narrow(frozenset({json_type(schema["const"])}))
    if isinstance(schema.get("enum"), list):
        narrow(frozenset(json_type(v) for v in schema["enum"]))
    for keyword in ("anyOf", "oneOf"):
        branches = schema.get(keyword)
        if isinstance(branches, list) and branches:
            union: set[str] = set()
            for branch in branches:
                types = accepted_types(branch, root, depth + 1)
                if types is None:  # one branch takes anything: so does the union
                    union = set(ALL_TYPES)
                    break
                union |= types
            narrow(frozenset(union))
    if isinstance(schema.get("allOf"), list):
        for branch in schema["allOf"]:
            narrow(accepted_types(branch, root, depth + 1))
    if found is not None and "number" in found:
        found = found | {"integer"}  # every integer is a number
    return found


def property_schema(input_schema: Mapping[str, Any] | None, key: str) -> Any:
    """The schema of argument ``key`` in ``input_schema``, or None when it gives none."""
    if not isinstance(input_schema, Mapping):
        return None
    root = _resolve(input_schema, input_schema)
    if not isinstance(root, Mapping):
        return None
    properties = root.get("properties")
    if isinstance(properties, Mapping) and key in properties:
        return properties[key]
    extra = root.get("additionalProperties")
    return extra if isinstance(extra, Mapping) else None


def _spell(types: Iterable[str]) -> str:
    names = sorted(types)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def convert_value(key: str, text: str, schema: Any, root: Mapping[str, Any]) -> Any:
    """The JSON value ``--arg key=text`` stands for, read by ``schema`` (see the module doc).

    Raises ValueError with a one-line message (values spelled as JSON) when the text cannot
    be a value the schema accepts.
    """
    types = None if schema is None else accepted_types(schema, root)
    if types is not None and not types:
        types = None  # contradictory (allOf of disjoint types): let the daemon say why
    if types is not None and types <= {"string"}:
        return text
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        if types is None or "string" in types:
            return text
        raise ValueError(
            f"--arg {key}={text}: {key!r} takes {_spell(types)} (a JSON value), and {json.dumps(text)} "
            f"is not JSON; for example --arg {key}={_example(types)}"
        ) from None
    if types is None or json_type(value) in types or (json_type(value) == "integer" and "number" in types):
        return value
    if "string" in types:
        return text
    raise ValueError(
        f"--arg {key}={text}: {key!r} takes {_spell(types)}, not {json_type(value)} "
        f"({json.dumps(value)}); for example --arg {key}={_example(types)}"
    )


def _example(types: frozenset[str]) -> str:
    examples = {"integer": "3", "number": "1.5", "boolean": "true", "null": "null",
                "array": "'[1, 2]'", "object": "'{\"a\": 1}'", "string": "text"}
    return examples[sorted(types)[0]]


def parse_arguments(
    pairs: list[str], json_text: str | None, input_schema: Mapping[str, Any] | None = None,
    *, json_flag: str = "--args-json",
) -> dict[str, Any]:
    """The arguments object: ``json_text`` (a JSON object) first, then each ``key=value``.

    With ``input_schema`` each value is read by its property's schema (:func:`convert_value`);
    without one (or for a key it does not describe) a value is JSON if it parses as JSON.
    Raises ValueError with a one-line message for the user. ``json_flag`` is the option
    ``json_text`` came from (named in messages).
    """
    arguments: dict[str, Any] = {}
    if json_text:
        try:
            loaded = json.loads(json_text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{json_flag} is not valid JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise ValueError(f"{json_flag} must be a JSON object (got {json_type(loaded)})")
        arguments.update(loaded)
    root: Mapping[str, Any] = input_schema if isinstance(input_schema, Mapping) else {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--arg {pair!r}: use key=value")
        arguments[key] = convert_value(key, value, property_schema(input_schema, key), root)
    return arguments


def argument_hints(arguments: Mapping[str, Any], input_schema: Mapping[str, Any] | None) -> list[str]:
    """What to change on the command line when the daemon refused the arguments: the ``--arg``
    to add for each missing required one, and the names the tool accepts when one is not among
    them. Empty when the schema names no properties (nothing useful to say)."""
    root = _resolve(input_schema, input_schema) if isinstance(input_schema, Mapping) else None
    if not isinstance(root, Mapping) or not isinstance(root.get("properties"), Mapping):
        return []
    properties: Mapping[str, Any] = root["properties"]
    required = [name for name in root.get("required") or () if isinstance(name, str)]
    hints = []
    for name in required:
        if name not in arguments:
            types = accepted_types(properties.get(name), root)
            hints.append(f"add --arg {name}=VALUE (a {_spell(types) if types else 'JSON value'}): it is required")
    unknown = [name for name in arguments if name not in properties]
    if unknown and root.get("additionalProperties") is not True:
        accepted = ", ".join(properties) or "none"
        hints.append(f"the tool has no parameter {_spell_names(unknown)}; its parameters: {accepted}")
    return hints


def unknown_tool_message(name: str, known: Iterable[str]) -> str:
    """The CLI's message for a tool name no connected app offers (one line, says what to do)."""
    known = list(known)
    if not known:
        return (f"unknown tool {name!r}: no app is connected to toolbridge, so there are no tools; "
                "start the app, then run `toolbridge tools` (or `toolbridge status`)")
    guesses = near_names(name, known, fuzzy=True)
    hint = f" Did you mean {_spell_names(guesses)}?" if guesses else ""
    return f"unknown tool {name!r}: run `toolbridge tools` for the tools of the connected apps.{hint}"


def _spell_names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
