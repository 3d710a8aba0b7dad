"""Agent-facing names, the path-traversal guard and schema compilation, each alone."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker import names
from broker.errors import RegistrationError
from broker.guards import _find_path, _has_traversal, find_path_traversal
from broker.validation import check_app_name, check_tool_name, compile_schema


def test_plain_names() -> None:
    assert names.make_agent_name("WatchTower", "ClickElement", set()) == "WatchTower__ClickElement"


def test_disallowed_characters_replaced_and_collisions_get_a_stable_hash() -> None:
    first = names.make_agent_name("App", "file.open", set())
    assert first == "App__file_open"
    second = names.make_agent_name("App", "file/open", {first})
    assert second != first and names.is_valid_agent_name(second)
    assert second == names.make_agent_name("App", "file/open", {first})  # stable


def test_long_names_are_cut_with_a_hash_and_stay_unique() -> None:
    tool = "Very" * 40
    name = names.make_agent_name("SomeLongApplicationName", tool, set())
    assert len(name) == 64 and names.is_valid_agent_name(name)
    other = names.make_agent_name("SomeLongApplicationName", tool + "2", {name})
    assert other != name and len(other) <= 64


def test_labels_for_instances() -> None:
    assert names.make_label("Watch Tower", set()) == "Watch_Tower"
    assert names.make_label("Watch Tower", {"Watch_Tower"}) == "Watch_Tower_2"
    assert names.make_label("Watch Tower", {"Watch_Tower", "Watch_Tower_2"}) == "Watch_Tower_3"
    assert len(names.make_label("A" * 64, set())) <= names.MAX_LABEL


@pytest.mark.parametrize(
    "value",
    ["../secret", "a/../b", "a\\..\\b", "..", "x/..", "%2e%2e/x", "%2E%2E%2Fx", "%252e%252e/x",
     "..%2fetc", "\uff0e\uff0e/x", "C:\\data\\..\\..\\win.ini"],
)
def test_traversal_variants_are_caught(value: str) -> None:
    assert find_path_traversal({"path": value}) == "$.path"


@pytest.mark.parametrize("value", ["wait...", "1..10", "a..b/c", "file..txt", ".hidden/x", "./x", "%20"])
def test_ordinary_strings_pass(value: str) -> None:
    assert find_path_traversal({"path": value}) is None


def test_traversal_found_deep_in_objects_lists_and_keys() -> None:
    assert find_path_traversal({"a": [{"b": "ok"}, {"c": ["x", "../y"]}]}) == "$.a[1].c[1]"
    assert find_path_traversal({"map": {"../k": 1}}) == "$.map.../k"
    assert find_path_traversal({"n": 1, "b": True, "z": None}) is None


def test_schema_validation_names_each_failing_field() -> None:
    validate = compile_schema(
        "T",
        {"type": "object", "properties": {"x": {"type": "integer"}, "opts": {"type": "object",
         "properties": {"mode": {"enum": ["a", "b"]}}}}, "required": ["x"]},
        10_000,
    )
    assert validate({"x": 1}) == []
    errors = validate({"x": "1", "opts": {"mode": "c"}})
    assert any(e.startswith("$.x:") for e in errors)
    assert any(e.startswith("$.opts.mode:") for e in errors)
    assert validate({}) == ["arguments: 'x' is a required property"]


def test_schema_dialect_is_honoured() -> None:
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
              "properties": {"v": {"type": "array", "items": [{"type": "string"}]}}}
    assert compile_schema("T", draft7, 10_000)({"v": [1]})  # draft-07 tuple items apply


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"type": "array"}, '"type": "object"'),
        ({"type": "object", "properties": {"x": {"type": "integer", "minimum": "zero"}}}, "properties/x/minimum"),
        ({"type": "object", "properties": {"x": {"type": "string"}}, "description": "x" * 5000}, "over the limit"),
    ],
)
def test_bad_schemas_are_refused_with_a_clear_message(schema: dict, words: str) -> None:
    with pytest.raises(RegistrationError) as info:
        compile_schema("Paint", schema, 4096)
    assert "Paint" in info.value.message and words in info.value.message


@pytest.mark.parametrize("name", ["", "a__b", "toolbridge", "TOOLBRIDGE", " lead", "x" * 65, "semi;colon"])
def test_bad_app_names(name: str) -> None:
    with pytest.raises(RegistrationError):
        check_app_name(name)


@pytest.mark.parametrize("name", ["", "tab\there", " pad", "x" * 129, "emoji\u2603"])
def test_bad_tool_names(name: str) -> None:
    with pytest.raises(RegistrationError):
        check_tool_name(name)


def test_good_names() -> None:
    check_app_name("Watch Tower 2.0")
    check_tool_name("file.open")
    check_tool_name("menu/File: Open")


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.sampled_from(["ok", "..", "../a", "a/..", "wait...", "%2e%2e/x", "\uff0e\uff0e\uff0f", "a\x00"]),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(["k", "..", "a/../b", "path"]), inner, max_size=4),
    max_leaves=20,
)


@given(_json_values)
def test_the_quick_check_agrees_with_the_path_finding_walk(value: Any) -> None:
    assert _has_traversal(value) == (_find_path(value) is not None)


def test_the_quick_check_stops_where_the_walk_does() -> None:
    found = []
    for depth in (62, 63, 64, 65, 70):
        value: Any = "../x"
        for _ in range(depth):
            value = [value] if depth % 2 else {"k": value}
        found.append(_has_traversal(value))
        assert found[-1] == (_find_path(value) is not None)
    assert True in found and False in found  # the depth limit lies inside the range tried


def test_colliding_sanitized_names_do_not_depend_on_registration_order() -> None:
    """`a.b` and `a_b` both sanitize to `a_b`: the one that needs no sanitizing owns it, in any order."""
    forward = names.assign_agent_names("Flip", ["a.b", "a_b"], set(), {})
    backward = names.assign_agent_names("Flip", ["a_b", "a.b"], set(), {})
    assert forward == backward
    assert forward["a_b"] == "Flip__a_b"
    assert forward["a.b"] != "Flip__a_b" and forward["a.b"].startswith("Flip__a_b_")
    # Two sanitized names and no exact one: neither takes the plain name.
    both = names.assign_agent_names("Flip", ["a.b", "a:b"], set(), {})
    assert "Flip__a_b" not in both.values() and len(set(both.values())) == 2
    assert both == names.assign_agent_names("Flip", ["a:b", "a.b"], set(), {})
    # A lone sanitized name keeps its readable plain form.
    assert names.assign_agent_names("App", ["file.open"], set(), {}) == {"file.open": "App__file_open"}


def test_a_name_an_instance_handed_out_never_moves_to_another_tool() -> None:
    first = names.assign_agent_names("Flip", ["a.b"], set(), {})
    assert first == {"a.b": "Flip__a_b"}
    # Later the app adds `a_b`: `Flip__a_b` still means `a.b` ...
    added = names.assign_agent_names("Flip", ["a_b"], set(first.values()), first)
    assert added["a_b"] != "Flip__a_b"
    # ... and after a reconnect that lists both, in either order, nothing moves.
    given = {**first, **added}
    for order in (["a.b", "a_b"], ["a_b", "a.b"]):
        assert names.assign_agent_names("Flip", order, set(), given) == given
