"""Agent-facing names, the path-traversal guard and schema compilation, each alone."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.core import names
from broker.errors import RegistrationError
from broker.core.guards import _find_path, _fold, _has_traversal, find_path_traversal
from broker.core.validation import check_app_name, check_tool_name, compile_schema


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


def _encode_layers(text: str, layers: int) -> str:
    """``text`` percent-encoded ``layers`` times (dots and slashes escaped the first time)."""
    encoded = "".join(f"%{ord(c):02x}" if c in "./\\" else c for c in text)
    for _ in range(layers - 1):
        encoded = encoded.replace("%", "%25")
    return encoded


def _overlong(char: str, size: int) -> str:
    """The ``size``-byte overlong UTF-8 form of an ASCII character, percent-encoded."""
    point = ord(char)
    tail = [0x80 | ((point >> (6 * i)) & 0x3F) for i in reversed(range(size - 1))]
    lead = (0xFF << (8 - size)) & 0xFF | (point >> (6 * (size - 1)))
    return "".join(f"%{b:02x}" for b in [lead, *tail])


@pytest.mark.parametrize(
    "value",
    ["../secret", "a/../b", "a\\..\\b", "..", "x/..", "%2e%2e/x", "%2E%2E%2Fx", "%252e%252e/x",
     "..%2fetc", "\uff0e\uff0e/x", "C:\\data\\..\\..\\win.ini",
     # Regressions (issue 14): the decoder stopped after 8 rounds, knew no %u escapes and only
     # the 2- and 3-byte overlong forms of '.' and '/'.
     _encode_layers("../x", 9), _encode_layers("../x", 20), _encode_layers("..\\x", 9),
     "%u002e%u002e/", "%u002E%u002E%u002Fx", "%U002e%U002e%u005cx", "%uff0e%uff0e/x",
     "%25u002e%25u002e/x", "%f0%80%80%ae%f0%80%80%ae/x", "..%f0%80%80%af", "%c0%ae%c0%ae%c1%9cx",
     "%f8%80%80%80%ae%f8%80%80%80%ae/x", "%fc%80%80%80%80%ae%fc%80%80%80%80%ae/x",
     # Escapes that only exist once another is decoded or folded:
     "%%32e%%32e/x", "%2%65%2%65/x", "%EF%BC%852e%EF%BC%852e/x", "\uff05\uff12\uff45\uff05\uff12\uff45/x",
     "%uFF05u002e%uFF05u002e/x", "%c0%a52e%c0%a52e/x", "..%00", "a%00..%00b", "%2e%2e%EF%BC%8F"],
)
def test_traversal_variants_are_caught(value: str) -> None:
    assert find_path_traversal({"path": value}) == "$.path"


@pytest.mark.parametrize("value", ["wait...", "1..10", "a..b/c", "file..txt", ".hidden/x", "./x", "%20",
                                   "50% off", "100%", "%zz..", "%u00", "a%2e%2eb", "%252e%252ex/y", "x%2e%2e",
                                   "\u22ef", "%e2%80%a6/x", "%%%%", "%u%u%u"])
def test_ordinary_strings_pass(value: str) -> None:
    assert find_path_traversal({"path": value}) is None


@pytest.mark.parametrize("size", [2, 3, 4, 5, 6])
@pytest.mark.parametrize("separator", ["/", "\\"])
def test_every_overlong_form_of_dot_and_separators_is_caught(size: int, separator: str) -> None:
    dot, sep = _overlong(".", size), _overlong(separator, size)
    for value in (dot + dot + "/x", ".." + sep + "x", dot + dot + sep + "etc", "x" + sep + dot + dot):
        assert find_path_traversal({"p": value}) == "$.p", value
    assert find_path_traversal({"p": dot + "x" + dot}) is None


@given(st.integers(1, 30), st.sampled_from(["../x", "..\\x", "a/..", "x/../y", ".."]))
def test_any_number_of_encoding_layers_is_caught(layers: int, text: str) -> None:
    assert find_path_traversal({"p": _encode_layers(text, layers)}) == "$.p"


_word = st.text(st.characters(whitelist_categories=("L", "N")), min_size=1, max_size=8)


@given(_word, _word, st.integers(0, 5))
def test_a_plain_dot_dot_inside_a_word_passes(before: str, after: str, layers: int) -> None:
    text = f"{before}..{after}"
    assert find_path_traversal({"p": text if not layers else _encode_layers(text, layers)}) is None


def test_decoding_is_linear_however_deep_the_nesting() -> None:
    """Chains that a round-by-round decoder needs one round per layer for (quadratic work):
    the stack pass decodes them in one go. Sizes that would take minutes quadratically."""
    assert find_path_traversal({"p": "%" + "25" * 200_000 + "2e%2e/x"}) == "$.p"
    assert find_path_traversal({"p": "%uFF05" + "uFF05" * 50_000 + "u002e./x"}) == "$.p"
    assert find_path_traversal({"p": "%" * 100_000 + "2e" * 100_000}) is None


def test_unicode_facts_the_decoder_relies_on() -> None:
    """Checked against this Python's Unicode database (it changes between versions): only
    '%', '％' and '﹪' fold to anything holding a '%', and folding is idempotent per character."""
    percent_makers = []
    for point in range(0x110000):
        if 0xD800 <= point < 0xE000:
            continue
        folded = _fold(chr(point))
        if "%" in folded:
            percent_makers.append(point)
            assert folded == "%"
        if folded != chr(point):
            assert all(_fold(c) == c for c in folded), hex(point)
    assert percent_makers == [0x25, 0xFE6A, 0xFF05]


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


def _nested(depth: int, leaf: Any, as_key: bool = False) -> Any:
    value: Any = {leaf: 1} if as_key else leaf
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


@pytest.mark.parametrize("depth", [63, 64, 65, 66, 200, 999, 10_000])
@pytest.mark.parametrize("as_key", [False, True])
def test_traversal_is_found_at_any_depth(depth: int, as_key: bool) -> None:
    """Regression: the walk stopped at 64 levels, so a deeper '..' reached the app. The walk is
    iterative now: 10,000 levels (far more than any JSON decoder here accepts) is no RecursionError."""
    value = _nested(depth, "../x", as_key)
    assert _has_traversal(value)
    steps = "".join("[0]" if level % 2 else ".k" for level in reversed(range(depth)))
    assert find_path_traversal(value) == "$" + steps + (".../x" if as_key else "")
    assert find_path_traversal(_nested(depth, "fine", as_key)) is None


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
