"""Schema derivation and argument binding (app_client.tools); plain synchronous tests."""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypedDict

import msgspec
import pytest

import app_client.errors
from app_client import App, ToolbridgeError, ToolContext, ToolDefinitionError, define_tool, derive_input_schema
from app_client.tools import InvalidArguments


class Point(msgspec.Struct):
    x: int
    y: int = 0


class Size(TypedDict):
    width: int
    height: int


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Box:
    origin: Point
    label: str


def _walk_refs(node: Any) -> list[str]:
    refs: list[str] = []
    if isinstance(node, dict):
        if "$ref" in node:
            refs.append(node["$ref"])
        for value in node.values():
            refs.extend(_walk_refs(value))
    elif isinstance(node, list):
        for value in node:
            refs.extend(_walk_refs(value))
    return refs


def assert_self_contained(schema: dict[str, Any]) -> None:
    assert schema["type"] == "object"
    defs = schema.get("$defs", {})
    for ref in _walk_refs(schema):
        assert ref.startswith("#/$defs/"), ref
        assert ref.removeprefix("#/$defs/") in defs, f"dangling {ref}"


def test_scalars_required_and_optional() -> None:
    def f(a: int, b: str, c: float, d: bool, e: int | None = None, g: str = "hi") -> None:
        """Doc."""

    schema = derive_input_schema(f)
    assert_self_contained(schema)
    props = schema["properties"]
    assert props["a"] == {"type": "integer"}
    assert props["b"] == {"type": "string"}
    assert props["c"] == {"type": "number"}
    assert props["d"] == {"type": "boolean"}
    assert props["e"] == {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}
    assert props["g"] == {"type": "string", "default": "hi"}
    assert schema["required"] == ["a", "b", "c", "d"]
    assert schema["additionalProperties"] is False
    assert "title" not in schema and "$defs" not in schema


def test_no_parameters_gives_empty_object() -> None:
    def f() -> None: ...

    schema = derive_input_schema(f)
    assert schema == {"type": "object", "properties": {}, "required": [], "additionalProperties": False}


def test_lists_literals_enums_and_defaults() -> None:
    def f(
        ids: list[int],
        mode: Literal["fast", "slow"] = "fast",
        color: Color = Color.RED,
        tags: list[str] = ["a", "b"],  # noqa: B006 - copied per call by the library
    ) -> None: ...

    schema = derive_input_schema(f)
    assert_self_contained(schema)
    props = schema["properties"]
    assert props["ids"] == {"type": "array", "items": {"type": "integer"}}
    assert props["mode"] == {"enum": ["fast", "slow"], "default": "fast"}
    assert props["color"] == {"$ref": "#/$defs/Color", "default": "red"}
    assert schema["$defs"]["Color"]["enum"] == ["blue", "red"]
    assert props["tags"]["default"] == ["a", "b"]
    assert schema["required"] == ["ids"]


def test_nested_types_live_in_defs() -> None:
    def f(at: Point, size: Size, box: Box | None = None) -> None: ...

    schema = derive_input_schema(f)
    assert_self_contained(schema)
    assert set(schema["$defs"]) == {"Point", "Size", "Box"}
    assert schema["$defs"]["Point"]["required"] == ["x"]


def test_context_parameter_is_skipped_wherever_it_is() -> None:
    def first(ctx: ToolContext, x: int) -> None: ...

    def middle(x: int, context: ToolContext, y: int = 1) -> None: ...

    def annotated(x: int, ctx: Annotated[ToolContext, "meta"]) -> None: ...

    def optional(x: int, ctx: ToolContext | None = None) -> None: ...

    for fn in (first, middle, annotated, optional):
        schema = derive_input_schema(fn)
        assert "ctx" not in schema["properties"] and "context" not in schema["properties"]
        assert "x" in schema["properties"]


def test_annotated_meta_gives_descriptions_and_constraints() -> None:
    def f(x: Annotated[int, msgspec.Meta(ge=0, description="pixels from the left")]) -> None: ...

    assert derive_input_schema(f)["properties"]["x"] == {
        "type": "integer",
        "minimum": 0,
        "description": "pixels from the left",
    }


def test_unannotated_parameter_accepts_anything() -> None:
    def f(x, y=3):  # type: ignore[no-untyped-def]
        return x

    schema = derive_input_schema(f)
    assert schema["properties"] == {"x": {}, "y": {"default": 3}}


def test_define_tool_name_description_and_options() -> None:
    def click_element(x: int) -> dict[str, int]:
        """Click the element.

        More text.
        """
        return {"x": x}

    tool = define_tool(click_element)
    assert tool.name == "click_element"
    assert tool.spec.description == "Click the element.\n\nMore text."
    assert not tool.is_async

    tool = define_tool(
        click_element,
        name="ClickElement",
        title="Click",
        annotations={"readOnlyHint": False},
        timeout=2.5,
        path_guard=False,
    )
    wire = msgspec.to_builtins(tool.spec)
    assert wire["name"] == "ClickElement"
    assert wire["title"] == "Click"
    assert wire["timeoutMs"] == 2500
    assert wire["pathGuard"] is False
    assert wire["inputSchema"]["properties"] == {"x": {"type": "integer"}}


