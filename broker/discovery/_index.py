"""The search index: tools in an in-memory SQLite FTS5 table, ranked by BM25.

Theory of operation
-------------------
Each tool is one row of an FTS5 table (SQLite ships with CPython: nothing to download, no
hand-rolled scorer) with five columns, ranked by FTS5's ``bm25()`` with a weight per column
(:class:`Weights`):

* ``name``   - the registered tool name split into words (``ExportAsPDF`` -> ``export as pdf``),
* ``app``    - the app label split the same way,
* ``title``  - the tool's title,
* ``description`` - its description,
* ``params`` - parameter names (split) with their descriptions and enum values, nested
  objects and array items included.

The ``porter unicode61`` tokenizer lower-cases, folds diacritics and stems (``cropping``
finds ``crop``). A query is cut into words (``_text``), which are searched in one FTS5 query;
the words the thesaurus relates to them (``_thesaurus``) are searched in a second one whose
BM25 score counts at ``Weights.expansion`` (0 turns the thesaurus off, phrases included; the
words of an idiom such as "get rid of" are replaced by what it means). A tool's score is the
sum, multiplied by an *app prior*: a second FTS5 table holds one row per app label with all
its tools' text (rewritten, by rowid, in the same transaction as the tools' rows), and a
tool's score is multiplied by ``1 + Weights.app_prior * app / best``, its app's BM25 score
for the same words over the best app's (a query that says "song" or "slide" favours that
app's tools even when the right tool's text lacks the word). Results are ordered by score,
ties by agent-facing name, so they are deterministic.

Updates are incremental: :meth:`ToolIndex.replace_all` compares the new tool list with what is
indexed and only deletes and inserts the rows that changed, so it is cheap to call after every
registry change; :meth:`ToolIndex.sync` does that when the registry's ``version`` moved.
Everything is synchronous and quick enough for the trio thread to call directly: about 1.5 ms
per query for a few hundred tools, 15 ms for 10,000 (BENCHMARKS.md section 6).

Optional semantic ranking (a :class:`~._semantic.SemanticReranker`, off by default) makes
the search hybrid: BM25's best :data:`~._semantic.CANDIDATES` hits and the
:data:`~._semantic.DENSE` tools closest to the query by embedding (of the ``app`` asked for,
if any) are ordered by a blend of their BM25 score (0 for a tool BM25 did not match) and the
embedding similarity; BM25's hits after them keep BM25's order. Every hit's ``score`` is then
on the blend's scale (``bm25 / best_bm25``, plus the semantic part for the candidates), and
hits are ordered by it. The dense candidates' :class:`SearchHit` fields come from a snapshot
of every tool's fields (:class:`PreparedSearch` keeps it), taken on the index's thread when
the index changed since the last search, so the semantic step may run in another thread.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, Protocol

import attrs

from app_client.protocol import ToolSpec

from ._semantic import Pool, SemanticReranker, tool_text
from ._text import MAX_QUERY_CHARS, match_expression, query_words, schema_text, split_words
from ._thesaurus import rewrite

__all__ = ["Weights", "DEFAULT_WEIGHTS", "IndexedTool", "SearchHit", "PreparedSearch", "ToolIndex", "DEFAULT_LIMIT",
           "MAX_LIMIT"]

DEFAULT_LIMIT: Final = 5
MAX_LIMIT: Final = 50
#: Indexed parameter text per tool is cut to this many characters.
_MAX_PARAM_TEXT: Final = 8000


@attrs.frozen
class Weights:
    """BM25 column weights, how much a thesaurus word counts against a query word, and how
    much the query's best-matching app raises its tools (``app_prior``, 0: not at all)."""

    name: float = 10.0
    app: float = 2.0
    title: float = 5.0
    description: float = 1.0
    params: float = 1.0
    expansion: float = 0.8
    app_prior: float = 1.0

    def columns(self) -> tuple[float, float, float, float, float]:
        return (self.name, self.app, self.title, self.description, self.params)


DEFAULT_WEIGHTS: Final = Weights()


