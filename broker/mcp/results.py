"""What agents see: registered tools as MCP ``Tool`` objects, call outcomes as ``CallToolResult``.

Theory of operation
-------------------
Pure functions, no I/O. :func:`tool_entry` turns a :class:`~broker.core.registry.RegisteredTool`
into the MCP ``Tool`` an agent lists (agent-facing name; title, description, schemas and
annotations passed through). :func:`list_page` cuts the deterministic, name-sorted list into
pages; a cursor is the base64 of the last name on the previous page, so paging stays
correct when apps come and go between pages (nothing is skipped or repeated that stayed).

:func:`call_result` maps a :class:`~broker.core.outcome.CallOutcome`: ``ok`` becomes the app's
content blocks (images pass through) or its data as JSON text, plus ``structuredContent``;
every failure except ``unknown_tool`` becomes a result with ``isError: true`` whose text is
the router's message, written for a model to act on. ``unknown_tool`` is a protocol error
(-32602), raised as :class:`~broker.mcp.jsonrpc.RpcError`. A large result read with its content
raw (:class:`~broker.core.passthrough.PassthroughResult`) is checked block by block on its raw
values (a string value is a raw value starting with a quote) and its content is put in the
answer as those same bytes (``msgspec.Raw``), never decoded.
"""

from __future__ import annotations

import base64
import binascii
import bisect
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import msgspec

from ..core.names import APP_LABEL_KEY, SEPARATOR, TOOL_NAME_KEY
from ..core.outcome import OutcomeKind
from ..core.passthrough import PassthroughResult, plain
from .jsonrpc import INVALID_PARAMS, RpcError

if TYPE_CHECKING:
    from ..core.outcome import CallOutcome
    from ..core.registry import RegisteredTool

__all__ = [
    "DEFAULT_PAGE_SIZE", "ERROR_KIND_KEY", "RETRY_AFTER_KEY", "tool_entry", "list_page", "call_result", "error_result",
]

DEFAULT_PAGE_SIZE: Final = 1000
ERROR_KIND_KEY: Final = "toolbridge/errorKind"
RETRY_AFTER_KEY: Final = "toolbridge/retryAfterMs"

_CURSOR_PREFIX: Final = "tb1:"
_encoder: Final = msgspec.json.Encoder()

#: Required string fields of each content block type we pass through.
_BLOCK_FIELDS: Final = {
    "text": ("text",),
    "image": ("data", "mimeType"),
    "audio": ("data", "mimeType"),
    "resource_link": ("uri", "name"),
    "resource": (),
}


def tool_entry(tool: RegisteredTool) -> dict[str, Any]:
    spec = tool.spec
    entry: dict[str, Any] = {"name": tool.agent_name}
    if spec.title:
        entry["title"] = spec.title
    entry["description"] = spec.description or f"{spec.name} (from the app {tool.instance.label})"
    entry["inputSchema"] = spec.input_schema
    if spec.output_schema and spec.output_schema.get("type") == "object":
        # MCP requires an object schema here; anything else would make clients reject the list.
        entry["outputSchema"] = spec.output_schema
    if spec.annotations:
        entry["annotations"] = spec.annotations
    label = tool.instance.label
    if tool.agent_name != f"{label}{SEPARATOR}{spec.name}":
        # The name was sanitized or shortened: say whose tool it is, for agent code and stubs.
        entry["_meta"] = {APP_LABEL_KEY: label, TOOL_NAME_KEY: spec.name}
    return entry


def encode_cursor(last_name: str) -> str:
    return base64.urlsafe_b64encode((_CURSOR_PREFIX + last_name).encode()).decode()


def decode_cursor(cursor: Any) -> str:
    """The last name of the previous page. Raises RpcError(-32602) for a cursor we did not make."""
    if not isinstance(cursor, str):
        raise RpcError(INVALID_PARAMS, "Invalid params: cursor must be a string from nextCursor")
    try:
        text = base64.urlsafe_b64decode(cursor.encode("ascii")).decode()
    except (binascii.Error, UnicodeError, ValueError):
        text = ""
    if not text.startswith(_CURSOR_PREFIX):
        raise RpcError(INVALID_PARAMS, "Invalid params: unknown cursor; start again without one")
    return text[len(_CURSOR_PREFIX):]