def test_async_functions_and_partials_are_detected() -> None:
    async def a(x: int) -> int:
        return x

    def b(x: int, y: int) -> int:
        return x + y

    assert define_tool(a).is_async
    tool = define_tool(functools.partial(b, y=2), name="b2")
    assert not tool.is_async
    assert set(tool.spec.input_schema["properties"]) == {"x", "y"}


@pytest.mark.parametrize("name", ["", " lead", "trail ", "a" * 129, "bang!", "ünïcode", "new\nline"])
def test_invalid_names_rejected(name: str) -> None:
    with pytest.raises(ToolDefinitionError):
        define_tool(lambda: None, name=name)


@pytest.mark.parametrize("name", ["Click", "file.open", "menu/File: Open", "a" * 128, "x-y_z"])
def test_protocol_names_accepted(name: str) -> None:
    assert define_tool(lambda: None, name=name).name == name


def test_unsupported_signatures_rejected() -> None:
    def star(*args: int) -> None: ...

    def kwargs(**kw: int) -> None: ...

    def two_contexts(a: ToolContext, b: ToolContext) -> None: ...

    def no_schema(x: object) -> None: ...

    async def gui(x: int) -> None: ...

    for fn in (star, kwargs, two_contexts, no_schema):
        with pytest.raises(ToolDefinitionError):
            define_tool(fn)
    with pytest.raises(ToolDefinitionError):
        define_tool(gui, on_gui_thread=True)
    with pytest.raises(ToolDefinitionError):
        define_tool(gui, timeout=0)


def test_bind_converts_and_validates() -> None:
    seen: dict[str, Any] = {}

    def f(at: Point, size: Size, ctx: ToolContext, n: float = 1.0, tags: list[str] = ["t"]) -> None:  # noqa: B006
        seen.update(at=at, size=size, ctx=ctx, n=n, tags=tags)

    tool = define_tool(f)
    ctx = ToolContext(correlation_id=7, tool="f")
    args, kwargs = tool.bind({"at": {"x": 1}, "size": {"width": 2, "height": 3}, "n": 2}, ctx)
    tool.fn(*args, **kwargs)
    assert seen["at"] == Point(1, 0)
    assert seen["size"] == {"width": 2, "height": 3}
    assert seen["ctx"] is ctx
    assert seen["n"] == 2.0
    assert seen["tags"] == ["t"]
    tags_before = seen["tags"]
    args, kwargs = tool.bind({"at": {"x": 1}, "size": {"width": 2, "height": 3}}, ctx)
    tool.fn(*args, **kwargs)
    assert seen["tags"] is not tags_before  # mutable defaults are fresh per call

    with pytest.raises(InvalidArguments, match=r"\$\.at\.x"):
        tool.bind({"at": {"x": "one"}, "size": {"width": 2, "height": 3}}, ctx)
    with pytest.raises(InvalidArguments, match="missing required field `size`"):
        tool.bind({"at": {"x": 1}}, ctx)
    with pytest.raises(InvalidArguments, match="unknown field `bogus`"):
        tool.bind({"at": {"x": 1}, "size": {"width": 2, "height": 3}, "bogus": 1}, ctx)
    # Under the package's root, and still a ValueError (code catching that keeps working).
    with pytest.raises(ToolbridgeError) as caught:
        tool.bind({"at": {"x": 1}}, ctx)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, InvalidArguments)
    assert InvalidArguments is app_client.errors.InvalidArguments


def test_bind_positional_only_parameters() -> None:
    def f(a: int, ctx: ToolContext, /, b: int) -> tuple[int, ToolContext, int]:
        return a, ctx, b

    tool = define_tool(f)
    ctx = ToolContext(correlation_id=1, tool="f")
    args, kwargs = tool.bind({"a": 1, "b": 2}, ctx)
    assert tool.fn(*args, **kwargs) == (1, ctx, 2)


def test_example_requests_are_sent_and_checked_when_the_tool_is_defined() -> None:
    def receive_shipment(po_number: str) -> str:
        """Record an inbound purchase order."""
        return po_number

    tool = define_tool(receive_shipment, example_requests=("my pallets came in", "we unloaded the lorry"))
    assert msgspec.to_builtins(tool.spec)["exampleRequests"] == ["my pallets came in", "we unloaded the lorry"]
    # none, or an empty list: the field is left out
    assert "exampleRequests" not in msgspec.to_builtins(define_tool(receive_shipment).spec)
    assert "exampleRequests" not in msgspec.to_builtins(define_tool(receive_shipment, example_requests=[]).spec)
    # one string is one request, not a list of its letters
    assert define_tool(receive_shipment, example_requests="log my pallets").spec.example_requests == ["log my pallets"]
    for bad, hint in [(["r"] * 17, "keep the 16 most typical"), ([" "], "empty request"), (["x" * 201], "at most 200"),
                      ([3], "list of strings")]:
        with pytest.raises(ToolDefinitionError, match=hint) as info:
            define_tool(receive_shipment, example_requests=bad)  # type: ignore[arg-type]
        assert "receive_shipment" in str(info.value) and "example_requests" in str(info.value)

    app = App("Depot")

    @app.tool(example_requests=["my pallets came in"])
    def receive(po_number: str) -> str:
        return po_number

    assert app.tools["receive"].spec.example_requests == ["my pallets came in"]
