"""Typo tolerance for the search index: the words it holds, and the closest ones to a typo.

Theory of operation
-------------------
BM25 matches a word or nothing: "musik" finds no tool, and a query with a typo in every content
word ("paus the musik") finds none at all. :class:`Vocabulary` holds every distinct word of
the indexed text (names split into words, app labels, titles, descriptions, parameter text),
with how many tools use it, plus the thesaurus's words (so "tomorow" can become a word that
only the thesaurus knows). It is kept up to date as tools come and go (:meth:`Vocabulary.add`,
:meth:`Vocabulary.discard`, O(words of the tool)), and so is a trigram index over it: each
word is filed under its letter trigrams, padded at both ends (``^mu mus usi sic ic$``).

:meth:`Vocabulary.closest` reads the words that share a trigram with the typo, keeps those
within :func:`max_distance` edits (optimal string alignment: insertions, deletions,
substitutions and swaps of two neighbours), and returns the nearest, most used first. Only
words the index does not know are corrected (the index decides that, since FTS5's stemmer
also knows "cropping" from "crop"), and short words (under :data:`MIN_TYPO_CHARS`) never are:
"ui" is one edit from too many words.

:func:`light_stem` is a crude suffix stripper ("pauses", "paused", "pausing" -> "paus") for
the loose fallback (FTS5 prefix queries) and for telling which query words a result contains
(the confidence of a hit, see ``_index``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Final

__all__ = ["MIN_TYPO_CHARS", "Vocabulary", "light_stem", "max_distance", "edit_distance"]

#: Words shorter than this are never corrected (too many words are one edit away).
MIN_TYPO_CHARS: Final = 4
#: At most this many corrections per word (the nearest, most used first).
MAX_CORRECTIONS: Final = 2
#: At most this many candidates (those sharing the most trigrams) get an edit distance.
_MAX_CHECKED: Final = 40


def max_distance(word: str, *, loose: bool = False) -> int:
    """How many edits a correction of ``word`` may be away: 1 up to 7 letters, else 2
    (``loose``: one more, for the fallback after nothing matched). Two edits in a short word
    turn too many real words into others ("arrive" -> "archive")."""
    base = 1 if len(word) <= 7 else 2
    return base + 1 if loose else base


def edit_distance(a: str, b: str, limit: int) -> int:
    """Optimal string alignment distance of ``a`` and ``b`` (a swap of neighbours is one
    edit); any value above ``limit`` is returned as ``limit + 1`` (rows stop early)."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    if a == b:
        return 0
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cost = 0 if ca == cb else 1
            value = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                value = min(value, previous2[j - 2] + 1)
            current[j] = value
        if min(current) > limit:
            return limit + 1
        previous2, previous = previous, current
    return min(previous[-1], limit + 1)


def _grams(word: str) -> set[str]:
    padded = f"^{word}$"
    return {padded[i : i + 3] for i in range(len(padded) - 2)}


_SUFFIXES: Final = (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", ""))


def light_stem(word: str) -> str:
    """``word`` without a plural, -ing or -ed ending and a final e ("deleting", "deletes",
    "delete" -> "delet"); crude on purpose, for loose matching only."""
    for suffix, replacement in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            word = word[: len(word) - len(suffix)] + replacement
            break
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


class Vocabulary:
    """Distinct words with how many tools use them, and a trigram index to find near words."""

    def __init__(self, fixed: Iterable[str] = ()) -> None:
        self._counts: Counter[str] = Counter()
        self._by_gram: dict[str, set[str]] = {}
        #: Words known whatever the tools are (the thesaurus's), with a count of 0.
        self._fixed = frozenset(w for w in fixed if w.isalpha())
        for word in self._fixed:
            self._file(word)

    def __contains__(self, word: object) -> bool:
        return word in self._counts or word in self._fixed

    def __len__(self) -> int:
        return len(self._counts.keys() | self._fixed)

    def add(self, words: Iterable[str]) -> None:
        """Count each distinct word of one tool once."""
        for word in set(words):
            if not word.isalpha():
                continue
            self._counts[word] += 1
            if self._counts[word] == 1 and word not in self._fixed:
                self._file(word)

    def discard(self, words: Iterable[str]) -> None:
        """Undo :meth:`add` for the same words."""
        for word in set(words):
            count = self._counts.get(word)
            if count is None:
                continue
            if count > 1:
                self._counts[word] = count - 1
                continue
            del self._counts[word]
            if word not in self._fixed:
                for gram in _grams(word):
                    bucket = self._by_gram.get(gram)
                    if bucket is not None:
                        bucket.discard(word)
                        if not bucket:
                            del self._by_gram[gram]

    def _file(self, word: str) -> None:
        for gram in _grams(word):
            self._by_gram.setdefault(gram, set()).add(word)

    def closest(self, word: str, limit: int) -> list[str]:
        """The known words at most ``limit`` edits from ``word``, nearest and most used first
        (at most :data:`MAX_CORRECTIONS`); [] for a short or known word."""
        if len(word) < MIN_TYPO_CHARS or word in self or not word.isalpha():
            return []
        shared: Counter[str] = Counter()
        for gram in _grams(word):
            for other in self._by_gram.get(gram, ()):
                if abs(len(other) - len(word)) <= limit:
                    shared[other] += 1
        # A word within `limit` edits shares at least this many of the typo's len(word)
        # trigrams (an edit spoils at most three, a swap of neighbours four); a floor of 1.
        need = max(1, len(word) - 4 * limit)
        found: list[tuple[int, int, str]] = []
        # the words sharing the most trigrams first; past _MAX_CHECKED the rest are too far
        for other, count in shared.most_common(_MAX_CHECKED):
            if count < need:
                break
            distance = edit_distance(word, other, limit)
            if distance <= limit:
                found.append((distance, -self._counts.get(other, 0), other))
        found.sort()
        if not found:
            return []
        nearest = found[0][0]
        return [other for distance, _, other in found if distance == nearest][:MAX_CORRECTIONS]
