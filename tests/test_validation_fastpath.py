"""The fast path for simple schemas gives exactly jsonschema's answers (bench-driven optimisation)."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.core.validation import compile_schema, fast_validator

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-3, 3, allow_nan=False) | st.sampled_from([1.0, 2.0])
    | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner, max_size=2),
    max_leaves=4,
)
TYPES = ["string", "integer", "number", "boolean", "null", "object", "array"]
PROPERTY = st.one_of(
    st.builds(lambda t: {"type": t}, st.sampled_from(TYPES)),
    st.builds(lambda ts: {"type": ts}, st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True)),
    st.just({}),
    st.just({"type": "string", "description": "d", "format": "uri", "default": 3}),
)


@st.composite
def simple_schemas(draw: Any) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True, max_size=4))
    schema: dict[str, Any] = {"type": "object", "properties": {n: draw(PROPERTY) for n in names}}
    if names and draw(st.booleans()):
        schema["required"] = draw(st.lists(st.sampled_from(names), unique=True, max_size=len(names)))
    if draw(st.booleans()):
        schema["additionalProperties"] = draw(st.booleans())
    if draw(st.booleans()):
        schema["$schema"] = draw(st.sampled_from([
            "https://json-schema.org/draft/2020-12/schema", "http://json-schema.org/draft-07/schema#"]))
    return schema


@settings(max_examples=300, deadline=None)
@given(simple_schemas(), st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e"]), JSON_VALUES, max_size=5))
def test_fast_path_agrees_with_jsonschema(schema: dict[str, Any], arguments: dict[str, Any]) -> None:
    fast = fast_validator(schema)
    assert fast is not None
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)  # the fast path skips this: it must never be needed
    reference = cls(schema).is_valid(arguments)
    if fast(arguments):
        assert reference
    assert (compile_schema("t", schema, 100_000)(arguments) == []) == reference


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "string", "minLength": 2}}},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}, "$defs": {"x": {"type": "string"}}},
        {"type": "object", "properties": {"a": {"type": "strin"}}},
        {"type": "object", "title": 5},
        {"type": "object", "required": ["a", "a"]},
        {"type": "object", "properties": {"a": {"type": []}}},
        {"type": "object", "$schema": "http://json-schema.org/draft-04/schema#"},
        {"type": "object", "additionalProperties": {"type": "string"}},
    ],
)
def test_anything_else_takes_the_full_path(schema: dict[str, Any]) -> None:
    assert fast_validator(schema) is None
