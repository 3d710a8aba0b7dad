"""Turning what a tool handler returns (or raises) into the wire's :class:`ToolResult`.

Theory of operation
-------------------
A handler returns a plain value and :func:`to_tool_result` maps it:

* a :class:`~app_client.protocol.ToolResult` is sent as it is (full control);
* a :class:`Content` goes to ``result.content`` (plus its optional ``data`` and
  ``structured_content``);
* one content block made by :func:`text` / :func:`image`, or a non-empty list or tuple made
  only of such blocks, goes to ``result.content``;
* anything else is JSON data and goes to ``result.data``: ``dict``, ``list``, ``str``,
  numbers, ``bool``, ``None``, and whatever :func:`msgspec.to_builtins` converts (msgspec
  Structs, dataclasses, attrs classes, ``datetime``, ``bytes`` as base64, ...). A value it
  cannot convert raises :class:`TypeError`, which the caller reports as a failed call.

Failures: :func:`failure` builds ``success=false`` results. The invocation code sends a
:class:`~app_client.errors.ToolError`'s message as it is, and for any other exception only
``"<tool> failed: <ExceptionType>"`` (:func:`describe_exception`), so no stack trace or local
value ever reaches the agent.

Content blocks are MCP's: ``{"type": "text", "text": ...}`` and ``{"type": "image", "data":
<base64>, "mimeType": ...}``. :class:`ContentBlock` is a ``dict`` subclass, so blocks are
ordinary JSON objects; the subclass only marks them as content rather than data. To send a
block of another kind (``audio``, ``resource_link``, ...), put a plain dict in
:class:`Content`.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import msgspec

from .errors import ToolError
from .protocol import ToolResult

__all__ = [
    "Content",
    "ContentBlock",
    "describe_exception",
    "failure",
    "image",
    "text",
    "to_tool_result",
]


class ContentBlock(dict[str, Any]):
    """An MCP content block made by :func:`text` or :func:`image` (a plain ``dict`` otherwise)."""


def text(value: str) -> ContentBlock:
    """A text content block: ``{"type": "text", "text": value}``."""
    if not isinstance(value, str):
        raise TypeError(f"text() takes a str, not {type(value).__name__}")
    return ContentBlock(type="text", text=value)


def image(data: bytes, mime_type: str = "image/png") -> ContentBlock:
    """An image content block from raw image bytes (PNG by default), base64-encoded."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"image() takes bytes, not {type(data).__name__}")
    if not mime_type.startswith("image/"):
        raise ValueError(f"image() needs an image/* MIME type, not {mime_type!r}")
    return ContentBlock(type="image", data=base64.b64encode(data).decode("ascii"), mimeType=mime_type)


def _blocks(value: Iterable[Mapping[str, Any]]) -> tuple[dict[str, Any], ...]:
    blocks = tuple(dict(block) for block in value)
    for block in blocks:
        if not isinstance(block.get("type"), str):
            raise ValueError(f"a content block needs a string 'type', got {block!r:.80}")
    return blocks


@attrs.frozen
class Content:
    """Explicit MCP content for a result, with optional JSON ``data`` alongside.

    ``blocks`` may mix blocks from :func:`text` / :func:`image` with plain dicts of other MCP
    block types. ``structured_content`` is a JSON object for tools that declare an
    ``output_schema``.
    """

    blocks: tuple[dict[str, Any], ...] = attrs.field(converter=_blocks)
    data: Any = None
    structured_content: dict[str, Any] | None = None


def _is_block_list(value: object) -> bool:
    return (
        isinstance(value, (list, tuple))
        and len(value) > 0
        and all(isinstance(item, ContentBlock) for item in value)
    )


def to_tool_result(value: object) -> ToolResult:
    """Map a handler's return value to a successful :class:`ToolResult` (see module doc).

    Raises :class:`TypeError` if ``value`` cannot be represented as JSON.
    """
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, Content):
        return ToolResult(
            success=True,
            data=msgspec.to_builtins(value.data),
            content=list(value.blocks),
            structured_content=(
                msgspec.to_builtins(value.structured_content)
                if value.structured_content is not None
                else None
            ),
        )
    if isinstance(value, ContentBlock):
        return ToolResult(success=True, content=[dict(value)])
    if _is_block_list(value):
        assert isinstance(value, (list, tuple))
        return ToolResult(success=True, content=[dict(block) for block in value])
    try:
        data = msgspec.to_builtins(value)
    except (TypeError, msgspec.EncodeError) as exc:
        raise TypeError(f"cannot send a {type(value).__name__} as JSON: {exc}") from exc
    return ToolResult(success=True, data=data)


def failure(message: str, kind: str | None = None) -> ToolResult:
    """A failed result carrying ``message`` for the agent (and the failure's kind, if known)."""
    return ToolResult(success=False, error=message, error_kind=kind)


def _single_tool_error(exc: BaseException) -> ToolError | None:
    """The ToolError inside ``exc`` if it is one, or a group whose only leaf is one."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc if isinstance(exc, ToolError) else None


def describe_exception(tool: str, exc: BaseException) -> str:
    """The safe message sent to the agent when a handler raised ``exc``.

    A :class:`ToolError` (also one alone inside an exception group, as nurseries raise)
    gives its own message; anything else gives ``"<tool> failed: <TypeName>"``.
    """
    tool_error = _single_tool_error(exc)
    if tool_error is not None:
        return tool_error.message
    return f"{tool} failed: {type(exc).__name__}"