@attrs.frozen
class IndexedTool:
    """One tool as the index holds it: agent-facing name, app label, the app's spec."""

    agent_name: str
    app: str
    spec: ToolSpec


@attrs.frozen
class SearchHit:
    """One search result. ``score`` is relevance, higher is better; compare within one query."""

    agent_name: str
    app: str
    description: str
    input_schema: dict[str, Any]
    score: float
    title: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON object ``search_tools`` returns for this hit."""
        out: dict[str, Any] = {"name": self.agent_name, "app": self.app}
        if self.title:
            out["title"] = self.title
        out["description"] = self.description
        out["inputSchema"] = self.input_schema
        return out


@attrs.frozen
class _HitFields:
    """What a dense candidate's :class:`SearchHit` and text are made of, copied at indexing."""

    name: str
    app: str
    description: str
    input_schema: dict[str, Any]
    title: str | None

    @classmethod
    def of(cls, tool: IndexedTool) -> _HitFields:
        spec = tool.spec
        return cls(spec.name, tool.app, spec.description, spec.input_schema, spec.title)

    def text(self) -> str:
        return tool_text(self.name, self.description or "", self.title)

    def hit(self, agent_name: str, score: float) -> SearchHit:
        return SearchHit(agent_name, self.app, self.description, self.input_schema, score, self.title)


class _LabelledInstance(Protocol):
    @property
    def label(self) -> str: ...


class _RegisteredToolLike(Protocol):
    @property
    def agent_name(self) -> str: ...
    @property
    def spec(self) -> ToolSpec: ...
    @property
    def instance(self) -> _LabelledInstance: ...


class _RegistryLike(Protocol):
    @property
    def version(self) -> int: ...
    def tools(self) -> Sequence[_RegisteredToolLike]: ...


#: Each tool matching a query, with its BM25 score under the column weights (see _bm25).
_TOOL_SCORES: Final = "SELECT agent_name, bm25(tools, 0.0, ?, ?, ?, ?, ?) FROM tools WHERE tools MATCH ?"
#: Each app row matching a query, with its BM25 score (the app prior).
_APP_SCORES: Final = "SELECT label, bm25(apps) FROM apps WHERE apps MATCH ?"


def _row(tool: IndexedTool) -> tuple[str, str, str, str, str, str]:
    spec = tool.spec
    return (
        tool.agent_name,
        " ".join(split_words(spec.name)),
        " ".join(split_words(tool.app)),
        spec.title or "",
        spec.description or "",
        schema_text(spec.input_schema)[:_MAX_PARAM_TEXT],
    )


def _text(tool: IndexedTool) -> str:
    """What the semantic re-ranker embeds for a tool."""
    return tool_text(tool.spec.name, tool.spec.description or "", tool.spec.title)


