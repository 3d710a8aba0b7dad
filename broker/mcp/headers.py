"""The 2026-07-28 HTTP request headers that mirror the body, and their check (-32020).

Theory of operation
-------------------
Modern Streamable HTTP clients copy parts of each request into headers so intermediaries
can route without reading the body: ``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``
(tools/call, prompts/get, resources/read) and, for tool arguments whose schema property
carries ``x-mcp-header: TOKEN``, ``Mcp-Param-TOKEN``. A server that reads the body must
refuse a request whose headers are missing or disagree with it (a confused deputy
otherwise), with HTTP 400 and JSON-RPC error -32020. Values that are not plain printable
ASCII travel as ``=?base64?...?=``; they are decoded before comparing.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator, Mapping
from typing import Any, Final, Protocol

from .jsonrpc import HEADER_MISMATCH, Request, RpcError

__all__ = ["HeaderSource", "check_modern_headers", "decode_header_value", "param_annotations"]

ROUTING_HEADERS: Final = ("mcp-protocol-version", "mcp-method", "mcp-name")
NAME_FIELDS: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_SENTINEL: Final = re.compile(r"^=\?base64\?(?P<payload>.*)\?=$")
_TOKEN: Final = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_HEADER_TYPES: Final = frozenset({"string", "integer", "boolean"})


class HeaderSource(Protocol):
    def get(self, name: str) -> str | None: ...

    def count(self, name: str) -> int: ...


def decode_header_value(value: str | None) -> str | None:
    """Undo the ``=?base64?...?=`` wrapping; None for a malformed one (so it never matches)."""
    if value is None:
        return None
    match = _SENTINEL.match(value)
    if match is None:
        return value
    payload = match.group("payload")
    try:
        decoded = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return None
    if base64.b64encode(decoded).decode("ascii") != payload:
        return None
    try:
        return decoded.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _mismatch(message: str) -> RpcError:
    return RpcError(HEADER_MISMATCH, f"Header mismatch: {message}")


def check_modern_headers(
    headers: HeaderSource, request: Request, protocol_version: str, input_schema: Any = None
) -> None:
    """Raise RpcError(-32020) naming the first header that is missing, doubled or wrong.

    ``input_schema`` is the called tool's schema, for its ``Mcp-Param-*`` headers.
    """
    for name in ROUTING_HEADERS:
        if headers.count(name) > 1:
            raise _mismatch(f"{name} appears more than once")
    version = headers.get("mcp-protocol-version")
    if version is None:
        raise _mismatch("the MCP-Protocol-Version header is missing")
    if version != protocol_version:
        raise _mismatch(f"MCP-Protocol-Version {version!r} does not match the body's {protocol_version!r}")
    method = headers.get("mcp-method")
    if method is None:
        raise _mismatch("the Mcp-Method header is missing")
    if method != request.method:
        raise _mismatch(f"Mcp-Method {method!r} does not match the body's {request.method!r}")
    key = NAME_FIELDS.get(request.method)
    body_value = request.params.get(key) if key else None
    if key and body_value is not None:
        raw = headers.get("mcp-name")
        if raw is None:
            raise _mismatch("the Mcp-Name header is missing")
        if decode_header_value(raw) != body_value:
            raise _mismatch(f"Mcp-Name {raw!r} does not match the body's {key} {body_value!r}")
    if request.method == "tools/call" and input_schema is not None:
        arguments = request.params.get("arguments")
        _check_params(headers, input_schema, arguments if isinstance(arguments, Mapping) else {})


#: ``param_annotations`` of recent schemas, by ``id``, with the schema itself (held, so its id
#: is not reused while cached; a tool's schema is never changed once registered).
_ANNOTATIONS: dict[int, tuple[Any, list[tuple[tuple[str, ...], str]] | None]] = {}
_ANNOTATIONS_MAX: Final = 1024


def param_annotations(schema: Any) -> list[tuple[tuple[str, ...], str]] | None:
    """``(property path, token)`` for each ``x-mcp-header``; None if any annotation is invalid.

    A tool with an invalid annotation is dropped by conforming clients, which then send no
    headers for it, so there is nothing to check. Cached per schema (every call of a tool
    would walk its schema again).
    """
    cached = _ANNOTATIONS.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    found = _annotations(schema)
    if len(_ANNOTATIONS) >= _ANNOTATIONS_MAX:
        _ANNOTATIONS.clear()
    _ANNOTATIONS[id(schema)] = (schema, found)
    return found


def _annotations(schema: Any) -> list[tuple[tuple[str, ...], str]] | None:
    found: list[tuple[tuple[str, ...], str]] = []
    seen: set[str] = set()
    for path, node in _positions(schema, ()):
        token = node.get("x-mcp-header")
        if token is None:
            continue
        if (
            path is None
            or not path
            or not isinstance(token, str)
            or not _TOKEN.match(token)
            or token.lower() in seen
            or node.get("type") not in _HEADER_TYPES
        ):
            return None
        seen.add(token.lower())
        found.append((path, token))
    return found


def _positions(node: Any, path: tuple[str, ...] | None) -> Iterator[tuple[tuple[str, ...] | None, dict[str, Any]]]:
    """Every schema object below ``node``; the path is None once off a pure ``properties`` chain."""
    stack: list[tuple[tuple[str, ...] | None, Any]] = [(path, node)]
    while stack:
        where, current = stack.pop()
        if isinstance(current, list):
            stack.extend((None, item) for item in current)
            continue
        if not isinstance(current, dict):
            continue
        yield where, current
        for key, value in current.items():
            if key == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    stack.append(((*where, name) if where is not None else None, sub))
            elif key not in ("enum", "const", "default", "examples") and isinstance(value, dict | list):
                stack.append((None, value))


def _render(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str):
        return value
    return None


def _check_params(headers: HeaderSource, schema: Any, arguments: Mapping[str, Any]) -> None:
    annotations = param_annotations(schema)
    if not annotations:
        return
    for path, token in annotations:
        name = f"mcp-param-{token.lower()}"
        raw = headers.get(name)
        if raw is not None and headers.count(name) > 1:
            raise _mismatch(f"Mcp-Param-{token} appears more than once")
        value: Any = arguments
        for part in path:
            value = value.get(part) if isinstance(value, Mapping) else None
        argument = ".".join(path)
        rendered = None if value is None else _render(value)
        if rendered is None:
            if raw is not None:
                raise _mismatch(f"Mcp-Param-{token} is present but the argument {argument!r} is not")
            continue
        if raw is None:
            raise _mismatch(f"Mcp-Param-{token} is missing for the argument {argument!r}")
        decoded = decode_header_value(raw)
        if decoded != rendered and not _same_number(decoded, value):
            raise _mismatch(f"Mcp-Param-{token} does not match the argument {argument!r}")


def _same_number(header: str | None, value: Any) -> bool:
    if header is None or isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return float(header) == float(value)
    except ValueError:
        return False
