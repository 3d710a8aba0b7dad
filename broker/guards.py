"""Argument guards: checks every call passes after validation and before any I/O.

The path-traversal guard walks every string in the arguments, through nested objects and
lists, and rejects ``..`` used as a path segment with either separator, also when it is
percent-encoded (any number of times: ``%2e%2e``, ``%252e%252e``, ...; overlong UTF-8 such as
``%c0%ae`` included), written with Unicode compatibility forms that fold to dots and slashes
(fullwidth ``．．／``, the two-dot leader ``‥``, small ``﹒``) or with slash look-alikes that
Windows' "best fit" code-page conversion turns into real separators (``∕ ⁄ ⧵``), or ended by a
NUL (which C string APIs treat as the end). A plain ``..`` inside a word ("wait..." or
"1..10") is not a path segment and passes. Absolute paths are not traversal and pass: tools
that take paths must still check them against what they mean to allow.
"""

from __future__ import annotations

import re
import unicodedata
import urllib.parse
from typing import Any

# ".." bounded on each side by the string's edge or a path separator.
_DOT_DOT_SEGMENT = re.compile(r"(?:^|[\\/])\.\.(?:[\\/]|$)")
_MAX_DEPTH = 64
#: Percent-decoding rounds before giving up on a string that keeps changing.
_MAX_ROUNDS = 8
#: Separator look-alikes that NFKC keeps but Windows' best-fit conversion maps to ASCII; and NUL.
_LOOKALIKES = str.maketrans({"\u2215": "/", "\u2044": "/", "\u29f8": "/", "\u2216": "\\", "\u29f5": "\\",
                             "\u29f9": "\\", "\x00": "/"})
#: Overlong UTF-8 for "." "/" "\\" that lax decoders accept.
_OVERLONG = ((b"\xc0\xae", b"."), (b"\xe0\x80\xae", b"."), (b"\xc0\xaf", b"/"), (b"\xe0\x80\xaf", b"/"),
             (b"\xc1\x9c", b"\\"))


def _normalise(text: str) -> str:
    for _ in range(_MAX_ROUNDS):
        folded = unicodedata.normalize("NFKC", text).translate(_LOOKALIKES)
        if "%" in folded:
            raw = urllib.parse.unquote_to_bytes(folded)
            for overlong, plain in _OVERLONG:
                raw = raw.replace(overlong, plain)
            folded = raw.decode("utf-8", "replace")
        if folded == text:
            break
        text = folded
    return text


def _is_traversal(text: str) -> bool:
    if ".." not in text and "%" not in text and "\x00" not in text and text.isascii():
        return False  # the fast path for ordinary strings
    return bool(_DOT_DOT_SEGMENT.search(_normalise(text)))


def _has_traversal(value: Any, depth: int = 0) -> bool:
    """Whether :func:`find_path_traversal` would find something (no paths built: the common,
    clean case costs one walk and no string formatting)."""
    if isinstance(value, str):
        return _is_traversal(value)
    if depth >= _MAX_DEPTH:
        return False
    if isinstance(value, dict):
        for key, item in value.items():
            if _is_traversal(key) or (not isinstance(item, int | float | None) and _has_traversal(item, depth + 1)):
                return True
    elif isinstance(value, list):
        return any(_has_traversal(item, depth + 1) for item in value)
    return False


def find_path_traversal(arguments: Any) -> str | None:
    """Return the argument path (``$.files[2].name``) of the first traversal found, else None."""
    return _find_path(arguments) if _has_traversal(arguments) else None


def _find_path(arguments: Any) -> str | None:
    stack: list[tuple[str, Any, int]] = [("$", arguments, 0)]
    while stack:
        path, value, depth = stack.pop()
        if isinstance(value, str):
            if _is_traversal(value):
                return path
        elif depth < _MAX_DEPTH:
            if isinstance(value, dict):
                for key, item in reversed(list(value.items())):
                    if _is_traversal(key):
                        return f"{path}.{key}"
                    stack.append((f"{path}.{key}", item, depth + 1))
            elif isinstance(value, list):
                for index in range(len(value) - 1, -1, -1):
                    stack.append((f"{path}[{index}]", value[index], depth + 1))
    return None
