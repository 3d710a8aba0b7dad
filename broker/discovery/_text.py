"""Text handling for the search index: word splitting, query words, safe FTS5 queries.

Theory of operation
-------------------
Tool names are identifiers (``ExportAsPDF``, ``file.open_recent``, ``Editor__GoToLine``), so
:func:`split_words` cuts them at case changes and at every non-alphanumeric character before
they are indexed; the same function cuts queries, so ``"GoToLine"`` and ``"go to line"`` are
the same search. FTS5's ``porter unicode61`` tokenizer then lower-cases, folds diacritics and
stems both sides.

A user's query never reaches FTS5 as syntax. :func:`query_words` keeps only word characters,
reads at most :data:`MAX_QUERY_CHARS`, drops English stop words (the standard NLTK list plus a few request words such as "please")
and words longer than :data:`MAX_WORD_CHARS`, removes duplicates and keeps at most
:data:`MAX_QUERY_WORDS`. :func:`match_expression` quotes each word as an FTS5 string (a quote
inside is doubled) and joins them with ``OR``; so ``"``, ``*``, ``NEAR(``, ``AND``, ``col:``
and the like are plain words or dropped, and no input can make a syntax error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

__all__ = [
    "MAX_QUERY_WORDS",
    "MAX_WORD_CHARS",
    "MAX_QUERY_CHARS",
    "STOP_WORDS",
    "split_words",
    "query_words",
    "match_expression",
    "prefix_expression",
    "schema_text",
]

#: A query is cut to this many distinct words (a 10 KB query costs no more than a short one).
MAX_QUERY_WORDS: Final = 32
#: Only the start of a longer query is read.
MAX_QUERY_CHARS: Final = 2000
#: Longer "words" (base64 blobs, pasted hashes) are dropped from queries.
MAX_WORD_CHARS: Final = 48
#: How deep parameter schemas are walked for names and descriptions.
_MAX_SCHEMA_DEPTH: Final = 6
_MAX_ENUM_VALUES: Final = 50
_MAX_OPTIONS: Final = 20

# Camel/Pascal case boundaries: "exportAs" | "PDFFile" -> "PDF File" | "v2Beta" -> "v2 Beta".
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[0-9])(?=[A-Z][a-z])")
# Everything that is not a letter or digit separates words ("_", "__", ".", "/", "-", spaces).
_SEPARATORS = re.compile(r"[\W_]+")
_LETTERS_DIGITS = re.compile(r"[^\W\d_]+|\d+")

# The NLTK English stop-word list (words are split at apostrophes, so "don't" is "don", "t"),
# and a few words of requests ("please", "want") that say nothing about the tool wanted.
STOP_WORDS: Final = frozenset(
    """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his himself
    she her hers herself it its itself they them their theirs themselves what which who whom
    this that these those am is are was were be been being have has had having do does did
    doing a an the and but if or because as until while of at by for with about against
    between into through during before after above below to from up down in out on off over
    under again further then once here there when where why how all any both each few more
    most other some such no nor not only own same so than too very s t can will just don
    should now d ll m o re ve y ain aren couldn didn doesn hadn hasn haven isn ma mightn
    mustn needn shan shouldn wasn weren won wouldn
    please want need would could
    """.split()
)


def split_words(text: str) -> list[str]:
    """Split identifiers and prose into lower-case words.

    ``ExportAsPDF`` -> ``["export", "as", "pdf"]``; ``Editor__file.open_recent`` ->
    ``["editor", "file", "open", "recent"]``. A word that mixes letters and digits is kept
    and its parts are added after it (``export3d`` -> ``export3d``, ``export``, ``3``, ``d``;
    ``mp3`` -> ``mp3``, ``mp``, ``3``), so either spelling is found.
    """
    words: list[str] = []
    for chunk in _SEPARATORS.split(_CAMEL.sub(" ", text)):
        if not chunk:
            continue
        word = chunk.lower()
        words.append(word)
        parts = _LETTERS_DIGITS.findall(word)
        if len(parts) > 1:
            words.extend(parts)
    return words


def query_words(query: str) -> list[str]:
    """The distinct words of a free-text query worth searching for, in order of appearance.

    Stop words are dropped unless the query has nothing else (``"the"`` still searches).
    """
    words = [w for w in split_words(query[:MAX_QUERY_CHARS]) if len(w) <= MAX_WORD_CHARS]
    kept = [w for w in words if w not in STOP_WORDS] or words
    return list(dict.fromkeys(kept))[:MAX_QUERY_WORDS]


def _quote(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


def match_expression(words: Iterable[str]) -> str | None:
    """An FTS5 MATCH expression matching any of ``words`` (each quoted), or None if none."""
    quoted = [_quote(w) for w in words if w]
    return " OR ".join(quoted) if quoted else None


def schema_text(schema: Any) -> str:
    """Parameter names (split into words), descriptions and enum values of an input schema."""
    out: list[str] = []
    _walk(schema, out, 0)
    return " ".join(out)


def _walk(schema: Any, out: list[str], depth: int) -> None:
    if depth > _MAX_SCHEMA_DEPTH or not isinstance(schema, dict):
        return
    if depth > 0:
        for key in ("title", "description"):
            value = schema.get(key)
            if isinstance(value, str):
                out.append(value)
        enum = schema.get("enum")
        if isinstance(enum, list):
            out.extend(" ".join(split_words(str(v))) for v in enum[:_MAX_ENUM_VALUES] if isinstance(v, (str, int)))
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, sub in properties.items():
            out.append(" ".join(split_words(str(name))))
            _walk(sub, out, depth + 1)
    for key in ("items", "additionalProperties"):
        _walk(schema.get(key), out, depth + 1)
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        options = schema.get(key)
        if isinstance(options, list):
            for option in options[:_MAX_OPTIONS]:
                _walk(option, out, depth + 1)
    defs = schema.get("$defs", schema.get("definitions"))
    if isinstance(defs, dict):
        for sub in list(defs.values())[:_MAX_OPTIONS]:
            _walk(sub, out, depth + 1)


def prefix_expression(words: Iterable[str]) -> str | None:
    """An FTS5 MATCH expression matching any token that starts with one of ``words`` (each
    quoted, as in :func:`match_expression`), or None if none."""
    quoted = [_quote(w) + "*" for w in words if w]
    return " OR ".join(quoted) if quoted else None
