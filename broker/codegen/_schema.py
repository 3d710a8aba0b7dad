"""JSON Schema -> a small type model both emitters (Python, TypeScript) render.

Theory of operation
-------------------
:class:`SchemaConverter` walks one tool's schema and returns a :data:`TypeExpr`: primitive,
literal set (``enum``/``const``), array, string-keyed map, union (``anyOf``/``oneOf``/type
lists/``nullable``), a reference to a named object type (:class:`ObjectDef`, which the
emitters render as a ``TypedDict`` or an ``interface``), or :class:`Unknown` (``Any`` /
``unknown``) carrying the reason as a comment.

Coverage: ``type`` (one or a list), ``enum``, ``const``, ``properties`` + ``required``,
``additionalProperties``, ``items``, ``anyOf``, ``oneOf``, ``allOf`` of object parts (merged),
``nullable``, local ``$ref`` (``#``, ``#/$defs/X``, ``#/definitions/X``, any JSON pointer into
the document), ``description``/``title``/``default``/``format`` as documentation. Recursive
references to object types become references to the named type (both languages allow a
type to mention itself); any other recursion, a remote ``$ref``, a tuple-typed array and
every keyword this module does not understand degrade to :class:`Unknown` with a reason. The
converter never raises for any input (it only reads dicts, lists and scalars), and a depth
and size budget keep hostile schemas cheap.

Names of object types come from a :class:`~._names.NameAllocator` shared by the whole file,
built from hints (``<Tool>Args``, ``<parent><Property>``, ``<Tool><DefName>``).
"""

from __future__ import annotations

import math
import urllib.parse
from typing import Any, Final, Union

import attrs

from ._names import NameAllocator, pascal_case

__all__ = [
    "Prim",
    "Lit",
    "Arr",
    "Map",
    "Ref",
    "Union_",
    "Unknown",
    "TypeExpr",
    "Field",
    "ObjectDef",
    "SchemaConverter",
    "JsonScalar",
]

JsonScalar = Union[str, int, float, bool, None]

_MAX_DEPTH: Final = 48
_MAX_NODES: Final = 4000
_MAX_LITERALS: Final = 200
_MAX_UNION: Final = 64


@attrs.frozen
class Prim:
    #: "string", "number", "integer", "boolean" or "null"
    kind: str


@attrs.frozen
class Lit:
    values: tuple[JsonScalar, ...]


@attrs.frozen
class Arr:
    item: TypeExpr


@attrs.frozen
class Map:
    """An object whose keys are not listed: ``dict[str, value]``."""

    value: TypeExpr


@attrs.frozen
class Ref:
    """A named object type (see :class:`ObjectDef`)."""

    name: str


@attrs.frozen
class Union_:
    options: tuple[TypeExpr, ...]


@attrs.frozen
class Unknown:
    """Any JSON value; ``reason`` says why no better type was given (None: the schema allows any)."""

    reason: str | None = None


TypeExpr = Union[Prim, Lit, Arr, Map, Ref, Union_, Unknown]


@attrs.define
class Field:
    key: str
    type: TypeExpr
    required: bool
    doc: str | None = None


@attrs.define
class ObjectDef:
    name: str
    fields: list[Field] = attrs.Factory(list)
    doc: str | None = None
    #: Remarks about what the type cannot express (extra keys, ignored keywords).
    notes: list[str] = attrs.Factory(list)


_OBJECT_KEYS: Final = frozenset({"properties", "required", "additionalProperties", "patternProperties"})
_TYPE_KEYS: Final = frozenset(
    {"type", "$ref", "enum", "const", "anyOf", "oneOf", "allOf", "items", "prefixItems"} | _OBJECT_KEYS
)
_PRIMS: Final = {"string", "number", "integer", "boolean", "null"}


