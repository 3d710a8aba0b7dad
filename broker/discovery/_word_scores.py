"""Each query word's BM25 scores, kept between searches.

FTS5's ``bm25()`` of a query of several words (``"a" OR "b"``) is the sum of one term per word
(each word's IDF times its weighted frequency in the row, over the row's length), so a
query's scores are the sum of its words' scores, to the last bit when added in the query's
order (bench/discovery: identical on every development query). A search at 10,000 tools spends
most of its time on words that match thousands of rows ("file", "add", the thesaurus's
"document"), and the same words come back search after search: kept here, such a word costs a
dictionary merge instead of a scan of its rows (BENCHMARKS.md, discovery round 10).

Every score depends on the whole table (row count, average length, each word's IDF), so the
index clears this whenever a row changes. At most :data:`MAX_ROWS` scores are kept, the least
recently used words dropped first.
"""

from __future__ import annotations

import math
import sqlite3
import sys
from collections import OrderedDict
from collections.abc import Iterable
from typing import Final

from ._text import match_expression

__all__ = ["MAX_ROWS", "WordScores"]

#: How many (word, tool) scores are kept in all (~100 bytes each).
MAX_ROWS: Final = 100_000

_Key = tuple[str, tuple[float, ...], str]


class WordScores:
    """Per-word BM25 scores from ``db`` (``sql`` selects ``(key, bm25)`` rows, taking the
    ``columns`` weights and then a MATCH expression), least recently used dropped first."""

    def __init__(self, db: sqlite3.Connection, max_rows: int = MAX_ROWS) -> None:
        self._db = db
        self._max_rows = max_rows
        self._kept: OrderedDict[_Key, dict[str, float]] = OrderedDict()
        self._rows = 0

    def clear(self) -> None:
        """Forget every score (a row of the table changed)."""
        self._kept.clear()
        self._rows = 0

    def summed(self, sql: str, columns: tuple[float, ...], words: Iterable[str], factor: float) -> dict[str, float]:
        """Each matching row's BM25 score for ``words`` (positive: higher is better), times
        ``factor``: what one query of all the words gives."""
        total: dict[str, float] = {}
        for word in words:
            if not word:
                continue
            get = total.get
            for key, score in self._word(sql, columns, word).items():
                total[key] = get(key, 0.0) + score
        if factor != 1.0:
            return {key: score * factor for key, score in total.items()}
        return total

    def _word(self, sql: str, columns: tuple[float, ...], word: str) -> dict[str, float]:
        key = (sql, columns, word)
        kept = self._kept.get(key)
        if kept is not None:
            self._kept.move_to_end(key)
            return kept
        expression = match_expression([word])
        try:
            rows = self._db.execute(sql, (*columns, expression)).fetchall()
        except sqlite3.Error:  # pragma: no cover - quoting makes this unreachable
            rows = []
        # FTS5's bm25() is negative, more negative is better; a tiny IDF can round to -0.0.
        # Interned: the same tool names in many kept words share one string.
        scores = {sys.intern(name): -float(score) for name, score in rows if math.isfinite(score)}
        if len(scores) <= self._max_rows:
            self._kept[key] = scores
            self._rows += len(scores)
            while self._rows > self._max_rows:
                _, dropped = self._kept.popitem(last=False)
                self._rows -= len(dropped)
        return scores