class ToolIndex:
    """A BM25 index of tools, searched with free text.

    Not thread-safe: use it from one thread (the daemon's trio thread).
    """

    def __init__(self, weights: Weights = DEFAULT_WEIGHTS, *, reranker: SemanticReranker | None = None) -> None:
        self.weights = weights
        #: Semantic re-ranking of the best BM25 hits; None: BM25 order only.
        self.reranker = reranker
        # Used from the trio thread only; closed by a finalizer, which may run in any thread.
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(
            "CREATE VIRTUAL TABLE tools USING fts5("
            "agent_name UNINDEXED, name, app, title, description, params, "
            "tokenize = 'porter unicode61 remove_diacritics 2')"
        )
        # One row per app label: all its tools' names, titles and descriptions (see _apply_app_prior).
        self._db.execute(
            "CREATE VIRTUAL TABLE apps USING fts5(label UNINDEXED, body, "
            "tokenize = 'porter unicode61 remove_diacritics 2')"
        )
        #: Each app label's tools' text (agent name -> text), the body of its row in ``apps``.
        self._app_texts: dict[str, dict[str, str]] = {}
        self._app_rowids: dict[str, int] = {}
        #: App labels whose row in ``apps`` is out of date (rewritten at the end of replace_all).
        self._stale_apps: set[str] = set()
        self._tools: dict[str, IndexedTool] = {}
        self._rowids: dict[str, int] = {}
        self._fields: dict[str, _HitFields] = {}
        #: A copy of ``_fields`` that is never changed, handed to hybrid searches (None: stale).
        self._snapshot: Mapping[str, _HitFields] | None = None
        #: The registry version :meth:`sync` last indexed (None: never synced).
        self.version: int | None = None

    def close(self) -> None:
        self._db.close()

    # --- contents --------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, agent_name: object) -> bool:
        return agent_name in self._tools

    def __iter__(self) -> Iterator[IndexedTool]:
        """The indexed tools, sorted by agent-facing name."""
        return iter([self._tools[name] for name in sorted(self._tools)])

    def get(self, agent_name: str) -> IndexedTool | None:
        return self._tools.get(agent_name)

    # --- updates ---------------------------------------------------------------------------

    def add(self, agent_name: str, app: str, spec: ToolSpec) -> None:
        """Index one tool, replacing any tool indexed under the same agent-facing name."""
        tool = IndexedTool(agent_name, app, spec)
        if self._tools.get(agent_name) == tool:
            return
        with self._db:
            self._delete(agent_name)
            self._insert(tool)
            self._rewrite_app_rows()

    def remove(self, agent_name: str) -> bool:
        """Drop one tool; False if it was not indexed."""
        if agent_name not in self._tools:
            return False
        with self._db:
            self._delete(agent_name)
            self._rewrite_app_rows()
        return True

    def remove_app(self, app: str) -> int:
        """Drop every tool of one app label; return how many were dropped."""
        names = [name for name, tool in self._tools.items() if tool.app == app]
        with self._db:
            for name in names:
                self._delete(name)
            self._rewrite_app_rows()
        return len(names)

    def replace_all(self, tools: Iterable[tuple[str, str, ToolSpec] | IndexedTool]) -> None:
        """Make the index hold exactly ``tools``; only rows that changed are rewritten.

        Items are ``IndexedTool`` or ``(agent_name, app_label, spec)``; a later duplicate of an
        agent-facing name wins.
        """
        wanted: dict[str, IndexedTool] = {}
        for item in tools:
            tool = item if isinstance(item, IndexedTool) else IndexedTool(*item)
            wanted[tool.agent_name] = tool
        with self._db:
            for name in [n for n in self._tools if n not in wanted]:
                self._delete(name)
            for name, tool in wanted.items():
                if self._tools.get(name) != tool:
                    self._delete(name)
                    self._insert(tool)
            self._rewrite_app_rows()

    def _rewrite_app_rows(self) -> None:
        """Rewrite the ``apps`` row of every app whose tools changed (by rowid: no scans)."""
        for label in self._stale_apps:
            rowid = self._app_rowids.pop(label, None)
            if rowid is not None:
                self._db.execute("DELETE FROM apps WHERE rowid = ?", (rowid,))
            texts = self._app_texts.get(label)
            if texts:
                cursor = self._db.execute("INSERT INTO apps (label, body) VALUES (?, ?)",
                                          (label, " ".join(texts.values())))
                assert cursor.lastrowid is not None
                self._app_rowids[label] = cursor.lastrowid
        self._stale_apps.clear()

    def sync(self, registry: _RegistryLike) -> bool:
        """Bring the index up to date with ``registry`` if its ``version`` changed.

        ``registry`` is a :class:`broker.core.registry.Registry` (or anything with ``version`` and
        ``tools()`` giving objects with ``agent_name``, ``spec`` and ``instance.label``).
        Returns True when the index was updated.
        """
        version = registry.version
        if version == self.version:
            return False
        self.replace_all(IndexedTool(t.agent_name, t.instance.label, t.spec) for t in registry.tools())
        self.version = version
        if self.reranker is not None and self.reranker.background:
            self.reranker.schedule((name, _text(tool)) for name, tool in self._tools.items())
        return True

    def _delete(self, agent_name: str) -> None:
        rowid = self._rowids.pop(agent_name, None)
        if rowid is not None:
            self._db.execute("DELETE FROM tools WHERE rowid = ?", (rowid,))
        old = self._tools.pop(agent_name, None)
        if old is not None:
            self._stale_apps.add(old.app)
            texts = self._app_texts[old.app]
            del texts[agent_name]
            if not texts:
                del self._app_texts[old.app]
            del self._fields[agent_name]
            self._snapshot = None
            if self.reranker is not None:
                self.reranker.forget(agent_name)

    def _insert(self, tool: IndexedTool) -> None:
        row = _row(tool)
        cursor = self._db.execute(
            "INSERT INTO tools (agent_name, name, app, title, description, params) VALUES (?, ?, ?, ?, ?, ?)", row
        )
        assert cursor.lastrowid is not None
        self._rowids[tool.agent_name] = cursor.lastrowid
        self._tools[tool.agent_name] = tool
        self._stale_apps.add(tool.app)
        self._app_texts.setdefault(tool.app, {})[tool.agent_name] = " ".join(row[1:5])
        self._fields[tool.agent_name] = _HitFields.of(tool)
        self._snapshot = None

    # --- queries ---------------------------------------------------------------------------

    def search(self, query: str, limit: int = DEFAULT_LIMIT, *, app: str | None = None) -> list[SearchHit]:
        """The best ``limit`` tools for ``query``, best first; [] when nothing matches.

        ``limit`` is clamped to 0..:data:`MAX_LIMIT` (a non-number means the default);
        ``app`` keeps only that app label's tools. Never raises for any query text.
        """
        return self.prepare(query, limit, app=app).finish()

    def prepare(self, query: str, limit: int = DEFAULT_LIMIT, *, app: str | None = None) -> PreparedSearch:
        """:meth:`search` up to the semantic ranking, which :meth:`PreparedSearch.finish`
        does: it touches only the re-ranker (thread-safe) and what this step copied (or, for
        the snapshot of every tool's fields, what is never changed), so it may run in a worker
        thread while the index changes."""
        try:
            limit = max(0, min(int(limit), MAX_LIMIT))
        except (TypeError, ValueError, OverflowError):
            limit = DEFAULT_LIMIT
        words = query_words(query) if isinstance(query, str) else []
        if not words or limit == 0 or not self._tools:
            return PreparedSearch(query, [], limit)
        extra: list[str] = []
        if self.weights.expansion > 0:
            words, extra = rewrite(words, split_words(query[:MAX_QUERY_CHARS]))
        scores = self._scores(_TOOL_SCORES, self.weights.columns(), words, extra)
        if self.weights.app_prior > 0 and scores:
            self._apply_app_prior(scores, words, extra)
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
        wanted = limit if self.reranker is None else max(limit, self.reranker.candidates)
        hits: list[SearchHit] = []
        for name, score in ranked:
            tool = self._tools[name]
            if app is not None and tool.app != app:
                continue
            spec = tool.spec
            hits.append(SearchHit(name, tool.app, spec.description, spec.input_schema, score, spec.title))
            if len(hits) == wanted:
                break
        if self.reranker is None:
            return PreparedSearch(query, hits, limit)
        texts = [_text(self._tools[h.agent_name]) for h in hits[: self.reranker.candidates]]
        if self.reranker.dense <= 0:
            if not hits:
                return PreparedSearch(query, hits, limit)
            return PreparedSearch(query, hits, limit, self.reranker, texts)
        if self._snapshot is None:
            self._snapshot = dict(self._fields)
        return PreparedSearch(query, hits, limit, self.reranker, texts, self._snapshot, scores, app)

    def _apply_app_prior(self, scores: dict[str, float], words: list[str], extra: list[str]) -> None:
        """Raise each hit by how well the query matches its app as a whole, in place.

        A query's words often name the kind of app more than the tool ("turn the *music*
        down", "*slide*"): the app's row, all its tools' text in one document, matches them
        even when the right tool's own text does not. A hit's score is multiplied by
        ``1 + app_prior * app_score / best_app_score``, so only tools that matched are moved,
        and most of all within the app the query is about.
        """
        prior = self._scores(_APP_SCORES, (), words, extra)
        best = max(prior.values(), default=0.0)
        if best <= 0:
            return
        for name in scores:
            scores[name] *= 1.0 + self.weights.app_prior * prior.get(self._tools[name].app, 0.0) / best

    def _scores(self, sql: str, columns: tuple[float, ...], words: list[str], extra: list[str]) -> dict[str, float]:
        """BM25 relevance (positive, higher is better) of each row ``sql`` matches for ``words``,
        plus ``Weights.expansion`` times that for the thesaurus words ``extra``. ``columns``:
        the column weights ``sql`` takes before the MATCH expression."""
        scores = self._bm25(sql, columns, words, 1.0)
        for key, score in self._bm25(sql, columns, extra, self.weights.expansion).items():
            scores[key] = scores.get(key, 0.0) + score
        return scores

    def _bm25(self, sql: str, columns: tuple[float, ...], words: list[str], factor: float) -> dict[str, float]:
        match = match_expression(words)
        if match is None:
            return {}
        try:
            rows = self._db.execute(sql, (*columns, match)).fetchall()
        except sqlite3.Error:  # pragma: no cover - quoting makes this unreachable
            return {}
        # FTS5's bm25() is negative, more negative is better; a tiny IDF can round to -0.0.
        return {key: -float(score) * factor for key, score in rows if math.isfinite(score)}


