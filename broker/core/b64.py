"""Strict base64 decoding, fast where it can be: :func:`strict_b64decode`.

The call log summarises every large image or audio result (its decoded size and the SHA-256 of
its bytes, ``broker.core.calllog``). CPython's decoder (``binascii.a2b_base64``) takes ~16 ms for
a 5 MiB image (~7 MB of base64) and holds the GIL throughout, in the daemon's process, while that
very result is on its way to its agent: ~half the daemon's CPU per such call, and ~9 ms of its
end-to-end time on a two-core machine (BENCHMARKS.md, performance round 5: large results).
``pybase64`` (SIMD, wheels for Linux, macOS and Windows) decodes the same in ~0.3 ms and accepts
and refuses exactly what ``binascii.a2b_base64(strict_mode=True)`` does (no whitespace, padding
only at the end); when it is not installed, the standard decoder is used, with the same results.
"""

from __future__ import annotations

import binascii
import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["FAST", "strict_b64decode"]


def _fast() -> Callable[[Any], bytes] | None:
    try:
        module = importlib.import_module("pybase64")
    except ImportError:
        return None
    decode = module.b64decode

    def fast(data: Any) -> bytes:
        value: bytes = decode(data, validate=True)
        return value

    return fast


_decode = _fast()
#: Whether the fast decoder is in use (``pybase64`` is installed).
FAST = _decode is not None


def strict_b64decode(data: bytes | bytearray | memoryview) -> bytes:
    """``data`` decoded; raises ``binascii.Error`` for anything but strict base64 (no
    whitespace or other characters, padding only at the end, whole quanta)."""
    if _decode is not None:
        return _decode(data)
    return binascii.a2b_base64(data, strict_mode=True)