def list_page(
    names: Sequence[str], entries: Sequence[dict[str, Any]], cursor: Any, page_size: int
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of ``entries`` (sorted by ``names``) after ``cursor``, and the next cursor."""
    start = 0 if cursor is None else bisect.bisect_right(names, decode_cursor(cursor))
    end = min(start + page_size, len(entries))
    page = list(entries[start:end])
    next_cursor = encode_cursor(names[end - 1]) if end < len(entries) and end > start else None
    return page, next_cursor


def _check_block(block: Any) -> str | None:
    """Why a content block from an app is unusable, or None when it is fine."""
    if not isinstance(block, dict):
        return "not an object"
    kind = block.get("type")
    if kind not in _BLOCK_FIELDS:
        return f"unknown type {kind!r}"
    for name in _BLOCK_FIELDS[kind]:
        if not isinstance(block.get(name), str):
            return f"{kind} block needs a string {name!r}"
    if kind == "resource" and not isinstance(block.get("resource"), dict):
        return "resource block needs a 'resource' object"
    return None


_QUOTE: Final = ord('"')
_BRACE: Final = ord("{")


def _first_byte(raw: msgspec.Raw | None) -> int:
    return memoryview(raw)[0] if raw is not None and len(raw) else -1


def _check_raw_block(block: dict[str, msgspec.Raw]) -> str | None:
    """:func:`_check_block` for a block whose values are still raw JSON (a passthrough)."""
    raw_type = block.get("type")
    kind: Any = None
    if raw_type is not None and len(raw_type) <= 64:
        try:
            kind = msgspec.json.decode(raw_type)
        except msgspec.DecodeError:  # pragma: no cover - the line was valid JSON
            kind = None
    if kind not in _BLOCK_FIELDS:
        return f"unknown type {kind!r}"
    for name in _BLOCK_FIELDS[kind]:
        if _first_byte(block.get(name)) != _QUOTE:
            return f"{kind} block needs a string {name!r}"
    if kind == "resource" and _first_byte(block.get("resource")) != _BRACE:
        return "resource block needs a 'resource' object"
    return None


def _as_text(data: Any) -> str:
    if isinstance(data, str):
        return data
    return _encoder.encode(data).decode()


def _error(kind: str, message: str, *, retry_after_ms: int | None = None,
           extra: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {ERROR_KIND_KEY: kind}
    if retry_after_ms is not None:
        meta[RETRY_AFTER_KEY] = retry_after_ms
    return {
        "content": [{"type": "text", "text": message}, *(extra or [])],
        "isError": True,
        "_meta": meta,
    }


def error_result(kind: str, message: str) -> dict[str, Any]:
    """A ``CallToolResult`` with ``isError: true``, ``message`` as its text and ``kind`` in ``_meta``."""
    return _error(kind, message)


def call_result(outcome: CallOutcome, tool_name: str) -> dict[str, Any]:
    """The ``CallToolResult`` for ``outcome`` (raises RpcError -32602 for an unknown tool)."""
    if outcome.kind is OutcomeKind.UNKNOWN_TOOL:
        raise RpcError(INVALID_PARAMS, outcome.message, {"name": tool_name})
    result = outcome.result
    if isinstance(result, PassthroughResult):
        if outcome.kind is OutcomeKind.OK and result.raw_blocks:
            return _passthrough(result, tool_name)
        result = plain(result)  # a failure's blocks, or no content: the usual way (small)
    if outcome.kind is not OutcomeKind.OK or result is None:
        extra = None
        if result is not None and result.content and all(_check_block(b) is None for b in result.content):
            extra = list(result.content)
        return _error(outcome.kind.value, outcome.message or outcome.kind.value, retry_after_ms=outcome.retry_after_ms,
                      extra=extra)
    if result.content:
        for index, block in enumerate(result.content):
            problem = _check_block(block)
            if problem is not None:
                return _error(
                    OutcomeKind.APP_ERROR.value,
                    f"{tool_name} returned an invalid content block #{index} ({problem}); "
                    "the result could not be shown. This is a bug in the app.",
                )
        content = list(result.content)
    else:
        content = [{"type": "text", "text": _as_text(result.data)}]
    mapped: dict[str, Any] = {"content": content, "isError": False}
    if result.structured_content is not None:
        mapped["structuredContent"] = result.structured_content
    elif isinstance(result.data, dict):
        mapped["structuredContent"] = result.data
    return mapped


def _passthrough(result: PassthroughResult, tool_name: str) -> dict[str, Any]:
    """:func:`call_result` of a successful passthrough: its content is the app's bytes."""
    for index, block in enumerate(result.raw_blocks):
        problem = _check_raw_block(block)
        if problem is not None:
            return _error(
                OutcomeKind.APP_ERROR.value,
                f"{tool_name} returned an invalid content block #{index} ({problem}); "
                "the result could not be shown. This is a bug in the app.",
            )
    mapped: dict[str, Any] = {"content": result.raw_content, "isError": False}
    if result.structured_content is not None:
        mapped["structuredContent"] = result.structured_content
    elif isinstance(result.data, dict):
        mapped["structuredContent"] = result.data
    return mapped