def _doc(schema: dict[str, Any]) -> str | None:
    parts: list[str] = []
    for key in ("title", "description"):
        value = schema.get(key)
        if isinstance(value, str) and value.strip() and value.strip() not in parts:
            parts.append(value.strip())
    extra: list[str] = []
    fmt = schema.get("format")
    if isinstance(fmt, str) and fmt:
        extra.append(f"Format: {fmt}.")
    if "default" in schema:
        default = schema["default"]
        if isinstance(default, (str, int, float, bool)) or default is None:
            extra.append(f"Default: {_json_scalar(default)}.")
    if extra:
        parts.append(" ".join(extra))
    return "\n\n".join(parts) if parts else None


def _json_scalar(value: JsonScalar) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)[:200]
    return repr(value)


def _is_scalar(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, (str, int, bool))


class SchemaConverter:
    """Converts the schemas of one tool; object types go to ``objects`` in creation order."""

    def __init__(self, root: Any, names: NameAllocator, objects: list[ObjectDef], prefix: str) -> None:
        self.root = root
        self.names = names
        self.objects = objects
        self.prefix = prefix
        self._nodes = 0
        self._ref_types: dict[str, TypeExpr] = {}
        self._ref_names: dict[str, str] = {}
        self._in_progress: set[str] = set()

    # --- entry points ------------------------------------------------------------------------

    def convert_root(self, name_hint: str) -> TypeExpr:
        """Convert the whole document; an object root becomes the named type ``name_hint``."""
        if not _is_object_schema(self.root):
            return self.convert(self.root, name_hint, 0)
        name = self.names.allocate(pascal_case(name_hint))
        for key in ("#", "#/"):
            self._ref_names[key] = name
            self._in_progress.add(key)
        expr = self._nullable(self.root, self._object(self.root, name_hint, 0, name=name))
        for key in ("#", "#/"):
            self._in_progress.discard(key)
            self._ref_types[key] = expr
        return expr

    # --- the walk ----------------------------------------------------------------------------

    def convert(self, schema: Any, hint: str, depth: int) -> TypeExpr:
        self._nodes += 1
        if self._nodes > _MAX_NODES:
            return Unknown("schema too large to convert")
        if depth > _MAX_DEPTH:
            return Unknown("schema nested too deeply")
        if schema is True:
            return Unknown()
        if schema is False:
            return Unknown("the schema is false: no value is valid")
        if not isinstance(schema, dict):
            return Unknown(f"not a JSON Schema ({type(schema).__name__})")
        if "$ref" in schema:
            return self._ref(schema, hint, depth)
        if "const" in schema:
            value = schema["const"]
            return Lit((value,)) if _is_scalar(value) else Unknown("const of an array or object")
        if "enum" in schema:
            return self._enum(schema.get("enum"))
        for key in ("anyOf", "oneOf"):
            if key in schema:
                converted = self._any_of(schema, key, hint, depth)
                if converted is not None:
                    return self._nullable(schema, converted)
        if "allOf" in schema:
            return self._nullable(schema, self._all_of(schema, hint, depth))
        return self._nullable(schema, self._typed(schema, hint, depth))

    def _nullable(self, schema: dict[str, Any], expr: TypeExpr) -> TypeExpr:
        if schema.get("nullable") is True:
            return union([expr, Prim("null")])
        return expr

    def _typed(self, schema: dict[str, Any], hint: str, depth: int) -> TypeExpr:
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if isinstance(k, str)]
            if not kinds or len(kinds) != len(kind):
                return Unknown("invalid type list")
            return union([self._one_type(schema, k, hint, depth) for k in dict.fromkeys(kinds)])
        if kind is None:
            if _OBJECT_KEYS & schema.keys():
                return self._object(schema, hint, depth)
            if "items" in schema or "prefixItems" in schema:
                return self._array(schema, hint, depth)
            return Unknown()
        if not isinstance(kind, str):
            return Unknown("invalid type")
        return self._one_type(schema, kind, hint, depth)

    def _one_type(self, schema: dict[str, Any], kind: str, hint: str, depth: int) -> TypeExpr:
        if kind in _PRIMS:
            return Prim(kind)
        if kind == "array":
            return self._array(schema, hint, depth)
        if kind == "object":
            return self._object(schema, hint, depth)
        return Unknown(f"unknown type {kind[:40]!r}")

    def _enum(self, values: Any) -> TypeExpr:
        if not isinstance(values, list) or not values:
            return Unknown("empty or invalid enum")
        if len(values) > _MAX_LITERALS:
            return Unknown(f"enum of {len(values)} values")
        scalars: list[JsonScalar] = []
        for value in values:
            if not _is_scalar(value):
                return Unknown("enum with arrays, objects or non-finite numbers")
            if not any(_same_literal(value, seen) for seen in scalars):
                scalars.append(value)
        return Lit(tuple(scalars))

    def _array(self, schema: dict[str, Any], hint: str, depth: int) -> TypeExpr:
        if "prefixItems" in schema or isinstance(schema.get("items"), list):
            return Arr(Unknown("tuple-typed array"))
        items = schema.get("items", True)
        return Arr(self.convert(items, hint + "Item", depth + 1))

    def _object(self, schema: dict[str, Any], hint: str, depth: int, name: str | None = None) -> TypeExpr:
        properties = schema.get("properties")
        extra = schema.get("additionalProperties", True)
        if not isinstance(properties, dict) or not properties:
            if isinstance(extra, dict):
                return Map(self.convert(extra, hint + "Value", depth + 1))
            if name is None:
                return Map(Unknown())
        definition = ObjectDef(name or self.names.allocate(pascal_case(hint)), doc=_doc(schema))
        self.objects.append(definition)
        required_raw = schema.get("required", [])
        required = {r for r in required_raw if isinstance(r, str)} if isinstance(required_raw, list) else set()
        if isinstance(properties, dict):
            for key, sub in properties.items():
                if not isinstance(key, str):
                    continue
                expr = self.convert(sub, hint + pascal_case(key, "Field"), depth + 1)
                doc = _doc(sub) if isinstance(sub, dict) else None
                if doc is None and isinstance(sub, dict) and isinstance(sub.get("$ref"), str):
                    target = self._resolve(sub["$ref"])
                    doc = _doc(target) if isinstance(target, dict) else None
                definition.fields.append(Field(key, expr, key in required, doc))
        if extra is not True and extra is not False and extra is not None:
            definition.notes.append("other keys are allowed too (their type is not expressed here)")
        elif extra is True and "additionalProperties" in schema:
            definition.notes.append("other keys are allowed too")
        if "patternProperties" in schema:
            definition.notes.append("patternProperties are not expressed here")
        missing = sorted(required - {f.key for f in definition.fields})
        if missing:
            definition.notes.append("required but not described: " + ", ".join(repr(m)[:60] for m in missing[:10]))
        return Ref(definition.name)

    def _any_of(self, schema: dict[str, Any], key: str, hint: str, depth: int) -> TypeExpr | None:
        options = schema.get(key)
        if not isinstance(options, list) or not options:
            return Unknown(f"empty or invalid {key}")
        own_type = bool((_TYPE_KEYS - {key}) & schema.keys())
        if own_type and all(isinstance(o, dict) and not (_TYPE_KEYS & o.keys()) for o in options):
            return None  # only constraints (e.g. alternative required sets): the base type stands
        if len(options) > _MAX_UNION:
            return Unknown(f"{key} of {len(options)} schemas")
        return union([self.convert(o, f"{hint}Option{i + 1}", depth + 1) for i, o in enumerate(options)])

    def _all_of(self, schema: dict[str, Any], hint: str, depth: int) -> TypeExpr:
        parts = schema.get("allOf")
        if not isinstance(parts, list) or not parts:
            return Unknown("empty or invalid allOf")
        base = {k: v for k, v in schema.items() if k != "allOf"}
        resolved = [self._resolve(p["$ref"]) if isinstance(p, dict) and isinstance(p.get("$ref"), str) else p for p in parts]
        if len(parts) == 1 and not (_TYPE_KEYS & base.keys()):
            return self.convert(parts[0], hint, depth + 1)
        merged: dict[str, Any] = dict(base)
        properties: dict[str, Any] = dict(base.get("properties") or {}) if isinstance(base.get("properties"), dict) else {}
        required: list[Any] = list(base.get("required") or []) if isinstance(base.get("required"), list) else []
        for part in resolved:
            if not isinstance(part, dict):
                return Unknown("allOf with a part that is not a schema object")
            if part.get("type", "object") != "object" or (_TYPE_KEYS - _OBJECT_KEYS - {"type"}) & part.keys():
                return Unknown("allOf of parts that are not all plain objects")
            sub_props = part.get("properties")
            if isinstance(sub_props, dict):
                properties.update(sub_props)
            sub_required = part.get("required")
            if isinstance(sub_required, list):
                required.extend(sub_required)
        merged["type"] = "object"
        merged["properties"] = properties
        merged["required"] = required
        return self._object(merged, hint, depth)

    # --- $ref --------------------------------------------------------------------------------

    def _resolve(self, ref: str) -> Any:
        """The schema a local reference points to, or None."""
        if not ref.startswith("#"):
            return None
        pointer = urllib.parse.unquote(ref[1:])
        node: Any = self.root
        if pointer in ("", "/"):
            return node
        if not pointer.startswith("/"):
            return None  # an anchor ("#foo"): not supported
        for raw in pointer[1:].split("/"):
            token = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                return None
        return node

    def _ref(self, schema: dict[str, Any], hint: str, depth: int) -> TypeExpr:
        ref = schema["$ref"]
        if not isinstance(ref, str):
            return Unknown("invalid $ref")
        if not ref.startswith("#"):
            return Unknown(f"remote $ref {ref[:80]!r} is not resolved")
        key = urllib.parse.unquote(ref)
        key = "#" if key == "#/" else key
        if key in self._ref_types:
            return self._ref_types[key]
        if key in self._in_progress:
            name = self._ref_names.get(key)
            return Ref(name) if name else Unknown(f"recursive $ref {ref[:80]!r}")
        target = self._resolve(ref)
        if target is None:
            return Unknown(f"unresolved $ref {ref[:80]!r}")
        last = key.rstrip("/").rsplit("/", 1)[-1] if key not in ("#", "#/") else "Root"
        ref_hint = self.prefix + pascal_case(last.replace("~1", "/").replace("~0", "~"), "Def")
        self._in_progress.add(key)
        try:
            if _is_object_schema(target):
                name = self.names.allocate(pascal_case(ref_hint))
                self._ref_names[key] = name
                expr = self._object(target, ref_hint, depth + 1, name=name)
                expr = self._nullable(target, expr)
            else:
                expr = self.convert(target, ref_hint, depth + 1)
        finally:
            self._in_progress.discard(key)
        self._ref_types[key] = expr
        return expr


