"""Agent-facing tool names: ``<app label>__<tool>``, safe for every model API.

Model APIs accept ``^[a-zA-Z0-9_-]{1,64}$`` (stricter than MCP's own rule), so each registered
name is mapped to such a name and back. Disallowed characters become ``_``; a name that would
be too long is cut and given a stable 8-hex-digit hash of the exact original, so it is the same
on every start; a name that would collide with one already taken gets the same hash suffix.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Container
from typing import Final

MAX_NAME = 64
SEPARATOR = "__"
#: Labels are kept short so ``label__tool`` leaves room for the tool's own name.
MAX_LABEL = 24
_VALID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_DISALLOWED = re.compile(r"[^a-zA-Z0-9_-]")


def is_valid_agent_name(name: str) -> bool:
    return bool(_VALID.match(name))


def sanitize(text: str) -> str:
    return _DISALLOWED.sub("_", text) or "_"


def stable_hash(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:8]


def make_label(app_name: str, taken: Container[str]) -> str:
    """A unique label for an app instance: ``WatchTower``, then ``WatchTower_2``, ..."""
    base = sanitize(app_name)
    if len(base) > MAX_LABEL:
        base = base[: MAX_LABEL - 9] + "_" + stable_hash(app_name)
    if base not in taken:
        return base
    n = 2
    while f"{base}_{n}" in taken:
        n += 1
    return f"{base}_{n}"


#: In a tools/list entry whose name is not simply ``<label>__<tool>`` (sanitized or shortened):
#: the app label and the tool's own name, which the agent-facing name no longer shows.
APP_LABEL_KEY: Final = "toolbridge/app"
TOOL_NAME_KEY: Final = "toolbridge/tool"


def make_agent_name(label: str, tool_name: str, taken: Container[str]) -> str:
    """The agent-facing name of ``tool_name`` of the instance labelled ``label``."""
    name = f"{label}{SEPARATOR}{sanitize(tool_name)}"
    if len(name) > MAX_NAME or name in taken:
        name = f"{name[: MAX_NAME - 9]}_{stable_hash(label, tool_name)}"
    n = 2
    candidate = name
    while candidate in taken:  # only on a hash collision: practically never
        suffix = f"_{n}"
        candidate = name[: MAX_NAME - len(suffix)] + suffix
        n += 1
    return candidate
