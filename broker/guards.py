"""Argument guards: checks every call passes after validation and before any I/O.

The path-traversal guard walks every string in the arguments, through nested objects and
lists, and rejects ``..`` used as a path segment with either separator, also when it is
percent-encoded (once or twice: ``%2e%2e``, ``%252e%252e``) or written with Unicode's fullwidth
dots. A plain ``..`` inside a word ("wait..." or "1..10") is not a path segment and passes.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

# ".." bounded on each side by the string's edge or a path separator.
_DOT_DOT_SEGMENT = re.compile(r"(?:^|[\\/])\.\.(?:[\\/]|$)")
_MAX_DEPTH = 64


def _normalise(text: str) -> str:
    text = text.replace("\uff0e", ".").replace("\uff0f", "/").replace("\uff3c", "\\")
    for _ in range(2):
        if "%" not in text:
            break
        text = urllib.parse.unquote(text)
    return text


def _is_traversal(text: str) -> bool:
    if ".." not in text and "%" not in text and "\uff0e" not in text:
        return False  # the fast path for ordinary strings
    return bool(_DOT_DOT_SEGMENT.search(_normalise(text)))


def find_path_traversal(arguments: Any) -> str | None:
    """Return the argument path (``$.files[2].name``) of the first traversal found, else None."""
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
