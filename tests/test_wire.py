"""The sans-IO wire layer, without sockets."""

from __future__ import annotations

import pytest

from app_client.errors import LocalProtocolError, RemoteProtocolError
from app_client.wire import (
    Error,
    LineFramer,
    Register,
    ToolInvocation,
    ToolResponse,
    ToolResult,
    ToolSpec,
    decode_message,
    encode_message,
)


def test_register_from_the_proxy_format_decodes() -> None:
    line = (b'{"type":"register","appName":"WatchTower","token":"t","tools":[{"name":"ClickElement",'
            b'"description":"...","inputSchema":{"type":"object"}}]}')
    message = decode_message(line)
    assert isinstance(message, Register)
    assert message.app_name == "WatchTower" and message.max_concurrency == 1
    assert message.tools == [ToolSpec("ClickElement", "...", {"type": "object"})]


def test_encode_is_camel_case_one_line_and_omits_defaults() -> None:
    data = encode_message(ToolInvocation(correlation_id=123, tool="ClickElement", parameters={"x": "a\nb"}))
    assert data == b'{"type":"toolInvocation","correlationId":123,"tool":"ClickElement","parameters":{"x":"a\\nb"}}\n'
    assert data.count(b"\n") == 1


def test_roundtrip_and_unknown_fields_are_ignored() -> None:
    message = ToolResponse(correlation_id=5, result=ToolResult(data={"ok": 1}))
    assert decode_message(encode_message(message)[:-1]) == message
    newer = b'{"type":"toolResponse","correlationId":5,"result":{"data":{"ok":1},"fromTheFuture":1},"extra":[1]}'
    assert decode_message(newer) == message


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b"{oops", "invalid_json"),
        (b"[]", "not_an_object"),
        (b"42", "not_an_object"),
        (b'{"type":"nope"}', "unknown_type"),
        (b'{"type":7}', "invalid_message"),
        (b"{}", "invalid_message"),
        (b'{"type":"toolResponse","correlationId":1}', "invalid_message"),
        (b'{"type":"register","appName":"\xc3"}', "invalid_utf8"),
        # Outside a string msgspec calls a bad byte malformed JSON; it is still not UTF-8
        # (issue 16 item 3: a bare 0xFF line got invalid_json).
        (b"\xff", "invalid_utf8"),
        (b'\xfe{"type":"ping"}', "invalid_utf8"),
        (b'{"type":"toolProgress","x":"\xff"', "invalid_utf8"),
    ],
)
def test_bad_lines_raise_remote_protocol_errors(line: bytes, code: str) -> None:
    with pytest.raises(RemoteProtocolError) as info:
        decode_message(line)
    assert info.value.code == code
    assert info.value.message


def test_bad_line_with_a_correlation_id_names_it() -> None:
    with pytest.raises(RemoteProtocolError) as info:
        decode_message(b'{"type":"toolResponse","correlationId":77,"result":5}')
    assert info.value.correlation_id == 77


def test_encoding_something_unencodable_is_a_local_error() -> None:
    with pytest.raises(LocalProtocolError):
        encode_message(Error(code="x", message=object()))  # type: ignore[arg-type]


def test_framer_splits_joins_and_tolerates_crlf() -> None:
    framer = LineFramer(100)
    framer.receive_data(b'{"a":1}\r\n\n{"b"')
    assert framer.next_line() == b'{"a":1}'
    assert framer.next_line() is None
    framer.receive_data(b':2}\n')
    assert framer.next_line() == b'{"b":2}'
    assert framer.next_line() is None
    assert framer.buffered == 0


def test_framer_byte_at_a_time() -> None:
    framer = LineFramer(100)
    lines = []
    for byte in b'{"x":1}\n{"y":2}\n':
        framer.receive_data(bytes([byte]))
        while (line := framer.next_line()) is not None:
            lines.append(line)
    assert lines == [b'{"x":1}', b'{"y":2}']


def test_framer_discards_an_oversized_line_without_buffering_it_and_resumes() -> None:
    framer = LineFramer(16)
    framer.receive_data(b'{"correlationId": 9, "data": "')
    with pytest.raises(RemoteProtocolError) as info:
        framer.next_line()
    assert info.value.code == "line_too_long" and info.value.correlation_id == 9
    for _ in range(100):
        framer.receive_data(b"x" * 1000)
        assert framer.next_line() is None
        assert framer.buffered == 0
    framer.receive_data(b'"}\n{"ok":1}\n')
    assert framer.next_line() == b'{"ok":1}'


def test_framer_complete_but_too_long_line() -> None:
    framer = LineFramer(4)
    framer.receive_data(b"123456789\nabc\n")
    with pytest.raises(RemoteProtocolError):
        framer.next_line()
    assert framer.next_line() == b"abc"
