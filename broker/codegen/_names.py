"""Identifiers and comment text for generated code: always valid, never ambiguous.

Theory of operation
-------------------
Everything that reaches generated source comes from apps (tool names, property names,
descriptions), so it is untrusted text. Identifiers are *built* from it, never copied: the
text is split into words at case changes and separators, reduced to ASCII letters and
digits and joined as PascalCase, snake_case or camelCase. A result that is empty, starts with
a digit, is a keyword of the target language or a name the generated file itself uses gets a
prefix or a trailing ``_``. :class:`NameAllocator` hands out each name once, adding ``_2``,
``_3``... on a collision; since callers allocate in a fixed order (tools sorted by agent-facing
name), the same registry always gives the same names.

Free text (descriptions) only ever lands in comments or docstrings, after :func:`clean_text`
removed control and format characters (including bidirectional overrides, which could make a
comment display as code) and unpaired surrogates; the language emitters then escape what
would end the comment or string.
"""

from __future__ import annotations

import keyword
import re
import unicodedata
from collections.abc import Iterable
from typing import Final

__all__ = [
    "NameAllocator",
    "clean_text",
    "pascal_case",
    "snake_case",
    "camel_case",
    "PY_KEYWORDS",
    "TS_RESERVED",
]

MAX_IDENTIFIER: Final = 80

PY_KEYWORDS: Final = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist)

#: JavaScript/TypeScript reserved and contextual words, plus the names that are dangerous as
#: object keys at run time (``__proto__``, ``constructor``, ``prototype``).
TS_RESERVED: Final = frozenset(
    """
    break case catch class const continue debugger default delete do else enum export extends
    false finally for function if import in instanceof new null return super switch this throw
    true try typeof var void while with as implements interface let package private protected
    public static yield any boolean number string symbol bigint object never unknown undefined
    type from of get set declare module namespace require async await is keyof readonly infer
    unique abstract accessor assert asserts global out override satisfies arguments eval
    constructor prototype __proto__ __defineGetter__ __defineSetter__ __lookupGetter__
    __lookupSetter__ hasOwnProperty isPrototypeOf propertyIsEnumerable toLocaleString toString
    valueOf then
    """.split()
)

_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[0-9])(?=[A-Z][a-z])")
_NON_ALNUM = re.compile(r"[^A-Za-z0-9]+")


def _ascii_words(text: str) -> list[str]:
    """The words of ``text``: split at case changes and separators, accents folded to ASCII."""
    folded = unicodedata.normalize("NFKD", text[:1000]).encode("ascii", "ignore").decode("ascii")
    return [w for w in _NON_ALNUM.split(_CAMEL.sub(" ", folded)) if w]


def pascal_case(text: str, fallback: str = "T") -> str:
    """``export_as-pdf`` -> ``ExportAsPdf``; always starts with a letter."""
    name = "".join(w[:1].upper() + w[1:] for w in _ascii_words(text))[:MAX_IDENTIFIER]
    if not name:
        return fallback
    return name if name[0].isalpha() else fallback + name


def snake_case(text: str, fallback: str = "tool") -> str:
    """``ExportAsPDF`` -> ``export_as_pdf``; always starts with a letter."""
    name = "_".join(w.lower() for w in _ascii_words(text))[:MAX_IDENTIFIER].rstrip("_")
    if not name:
        return fallback
    return name if name[0].isalpha() else f"{fallback}_{name}"


def camel_case(text: str, fallback: str = "tool") -> str:
    """``export_as_pdf`` -> ``exportAsPdf``; always starts with a letter."""
    words = [w.lower() for w in _ascii_words(text)]
    name = "".join([words[0], *(w[:1].upper() + w[1:] for w in words[1:])])[:MAX_IDENTIFIER] if words else ""
    if not name:
        return fallback
    return name if name[0].isalpha() else fallback + name[:1].upper() + name[1:]


class NameAllocator:
    """Hands out unique identifiers: ``Foo``, then ``Foo_2``, ``Foo_3``, ...

    A candidate that is a keyword or a ``reserved`` name is escaped with a trailing ``_``
    first (``class`` -> ``class_``); a candidate already handed out gets the next number.
    """

    def __init__(self, reserved: Iterable[str] = (), keywords: frozenset[str] = frozenset()) -> None:
        self._reserved = frozenset(reserved) | keywords
        self._taken: set[str] = set()

    def __contains__(self, name: object) -> bool:
        return name in self._taken

    def allocate(self, candidate: str) -> str:
        base = candidate + "_" if candidate in self._reserved else candidate
        name = base
        n = 2
        while name in self._taken or name in self._reserved:
            name = f"{base}_{n}" if not base.endswith("_") else f"{base}{n}"
            n += 1
        self._taken.add(name)
        return name


_LINE_BREAKS = re.compile(r"\r\n|[\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def clean_text(text: str, max_chars: int = 2000) -> str:
    """Text safe to put in a comment: printable characters, ``\\n`` line breaks, tabs as spaces.

    Control and format characters (bidirectional overrides, zero-width characters) and
    unpaired surrogates are removed; trailing spaces and blank edges are trimmed.
    """
    text = _LINE_BREAKS.sub("\n", text[: max_chars * 2])
    out: list[str] = []
    for ch in text:
        if ch == "\n":
            out.append(ch)
        elif ch == "\t":
            out.append(" ")
        elif unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn"):
            continue
        else:
            out.append(ch)
    lines = [line.rstrip() for line in "".join(out).split("\n")]
    cleaned = "\n".join(lines).strip("\n")
    if len(cleaned) > max_chars:
        cleaned = cleaned[: max_chars - 3].rstrip() + "..."
    return cleaned