@attrs.define
class PreparedSearch:
    """BM25's hits for a query, with what the re-ranking needs (see :meth:`ToolIndex.prepare`)."""

    query: str
    hits: list[SearchHit]
    limit: int
    reranker: SemanticReranker | None = None
    #: The tool texts of the re-ranking candidates (the first ``reranker.candidates`` hits).
    texts: list[str] = attrs.Factory(list)
    #: Hybrid search: every indexed tool's hit fields (a mapping nobody changes)...
    pool: Mapping[str, _HitFields] | None = None
    #: ...every matching tool's BM25 score (this search's own dict)...
    bm25: dict[str, float] = attrs.Factory(dict)
    #: ...and the app label asked for (dense candidates are filtered by it too).
    app: str | None = None

    @property
    def needs_rerank(self) -> bool:
        """Whether :meth:`finish` embeds the query (slow: run it in a worker thread)."""
        return self.reranker is not None and (bool(self.hits) or self.pool is not None)

    def finish(self) -> list[SearchHit]:
        """The final hits: ranked with the embeddings when there is a re-ranker (embeds the query)."""
        hits = self.hits
        if self.reranker is not None and (hits or self.pool is not None):
            head, tail = hits[: len(self.texts)], hits[len(self.texts) :]
            order = self.reranker.hybrid(
                self.query, [(h.agent_name, text, h.score) for h, text in zip(head, self.texts, strict=True)],
                self._pool_lookup() if self.pool is not None else None,
            )
            best = head[0].score if head and head[0].score > 0 else 1.0
            by_name = {h.agent_name: h for h in hits}
            ranked: list[SearchHit] = []
            for name, blended in order:
                hit = by_name.get(name)
                if hit is not None:
                    ranked.append(attrs.evolve(hit, score=blended))
                elif self.pool is not None:
                    ranked.append(self.pool[name].hit(name, blended))
            taken = {name for name, _ in order}
            ranked += [attrs.evolve(h, score=h.score / best) for h in tail if h.agent_name not in taken]
            # stable: a candidate before a BM25-only hit of the same score, as before the merge
            hits = sorted(ranked, key=lambda h: -h.score)
        return hits[: self.limit]

    def _pool_lookup(self) -> Pool:
        pool, bm25, app = self.pool, self.bm25, self.app
        assert pool is not None

        def lookup(agent_name: str) -> tuple[str, float] | None:
            fields = pool.get(agent_name)
            if fields is None or (app is not None and fields.app != app):
                return None
            return fields.text(), bm25.get(agent_name, 0.0)

        return lookup
