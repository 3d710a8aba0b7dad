"""Result mapping (app_client.results) and the backoff schedule (app_client.backoff)."""

from __future__ import annotations

import base64
import datetime
import random
from dataclasses import dataclass

import msgspec
import pytest

from app_client import Backoff, Content, ToolError, ToolResult, image, text
from app_client.results import describe_exception, failure, to_tool_result


@dataclass
class Pos:
    x: int
    y: int


@pytest.mark.parametrize(
    ("value", "data"),
    [
        ({"a": 1}, {"a": 1}),
        ([1, 2], [1, 2]),
        ("s", "s"),
        (3, 3),
        (2.5, 2.5),
        (True, True),
        (None, None),
        (Pos(1, 2), {"x": 1, "y": 2}),
        (datetime.date(2024, 1, 2), "2024-01-02"),
        ([], []),
    ],
)
def test_plain_values_become_data(value: object, data: object) -> None:
    result = to_tool_result(value)
    assert result == ToolResult(success=True, data=data)


def test_tool_result_passes_through() -> None:
    result = ToolResult(success=False, error="nope")
    assert to_tool_result(result) is result


def test_content_helpers() -> None:
    assert text("hi") == {"type": "text", "text": "hi"}
    block = image(b"\x89PNG", mime_type="image/png")
    assert block == {"type": "image", "data": base64.b64encode(b"\x89PNG").decode(), "mimeType": "image/png"}
    with pytest.raises(ValueError):
        image(b"x", mime_type="text/plain")
    with pytest.raises(TypeError):
        text(3)  # type: ignore[arg-type]


def test_blocks_become_content() -> None:
    assert to_tool_result(text("a")).content == [{"type": "text", "text": "a"}]
    result = to_tool_result([text("a"), image(b"x")])
    assert result.content is not None and [b["type"] for b in result.content] == ["text", "image"]
    assert result.data is None
    # plain dicts in a list are data, not content
    assert to_tool_result([{"type": "text", "text": "a"}]).data == [{"type": "text", "text": "a"}]


def test_content_wrapper() -> None:
    result = to_tool_result(
        Content([text("a"), {"type": "resource_link", "uri": "file:///x"}], data={"n": 1}, structured_content={"k": 2})
    )
    assert result.content == [{"type": "text", "text": "a"}, {"type": "resource_link", "uri": "file:///x"}]
    assert result.data == {"n": 1}
    assert result.structured_content == {"k": 2}
    wire = msgspec.json.decode(msgspec.json.encode(result))
    assert wire["structuredContent"] == {"k": 2}
    with pytest.raises(ValueError):
        Content([{"no": "type"}])


def test_unencodable_value_raises_type_error() -> None:
    with pytest.raises(TypeError):
        to_tool_result(object())


def test_failures_and_safe_messages() -> None:
    assert failure("x") == ToolResult(success=False, error="x")
    assert describe_exception("Click", ToolError("element not found")) == "element not found"
    assert describe_exception("Click", ValueError("secret path /home/me")) == "Click failed: ValueError"
    group = ExceptionGroup("g", [ToolError("inner")])
    assert describe_exception("Click", group) == "inner"
    assert describe_exception("Click", ExceptionGroup("g", [ValueError(), KeyError()])) == (
        "Click failed: ExceptionGroup"
    )


def test_backoff_full_jitter_capped_and_reset() -> None:
    backoff = Backoff(initial=0.1, cap=5.0, rng=random.Random(1))
    ceilings = []
    for _ in range(10):
        ceilings.append(backoff.ceiling())
        assert 0 <= backoff.next_delay() <= ceilings[-1]
    assert ceilings[:4] == pytest.approx([0.1, 0.2, 0.4, 0.8])
    assert ceilings[-1] == 5.0
    backoff.reset()
    assert backoff.ceiling() == 0.1
    for _ in range(200):
        backoff.next_delay()
    assert backoff.ceiling() == 5.0
