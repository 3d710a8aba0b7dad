"""JSON-RPC 2.0 as MCP uses it: decoding one message, encoding replies, the error codes.

Theory of operation
-------------------
Sans-IO, like ``app_client.protocol``: :func:`parse_message` takes the bytes of one message (a
stdio line or an HTTP body) and returns a :class:`Request`, :class:`Notification` or
:class:`Response`, or raises :class:`RpcError` carrying the error reply the peer should get
(``-32700`` for invalid JSON, ``-32600`` for a batch or a malformed envelope) and, when the
message named one, the id to send it to. MCP sends one message per line or POST; batches
were removed from the protocol in 2025-06-18, so an array is refused as a whole.

The encoders return compact JSON without a trailing newline; transports add their framing
(a newline on stdio, an SSE event on HTTP).
"""

from __future__ import annotations

from typing import Any, Final, TypeAlias, TypeGuard

import attrs
import msgspec

from ..errors import BrokerError

__all__ = [
    "PARSE_ERROR",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "INVALID_PARAMS",
    "INTERNAL_ERROR",
    "SERVER_ERROR",
    "HEADER_MISMATCH",
    "MISSING_REQUIRED_CLIENT_CAPABILITY",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "RequestId",
    "Request",
    "Notification",
    "Response",
    "Message",
    "RpcError",
    "parse_message",
    "encode",
    "encode_result",
    "encode_error",
    "encode_notification",
    "is_request_id",
]

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
#: Implementation-defined server error (the daemon is unreachable, the session ended, ...).
SERVER_ERROR: Final = -32000
#: MCP 2026-07-28: the HTTP headers do not match the body, or a required one is missing.
HEADER_MISMATCH: Final = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY: Final = -32021
#: MCP 2026-07-28: ``data`` is ``{"supported": [...], "requested": "..."}``.
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022

RequestId: TypeAlias = "int | str"

_decoder: Final = msgspec.json.Decoder()
_encoder: Final = msgspec.json.Encoder()


class RpcError(BrokerError):
    """A JSON-RPC error to send back: raised while decoding or handling a message.

    ``request_id`` is the id of the request it answers (``None`` when it could not be read,
    which puts ``"id": null`` on the wire).
    """

    def __init__(
        self,
        code: int,
        message: str,
        data: Any = None,
        *,
        request_id: RequestId | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.request_id = request_id

    def encode(self, request_id: RequestId | None = None) -> bytes:
        rid = request_id if request_id is not None else self.request_id
        return encode_error(rid, self.code, self.message, self.data)


@attrs.frozen
class Request:
    id: RequestId
    method: str
    params: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Notification:
    method: str
    params: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Response:
    """A response the peer sent us (we send no requests, so these are only logged)."""

    id: RequestId | None
    result: Any = None
    error: Any = None


Message: TypeAlias = "Request | Notification | Response"


def is_request_id(value: Any) -> TypeGuard[int | str]:
    """MCP ids are strings or integers (never null, booleans or fractions)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def parse_message(data: bytes | str) -> Message:
    """Decode one JSON-RPC message. Raises :class:`RpcError` with the reply to send."""
    try:
        value = _decoder.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise RpcError(PARSE_ERROR, f"Parse error: the message is not valid JSON ({exc})") from None
    except RecursionError:  # msgspec refuses very deep nesting this way
        raise RpcError(PARSE_ERROR, "Parse error: the message is nested too deeply") from None
    return parse_object(value)


def parse_object(value: Any) -> Message:
    """Classify an already decoded JSON value (see :func:`parse_message`)."""
    if isinstance(value, list):
        raise RpcError(
            INVALID_REQUEST,
            "Invalid Request: batches are not supported; send one JSON-RPC message at a time",
        )
    if not isinstance(value, dict):
        raise RpcError(
            INVALID_REQUEST,
            f"Invalid Request: a message must be a JSON object, not {_json_type(value)}",
        )
    has_id = "id" in value
    raw_id = value.get("id")
    request_id = raw_id if is_request_id(raw_id) else None
    if value.get("jsonrpc") != "2.0":
        raise RpcError(
            INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', request_id=request_id
        )
    if "method" not in value:
        if has_id and ("result" in value or "error" in value):
            return Response(request_id, value.get("result"), value.get("error"))
        raise RpcError(
            INVALID_REQUEST,
            'Invalid Request: the message has no "method" (and is not a response)',
            request_id=request_id,
        )
    method = value["method"]
    if not isinstance(method, str) or not method:
        raise RpcError(
            INVALID_REQUEST, 'Invalid Request: "method" must be a non-empty string', request_id=request_id
        )
    if has_id and request_id is None:
        raise RpcError(INVALID_REQUEST, 'Invalid Request: "id" must be a string or an integer')
    params = value.get("params")
    if params is None:
        params = {}
    elif not isinstance(params, dict):
        raise RpcError(
            INVALID_PARAMS,
            f'Invalid params: "params" must be an object, not {_json_type(params)}',
            request_id=request_id,
        )
    if has_id:
        assert request_id is not None
        return Request(request_id, method, params)
    return Notification(method, params)


def _json_type(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "null"


def encode(message: dict[str, Any]) -> bytes:
    return _encoder.encode(message)


def encode_result(request_id: RequestId, result: dict[str, Any]) -> bytes:
    return _encoder.encode({"jsonrpc": "2.0", "id": request_id, "result": result})


def encode_error(request_id: RequestId | None, code: int, message: str, data: Any = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return _encoder.encode({"jsonrpc": "2.0", "id": request_id, "error": error})


def encode_notification(method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return _encoder.encode(message)
