"""Strict base64 (broker.core.b64): the fast decoder, when installed, accepts and refuses exactly
what the standard one does in strict mode, and decodes to the same bytes."""

from __future__ import annotations

import base64
import binascii
import random

import pytest

from broker.core import b64

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
