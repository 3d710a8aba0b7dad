"""Agent-facing tool names: ``<app label>__<tool>``, safe for every model API.

Model APIs accept ``^[a-zA-Z0-9_-]{1,64}$`` (stricter than MCP's own rule), so each registered
name is mapped to such a name and back. Disallowed characters become ``_``; a name that would
be too long is cut and given a stable 8-hex-digit hash of the exact original, so it is the same
on every start; a name that would collide with one already taken gets the same hash suffix.

Which tool gets the plain name when two of an instance's tools sanitize alike (``a.b`` and
``a_b``) must not depend on the order they were registered in, or a reconnect that lists them
in another order would silently point the agent's ``App__a_b`` at the other tool.
:func:`assign_agent_names` decides by the names alone: a tool whose name needs no sanitizing
owns its plain name; a sanitized one gets it only when no other tool of the set claims it;
the rest get the hash suffix. An instance also remembers the names it handed out (kept across
reconnects): a tool gets its earlier name back, and no name ever moves to another tool of the
same instance.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Container, Iterable, Mapping
from typing import Final

import regex

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
        return _hashed_name(label, tool_name, taken)
    return name


def _hashed_name(label: str, tool_name: str, taken: Container[str]) -> str:
    name = f"{label}{SEPARATOR}{sanitize(tool_name)}"
    name = f"{name[: MAX_NAME - 9]}_{stable_hash(label, tool_name)}"
    n = 2
    candidate = name
    while candidate in taken:  # only on a hash collision: practically never
        suffix = f"_{n}"
        candidate = name[: MAX_NAME - len(suffix)] + suffix
        n += 1
    return candidate


def assign_agent_names(
    label: str, tool_names: Iterable[str], taken: Container[str], given: Mapping[str, str]
) -> dict[str, str]:
    """Agent-facing names for new tools of the instance ``label``, whatever their order.

    ``taken``: agent names in use (other instances' tools, this instance's remaining ones).
    ``given``: tool name -> agent name this instance handed out before; a tool gets its name
    back when it is free, and a name in it is never given to another tool.
    """
    assigned: dict[str, str] = {}
    handed_out = set(given.values())
    claims: dict[str, list[str]] = {}
    for tool_name in sorted(tool_names):
        earlier = given.get(tool_name)
        if earlier is not None and earlier not in taken:
            assigned[tool_name] = earlier
        else:
            claims.setdefault(f"{label}{SEPARATOR}{sanitize(tool_name)}", []).append(tool_name)
    in_use = _Union(taken, assigned.values(), handed_out)
    for plain, claimants in sorted(claims.items()):
        exact = [t for t in claimants if sanitize(t) == t]  # at most one: tool names are unique
        owner = exact[0] if exact else claimants[0] if len(claimants) == 1 else None
        if len(plain) > MAX_NAME or plain in in_use:
            owner = None
        for tool_name in claimants:
            name = plain if tool_name == owner else _hashed_name(label, tool_name, in_use)
            assigned[tool_name] = name
            in_use.add(name)
    return assigned


class _Union:
    """``in`` over a container plus the names added here (no copy of the registry's table)."""

    def __init__(self, base: Container[str], *more: Iterable[str]) -> None:
        self._base = base
        self._more = {name for names in more for name in names}

    def __contains__(self, name: object) -> bool:
        return name in self._more or name in self._base

    def add(self, name: str) -> None:
        self._more.add(name)


# --- did you mean ----------------------------------------------------------------------------
#
# An unknown name is compared with the known ones in two ways. *Normalised*: case and every
# character other than a letter or digit ignored, so ``notes__TypeText`` and ``Notes__typetext``
# both find ``Notes__type_text``; and a bare tool name (no ``<label>__``) is compared with the
# tool part of each name, so ``type_text`` finds it too. That is a few string operations per
# known name, cheap enough for the daemon's event loop. *Fuzzy* (``fuzzy=True``): also names
# within a small edit distance of the normalised forms (typos: ``Notes__tpye_text``). The edit
# distance is the `regex` module's fuzzy matching (C, with BESTMATCH: the exact Levenshtein
# distance), ~2 µs a name; a pure-Python DP was 25 µs, 0.26 s for 10,000 tools on the loop.
# Past :data:`FUZZY_MAX_NAMES` names, or for a query longer than :data:`FUZZY_MAX_CHARS`, only
# the normalised comparison runs, so an unknown name never costs the loop more than ~20 ms.

_NOT_ALNUM: Final = re.compile(r"[^a-z0-9]")


def _normalised(name: str) -> str:
    return _NOT_ALNUM.sub("", name.lower())


#: The most names the fuzzy comparison looks at, and the longest query it takes (see above).
FUZZY_MAX_NAMES: Final = 5000
FUZZY_MAX_CHARS: Final = 128


class _Fuzzy:
    """The edit distance from one word to candidates, if at most ``limit`` (else None)."""

    def __init__(self, word: str, limit: int) -> None:
        self.word, self.limit = word, limit
        self._pattern: regex.Pattern[str] | None = None  # compiled on first use

    def distance(self, candidate: str) -> int | None:
        if not self.word or abs(len(candidate) - len(self.word)) > self.limit:
            return None
        if self._pattern is None:
            self._pattern = regex.compile(f"(?b)(?:{regex.escape(self.word)}){{e<={self.limit}}}")
        match = self._pattern.fullmatch(candidate)
        return sum(match.fuzzy_counts) if match is not None else None


def near_names(name: str, known: Iterable[str], *, limit: int = 5, fuzzy: bool = False) -> list[str]:
    """Known names ``name`` was probably meant to be, best first (at most ``limit``).

    Matches names that differ only in case and punctuation, the same tool part under another
    label (another instance of the app), a bare tool name's full names, and with ``fuzzy``
    names a few typos away (about one edit per four characters, at least one).
    """
    label, sep, tool_part = name.partition(SEPARATOR)
    whole = _normalised(name)
    part = _normalised(tool_part if sep else name)
    known = list(known)
    fuzzy = fuzzy and len(known) <= FUZZY_MAX_NAMES and len(name) <= FUZZY_MAX_CHARS
    near_whole = _Fuzzy(whole, max(1, len(whole) // 4))
    near_part = _Fuzzy(part, max(1, len(part) // 4))
    scored: list[tuple[int, str]] = []
    for candidate in known:
        if candidate == name:
            continue
        _, candidate_sep, candidate_tool = candidate.partition(SEPARATOR)
        candidate_whole = _normalised(candidate)
        candidate_part = _normalised(candidate_tool) if candidate_sep else candidate_whole
        if candidate_whole == whole:
            scored.append((0, candidate))
        elif part and candidate_part == part:
            scored.append((1, candidate))
        elif fuzzy:
            distance = near_whole.distance(candidate_whole)
            if distance is None:
                distance = near_part.distance(candidate_part)
            if distance is not None:
                scored.append((1 + distance, candidate))
    scored.sort()
    return [candidate for _, candidate in scored[:limit]]