def _is_object_schema(schema: Any) -> bool:
    """An object with listed properties (and nothing that makes it another kind of type)."""
    if not isinstance(schema, dict):
        return False
    if {"$ref", "enum", "const", "anyOf", "oneOf", "allOf"} & schema.keys():
        return False
    kind = schema.get("type", "object")
    return kind == "object" and isinstance(schema.get("properties"), dict) and bool(schema["properties"])


def _same_literal(a: JsonScalar, b: JsonScalar) -> bool:
    return type(a) is type(b) and a == b


def union(options: list[TypeExpr]) -> TypeExpr:
    """A flattened, de-duplicated union; one option is itself; ``Unknown`` absorbs the rest."""
    flat: list[TypeExpr] = []
    literals: list[JsonScalar] = []
    for option in options:
        members = option.options if isinstance(option, Union_) else (option,)
        for member in members:
            if isinstance(member, Unknown):
                return member if member.reason else Unknown()
            if isinstance(member, Lit):
                for value in member.values:
                    if not any(_same_literal(value, seen) for seen in literals):
                        literals.append(value)
            elif member not in flat:
                flat.append(member)
    if literals:
        flat.insert(0, Lit(tuple(literals)))
    if len(flat) == 1:
        return flat[0]
    return Union_(tuple(flat))
