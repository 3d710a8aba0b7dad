"""Strict base64 (broker.core.b64): the fast decoder, when installed, accepts and refuses exactly
what the standard one does in strict mode, and decodes to the same bytes; the call log's summary
of a large image from its raw bytes is the one it makes of the decoded value."""

from __future__ import annotations

import base64
import binascii
import json
import random
from typing import Any

import pytest

from app_client.protocol import ToolResult
from broker.core import b64
from broker.core.calllog import make_redacted_row, make_row
from broker.core.outcome import CallOutcome, OutcomeKind
from broker.core.passthrough import PassthroughResult, decode_tool_response

EDGES = [b"", b"QQ==", b"QQ=A", b"Q===", b"QUJD", b"QU=D", b"QUJD\n", b" QUJD", b"QUJ-", b"QUJ_", b"QR==", b"QUI=",
         b"QUJDQQ==QUJD", b"=QUJ", b"QUJ\x00", "QUJé".encode(), b"QUJDQ", b"QQ=", b"QUJDQUJD"]
ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="


def _cases() -> list[bytes]:
    rng = random.Random(33)
    cases = list(EDGES) + [base64.b64encode(rng.randbytes(n)) for n in range(0, 40)]
    for _ in range(3000):
        pool = ALPHABET + (b"-_ \n\x00" if rng.random() < 0.3 else b"")
        cases.append(bytes(rng.choice(pool) for _ in range(rng.choice([4, 8, 12, 16]))))
    return cases


def _outcome(decode: object, data: bytes) -> bytes | str:
    try:
        return decode(data)  # type: ignore[operator,no-any-return]
    except (binascii.Error, ValueError):
        return "refused"


def _standard(data: bytes) -> bytes:
    return binascii.a2b_base64(data, strict_mode=True)


def test_the_module_decoder_agrees_with_strict_binascii() -> None:
    for data in _cases():
        assert _outcome(b64.strict_b64decode, data) == _outcome(_standard, data), data
        assert _outcome(b64.strict_b64decode, memoryview(data)) == _outcome(_standard, data), data


def test_the_fast_decoder_agrees_with_strict_binascii() -> None:
    fast = b64._fast()
    if fast is None:
        pytest.skip("pybase64 is not installed (the standard decoder is used)")
    for data in _cases():
        assert _outcome(fast, data) == _outcome(_standard, data), data


# --- the call log's summary of a large image, from its raw bytes --------------------------------

PAYLOAD = bytes(range(256)) * 4096  # 1 MiB: several of the decoder's steps


@pytest.mark.parametrize("redact", [False, True])
@pytest.mark.parametrize("data_json", [
    json.dumps(base64.b64encode(PAYLOAD).decode()),  # the usual case
    json.dumps(base64.b64encode(PAYLOAD).decode()).replace("/", "\\/"),  # escaped slashes: valid JSON
    json.dumps(base64.b64encode(PAYLOAD).decode()[:-4] + "*AB="),  # not base64
    json.dumps(base64.b64encode(PAYLOAD).decode()[:-1]),  # bad padding
    "[1, 2]",  # not a string
])
def test_a_raw_image_is_summarised_as_its_decoded_value_is(data_json: str, redact: bool) -> None:
    """The summary from the raw bytes (fast path, escapes looked at only when decoding fails)
    equals the one the log made of the decoded value."""
    content = '[{"type":"image","mimeType":"image/png","data":' + data_json + "}]"
    line = ('{"type":"toolResponse","correlationId":1,"result":{"content":' + content + "}}").encode()
    response = decode_tool_response(line)
    assert response is not None and isinstance(response.result, PassthroughResult)
    make = make_redacted_row if redact else make_row

    def row(result: ToolResult) -> Any:
        return json.loads(make((0.0, "t", None, None, None, None, None, CallOutcome(OutcomeKind.OK, result=result),
                                1.0))[8])

    assert row(response.result) == row(ToolResult(content=json.loads(content)))
