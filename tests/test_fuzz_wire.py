"""Property tests of the NDJSON wire (sans-IO): any bytes in, messages or clean errors out.

Whatever arrives — random bytes, lines cut anywhere, real messages with bits flipped, fields
dropped or given the wrong type, nesting thousands deep — :class:`LineFramer` and
:func:`decode_message` give messages or :class:`RemoteProtocolError` with a documented code,
never another exception; the framer's buffer stays within its limit; how the bytes are split
into reads changes nothing; and what decodes encodes back to the same message.
"""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from app_client.errors import RemoteProtocolError
from app_client.wire import LineFramer, decode_message, encode_message

FUZZ = settings(max_examples=int(os.environ.get("TOOLBRIDGE_FUZZ_EXAMPLES", "200")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
DECODE_CODES = {"invalid_json", "invalid_utf8", "not_an_object", "unknown_type", "invalid_message"}

#: Real messages of every type, as an app or the broker would send them.
REAL_MESSAGES: list[dict[str, Any]] = [
    {"type": "register", "appName": "WatchTower", "token": "t0k3n", "instanceId": "main", "maxConcurrency": 2,
     "tools": [{"name": "ClickElement", "description": "Click", "timeoutMs": 5000, "pathGuard": False,
                "inputSchema": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}]},
    {"type": "toolResponse", "correlationId": 123, "result": {"success": True, "data": {"clicked": True}}},
    {"type": "toolResponse", "correlationId": 7, "result": {"success": False, "error": "no window",
                                                          "content": [{"type": "text", "text": "hi"}]}},
    {"type": "toolProgress", "correlationId": 123, "progress": 40, "total": 100, "message": "page 2"},
    {"type": "addTools", "tools": [{"name": "Undo"}]},
    {"type": "removeTools", "names": ["Undo"]},
    {"type": "ping", "id": 1},
    {"type": "pong", "id": 1},
    {"type": "error", "code": "invalid_json", "message": "bad", "correlationId": 3, "fatal": False},
    {"type": "registered", "appId": "app-1", "instanceId": "#1", "appLabel": "WatchTower",
     "toolNames": {"ClickElement": "WatchTower__ClickElement"}, "heartbeatIntervalMs": 5000},
    {"type": "toolInvocation", "correlationId": 5, "tool": "ClickElement", "parameters": {"x": 1},
     "timeoutMs": 30000, "progress": True},
    {"type": "toolCancel", "correlationId": 5, "reason": "cancelled"},
    {"type": "toolsUpdated", "toolNames": {}},
    {"type": "agentConnect", "token": "t0k3n"},
    {"type": "admin", "token": "t0k3n", "command": "status", "args": {}},
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12,
)


def decode_or_error(line: bytes) -> Any:
    """The message, or the error code; anything else escaping fails the test."""
    try:
        message = decode_message(line)
    except RemoteProtocolError as exc:
        assert exc.code in DECODE_CODES, exc.code
        assert isinstance(exc.message, str) and exc.message
        return exc.code
    # Whatever decodes encodes back, as one line, to the same message.
    encoded = encode_message(message)
    assert encoded.endswith(b"\n") and encoded.count(b"\n") == 1
    assert decode_message(encoded[:-1]) == message
    return message


def feed(chunks: list[bytes], limit: int) -> list[Any]:
    """Run ``chunks`` through a framer; return what came out (lines or error codes)."""
    framer = LineFramer(limit)
    out: list[Any] = []
    for chunk in chunks:
        framer.receive_data(chunk)
        while True:
            try:
                line = framer.next_line()
            except RemoteProtocolError as exc:
                assert exc.code == "line_too_long"
                out.append(exc.code)
                continue
            if line is None:
                break
            assert b"\n" not in line and 0 < len(line) <= limit
            out.append(line)
        assert framer.buffered <= limit  # bounded: never more than one line's worth is kept
    return out


@FUZZ
@given(chunks=st.lists(st.binary(max_size=200), max_size=12), limit=st.integers(1, 120))
def test_any_bytes_give_lines_and_messages_or_clean_errors(chunks: list[bytes], limit: int) -> None:
    for item in feed(chunks, limit):
        if isinstance(item, bytes):
            decode_or_error(item)


@FUZZ
@given(data=st.binary(max_size=600), cuts=st.lists(st.integers(0, 600), max_size=8), limit=st.integers(1, 200))
def test_how_bytes_are_split_into_reads_changes_nothing(data: bytes, cuts: list[int], limit: int) -> None:
    points = sorted({c for c in cuts if c <= len(data)})
    pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    assert feed(pieces, limit) == feed([data], limit) == feed([data[i:i + 1] for i in range(len(data))], limit)


def mutate(draw: st.DrawFn, message: dict[str, Any]) -> bytes:
    """One mutation of a real message: type confusion, a dropped or extra field, a cut, a bit flip."""
    kind = draw(st.sampled_from(["confuse", "drop", "extra", "retype", "truncate", "flip", "nest", "duplicate"]))
    value = json.loads(json.dumps(message))
    if kind in ("confuse", "drop") and len(value) > 1:
        key = draw(st.sampled_from(sorted(k for k in value if k != "type") or ["type"]))
        if kind == "drop":
            del value[key]
        else:
            value[key] = draw(json_values)
    elif kind == "extra":
        value[draw(st.text(max_size=10))] = draw(json_values)
    elif kind == "retype":
        value["type"] = draw(st.one_of(st.text(max_size=12), json_values))
    elif kind == "nest":
        depth = draw(st.integers(1, 5000))
        return json.dumps(value)[:-1].encode() + b', "deep": ' + b"[" * depth + b"]" * depth + b"}"
    elif kind == "duplicate":
        text = json.dumps(value)
        return (text[:-1] + ", " + text[1:]).encode()
    line = json.dumps(value).encode()
    if kind == "truncate":
        return line[: draw(st.integers(0, len(line)))]
    if kind == "flip":
        position = draw(st.integers(0, max(0, len(line) - 1)))
        bit = 1 << draw(st.integers(0, 7))
        return line[:position] + bytes([line[position] ^ bit]) + line[position + 1:] if line else line
    return line


@st.composite
def mutated_lines(draw: st.DrawFn) -> bytes:
    message = draw(st.sampled_from(REAL_MESSAGES))
    line = message
    for _ in range(draw(st.integers(1, 3))):
        out = mutate(draw, line)
        try:
            line = json.loads(out)
        except (ValueError, RecursionError):
            return out
        if not isinstance(line, dict):
            return out
    return json.dumps(line).encode()


@FUZZ
@given(line=mutated_lines())
@example(line=b"[" * 100_000)
@example(line=b'{"type": "toolResponse", "correlationId": 1, "result": {"data": ' + b"[" * 5000 + b"]" * 5000 + b"}}")
@example(line=b'{"type": "register", "appName": "A", "token": "\\ud800"}')
@example(line=b'{"type": "ping", "id": 123456789012345678901234567890}')
@example(line=b'{"type": "toolResponse", "correlationId": 1, "result": {"data": 1e400}}')
def test_mutated_real_messages_give_messages_or_clean_errors(line: bytes) -> None:
    if b"\n" in line:
        for part in line.split(b"\n"):
            if part.strip():
                decode_or_error(part)
    elif line.strip():
        decode_or_error(line)


def test_every_real_message_decodes() -> None:
    for message in REAL_MESSAGES:
        assert not isinstance(decode_or_error(json.dumps(message).encode()), str), message


def test_deep_nesting_is_a_clean_protocol_error_naming_its_call() -> None:
    line = b'{"type": "toolResponse", "correlationId": 42, "result": {"data": ' + b"[" * 5000 + b"]" * 5000 + b"}}"
    try:
        decode_message(line)
    except RemoteProtocolError as exc:
        assert exc.code == "invalid_json" and "nested too deeply" in exc.message
        assert exc.correlation_id == 42  # so the call it belongs to fails at once
    else:  # pragma: no cover
        raise AssertionError("a 5000-deep line decoded")
