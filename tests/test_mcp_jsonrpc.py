"""JSON-RPC decoding and encoding (sans-IO, synchronous)."""

from __future__ import annotations

import json

import pytest

from broker.mcp import jsonrpc
from broker.mcp.jsonrpc import Notification, Request, Response, RpcError, parse_message


def error_of(data: bytes | str) -> RpcError:
    with pytest.raises(RpcError) as caught:
        parse_message(data)
    return caught.value


def test_request_notification_response() -> None:
    assert parse_message(b'{"jsonrpc":"2.0","id":7,"method":"tools/list"}') == Request(7, "tools/list", {})
    assert parse_message('{"jsonrpc":"2.0","id":"a","method":"x","params":{"k":1}}') == Request("a", "x", {"k": 1})
    assert parse_message(b'{"jsonrpc":"2.0","method":"notifications/initialized"}') == Notification(
        "notifications/initialized", {}
    )
    assert parse_message(b'{"jsonrpc":"2.0","id":3,"result":{}}') == Response(3, {}, None)


@pytest.mark.parametrize(
    ("data", "code", "words", "request_id"),
    [
        (b"{not json", jsonrpc.PARSE_ERROR, "not valid JSON", None),
        (b"\xff\xfe", jsonrpc.PARSE_ERROR, "not valid JSON", None),
        (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', jsonrpc.INVALID_REQUEST, "batches are not supported", None),
        (b"42", jsonrpc.INVALID_REQUEST, "JSON object", None),
        (b'{"id":1,"method":"ping"}', jsonrpc.INVALID_REQUEST, '"jsonrpc" must be "2.0"', 1),
        (b'{"jsonrpc":"1.0","id":1,"method":"ping"}', jsonrpc.INVALID_REQUEST, '"jsonrpc"', 1),
        (b'{"jsonrpc":"2.0","id":1}', jsonrpc.INVALID_REQUEST, 'no "method"', 1),
        (b'{"jsonrpc":"2.0","id":1,"method":5}', jsonrpc.INVALID_REQUEST, '"method" must be', 1),
        (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', jsonrpc.INVALID_REQUEST, '"id" must be', None),
        (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', jsonrpc.INVALID_REQUEST, '"id" must be', None),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', jsonrpc.INVALID_REQUEST, '"id" must be', None),
        (b'{"jsonrpc":"2.0","id":2,"method":"ping","params":[1]}', jsonrpc.INVALID_PARAMS, "must be an object", 2),
    ],
)
def test_bad_messages(data: bytes, code: int, words: str, request_id: object) -> None:
    error = error_of(data)
    assert error.code == code
    assert words in error.message
    assert error.request_id == request_id
    reply = json.loads(error.encode())
    assert reply == {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": error.message}}


def test_encoders() -> None:
    assert json.loads(jsonrpc.encode_result(1, {"a": 1})) == {"jsonrpc": "2.0", "id": 1, "result": {"a": 1}}
    assert json.loads(jsonrpc.encode_error("x", -32022, "no", {"supported": []})) == {
        "jsonrpc": "2.0", "id": "x", "error": {"code": -32022, "message": "no", "data": {"supported": []}},
    }
    assert json.loads(jsonrpc.encode_notification("notifications/tools/list_changed")) == {
        "jsonrpc": "2.0", "method": "notifications/tools/list_changed",
    }
    assert b"\n" not in jsonrpc.encode_result(1, {"text": "two\nlines"})
