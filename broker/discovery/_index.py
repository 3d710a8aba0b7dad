"""The search index: tools in an in-memory SQLite FTS5 table, ranked by BM25.

Theory of operation
-------------------
Each tool is one row of an FTS5 table (SQLite ships with CPython: nothing to download, no
hand-rolled scorer) with seven columns, ranked by FTS5's ``bm25()`` with a weight per column
(:class:`Weights`):

* ``name``   - the registered tool name split into words (``ExportAsPDF`` -> ``export as pdf``),
* ``app``    - the app label split the same way,
* ``title``  - the tool's title,
* ``description`` - its description,
* ``params`` - parameter names (split) with their descriptions and enum values, nested
  objects and array items included,
* ``action`` - what the tool does: the first word of its name, by the convention of verb-first
  tool names (``CreateEvent`` -> ``create``), so the query's operation is weighed against each
  neighbour's ("complete the task" vs ``CreateTask`` and ``CompleteTask``),
* ``requests`` - the tool's ``exampleRequests``: what users typically say when they want it,
  written by its app's author (an app's own words for a request its names do not use).

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

Typo tolerance and never an empty answer (:meth:`ToolIndex.prepare`): a query word that
neither the index's vocabulary (``_fuzzy``: every indexed word and the thesaurus's), nor
FTS5's stemmer, nor the English lexicon (``_lexicon``: a real word such as "parse" or "bank"
is never a typo) knows is replaced by its nearest known words, by edit distance, when a tool of
the apps the rest of the query is about has the correction. When no word matches, the search falls back to word stems
as prefixes (raised by the app prior), then to the most likely tools (read-only first, every
app in turn). :attr:`PreparedSearch.match` says which step answered; each hit's
``confidence`` (high, medium, low) and the answer's :attr:`PreparedSearch.no_clear_fit` come
from small models calibrated on the development sets (``_calibration``: the share of the
query's words a tool contains, its embedding similarity, the share of query words no tool
knows).

Updates are incremental: :meth:`ToolIndex.replace_all` compares the new tool list with what is
indexed and only deletes and inserts the rows that changed, so it is cheap to call after every
registry change; :meth:`ToolIndex.sync` does that when the registry's ``version`` moved.
Everything is synchronous: about 1 ms per query for a few hundred tools, ~2.5 ms for 10,000
(each query word's scores are kept until a row changes, ``_word_scores``; BENCHMARKS.md section
6), so the daemon searches in a worker thread (``broker.mcp.meta``);
the index is not thread-safe, its owner serialises access.

The hits and the prepared search (:class:`SearchHit`, :class:`PreparedSearch`) live in
``_hits``.

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

import heapq
import math
import re
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Final, Protocol

import attrs

from app_client.protocol import ToolSpec

from ._fuzzy import Vocabulary, light_stem, max_distance
from ._hits import CONFIDENCE_LEVELS, MATCH_KINDS, HitFields, IndexedTool, PreparedSearch, SearchHit
from ._lexicon import is_word
from ._semantic import SemanticReranker, params_text, tool_text
from ._text import MAX_QUERY_CHARS, match_expression, prefix_expression, query_words, schema_text, split_words
from ._thesaurus import rewrite, synonyms
from ._thesaurus import words as thesaurus_words
from ._word_scores import WordScores

__all__ = ["Weights", "DEFAULT_WEIGHTS", "IndexedTool", "SearchHit", "PreparedSearch", "ToolIndex", "DEFAULT_LIMIT",
           "MAX_LIMIT", "MATCH_KINDS", "CONFIDENCE_LEVELS"]

DEFAULT_LIMIT: Final = 5
MAX_LIMIT: Final = 50
#: Indexed parameter text per tool is cut to this many characters.
_MAX_PARAM_TEXT: Final = 8000
#: A typo correction must be in an app scoring at least this share of the best app for the
#: rest of the query (see ToolIndex._keep_coherent).
_COHERENT: Final = 0.15


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
    action: float = 6.0
    #: Fitted on blind10 and blind11 with typical requests written blind (``fit.py --requests``,
    #: round 13): from 0.5 to 5, hybrid MRR within 0.006, BM25 alone within 0.08; 2 near the best on both.
    requests: float = 2.0

    def columns(self) -> tuple[float, float, float, float, float, float, float]:
        return (self.name, self.app, self.title, self.description, self.params, self.action, self.requests)


DEFAULT_WEIGHTS: Final = Weights()


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


#: A run of letters: a word the typo correction may have replaced (see :func:`_corrected_text`).
_LETTERS: Final = re.compile(r"[^\W\d_]+")
#: Each tool matching a query, with its BM25 score under the column weights (see _bm25).
_TOOL_SCORES: Final = "SELECT agent_name, bm25(tools, 0.0, ?, ?, ?, ?, ?, ?, ?) FROM tools WHERE tools MATCH ?"
#: Whether any tool matches one word (a word FTS5's stemmer knows is not a typo).
_ANY_TOOL: Final = "SELECT 1 FROM tools WHERE tools MATCH ? LIMIT 1"
#: The tools that match (read lazily: a caller may stop at the first it wants).
_TOOL_NAMES: Final = "SELECT agent_name FROM tools WHERE tools MATCH ?"
#: Each app row matching a query, with its BM25 score (the app prior).
_APP_SCORES: Final = "SELECT label, bm25(apps) FROM apps WHERE apps MATCH ?"


def _row(tool: IndexedTool) -> tuple[str, str, str, str, str, str, str, str]:
    spec = tool.spec
    name = split_words(spec.name)
    return (
        tool.agent_name,
        " ".join(name),
        " ".join(split_words(tool.app)),
        spec.title or "",
        spec.description or "",
        schema_text(spec.input_schema)[:_MAX_PARAM_TEXT],
        _action(name),
        "; ".join(spec.example_requests or ()),
    )


def _action(name: list[str]) -> str:
    """What a tool does, by the convention of verb-first tool names: the first word of its
    name (``CreateEvent`` -> ``create``, ``list_files`` -> ``list``)."""
    return name[0] if name else ""


def _vocabulary_words(row: tuple[str, ...]) -> list[str]:
    """The words of a tool's indexed columns (``_row`` without the agent name), for typo correction."""
    return split_words(" ".join(row[1:]))


def _read_only(tool: IndexedTool) -> bool:
    annotations = tool.spec.annotations
    return isinstance(annotations, dict) and annotations.get("readOnlyHint") is True


def _substitute(words: list[str], corrections: Mapping[str, list[str]], *, every: bool) -> list[str]:
    """``words`` with each corrected word replaced by its corrections (``every``, duplicates
    dropped) or by the first (keeps positions, for phrase lookup)."""
    if every:
        return list(dict.fromkeys(c for w in words for c in corrections.get(w, [w])))
    return [corrections[w][0] if w in corrections else w for w in words]


def _corrected_text(text: str, corrections: Mapping[str, list[str]]) -> str | None:
    """``text`` with each corrected word replaced by its first correction (None: none was);
    what the semantic side embeds (fitted on the development sets: typo queries' recall@1
    0.875 -> 0.938, the other classes unchanged)."""
    if not corrections:
        return None
    return _LETTERS.sub(lambda m: corrections.get(m.group(0).lower(), [m.group(0)])[0], text)


def _text(tool: IndexedTool) -> str:
    """What the semantic re-ranker embeds for a tool."""
    return tool_text(tool.spec.name, tool.spec.description or "", tool.spec.title, tool.spec.example_requests)


def _embedding_texts(tools: Iterable[IndexedTool]) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """What the semantic re-ranker embeds for ``tools``: ``(agent_name, text)`` of each, and the
    second text of each tool that has parameters (see ``SemanticReranker.embed``)."""
    texts: list[tuple[str, str]] = []
    params: dict[str, str] = {}
    for tool in tools:
        texts.append((tool.agent_name, _text(tool)))
        second = params_text(tool.spec.name, tool.spec.title, tool.spec.input_schema)
        if second is not None:
            params[tool.agent_name] = second
    return texts, params


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
            "agent_name UNINDEXED, name, app, title, description, params, action, requests, "
            "tokenize = 'porter unicode61 remove_diacritics 2')"
        )
        # One row per app label: all its tools' names, titles, descriptions and typical requests
        # (see _apply_app_prior).
        self._db.execute(
            "CREATE VIRTUAL TABLE apps USING fts5(label UNINDEXED, body, "
            "tokenize = 'porter unicode61 remove_diacritics 2')"
        )
        #: Each query word's scores, kept between searches; cleared when any row changes.
        self._word_scores = WordScores(self._db)
        #: Each app label's tools' text (agent name -> text), the body of its row in ``apps``.
        self._app_texts: dict[str, dict[str, str]] = {}
        self._app_rowids: dict[str, int] = {}
        #: App labels whose row in ``apps`` is out of date (rewritten at the end of replace_all).
        self._stale_apps: set[str] = set()
        self._tools: dict[str, IndexedTool] = {}
        #: Every word of the indexed text, and the thesaurus's, for typo correction (see _fuzzy).
        self._vocabulary = Vocabulary(thesaurus_words())
        #: Light stems of each rated tool's name, title and description (filled when first rated).
        self._stems: dict[str, frozenset[str]] = {}
        self._rowids: dict[str, int] = {}
        self._fields: dict[str, HitFields] = {}
        #: A copy of ``_fields`` that is never changed, handed to hybrid searches (None: stale).
        self._snapshot: Mapping[str, HitFields] | None = None
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
        return self.remove_many([name for name, tool in self._tools.items() if tool.app == app])

    def remove_many(self, agent_names: Iterable[str]) -> int:
        """Drop these tools (names not indexed are skipped) in one transaction, each app's row
        rewritten once; return how many were dropped. (One :meth:`remove` at a time rewrites
        the app's row each time: 250 tools of one app took ~130 ms at 10,000 tools, ~17 ms so.)"""
        names = [name for name in dict.fromkeys(agent_names) if name in self._tools]
        with self._db:
            for name in names:
                self._delete(name)
            self._rewrite_app_rows()
        return len(names)

    def replace_all(self, tools: Iterable[tuple[str, str, ToolSpec] | IndexedTool]) -> list[IndexedTool]:
        """Make the index hold exactly ``tools``; only rows that changed are rewritten. Returns
        the tools inserted: new ones and changed ones.

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
            inserted = [tool for name, tool in wanted.items() if self._tools.get(name) != tool]
            for tool in inserted:
                self._delete(tool.agent_name)
                self._insert(tool)
            self._rewrite_app_rows()
        return inserted

    def _rewrite_app_rows(self) -> None:
        """Rewrite the ``apps`` row of every app whose tools changed (by rowid: no scans)."""
        # Every change of a row ends here, its app stale: every kept BM25 score (tools' and
        # apps') depends on the whole table.
        if self._stale_apps:
            self._word_scores.clear()
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
        self.sync_tools(version, [IndexedTool(t.agent_name, t.instance.label, t.spec) for t in registry.tools()])
        return True

    def sync_tools(self, version: int, tools: Iterable[IndexedTool]) -> None:
        """:meth:`sync` with the registry's tools read beforehand (by the registry's thread),
        so the index may be updated in another thread."""
        inserted = self.replace_all(tools)
        self.version = version
        if self.reranker is not None and self.reranker.background:
            # only the new and changed tools: the rest have their vectors or are queued (at
            # 10,000 tools, making every tool's text again took ~28 ms of each sync)
            self.reranker.schedule(*_embedding_texts(inserted))

    def embed_now(self) -> None:
        """Embed every indexed tool's texts now, as the daemon's background thread would after
        :meth:`sync_tools` (benchmarks and tests; needs a re-ranker)."""
        assert self.reranker is not None
        self.reranker.embed(*_embedding_texts(self._tools.values()))

    def _delete(self, agent_name: str) -> None:
        rowid = self._rowids.pop(agent_name, None)
        if rowid is not None:
            self._db.execute("DELETE FROM tools WHERE rowid = ?", (rowid,))
        old = self._tools.pop(agent_name, None)
        if old is not None:
            self._vocabulary.discard(_vocabulary_words(_row(old)))
            self._stems.pop(agent_name, None)
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
            "INSERT INTO tools (agent_name, name, app, title, description, params, action, requests) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row
        )
        assert cursor.lastrowid is not None
        self._rowids[tool.agent_name] = cursor.lastrowid
        self._tools[tool.agent_name] = tool
        self._vocabulary.add(_vocabulary_words(row))
        self._stale_apps.add(tool.app)
        self._app_texts.setdefault(tool.app, {})[tool.agent_name] = " ".join((*row[1:5], row[7]))
        self._fields[tool.agent_name] = HitFields.of(tool)
        self._snapshot = None

    # --- queries ---------------------------------------------------------------------------

    def search(self, query: str, limit: int = DEFAULT_LIMIT, *, app: str | None = None) -> list[SearchHit]:
        """The best ``limit`` tools for ``query``, best first.

        Never empty for a query with any non-space character while the index holds a tool (of
        ``app``, if given): when no word matches, looser matching and then the best apps' or
        the most likely tools answer (see :meth:`prepare`), rated ``"low"``. [] for an empty
        or blank query, ``limit`` 0 or an empty index. ``limit`` is clamped to
        0..:data:`MAX_LIMIT` (a non-number means the default); ``app`` keeps only that app
        label's tools. Never raises for any query text.
        """
        return self.prepare(query, limit, app=app).finish()

    def prepare(self, query: str, limit: int = DEFAULT_LIMIT, *, app: str | None = None) -> PreparedSearch:
        """:meth:`search` up to the semantic ranking, which :meth:`PreparedSearch.finish`
        does: it touches only the re-ranker (thread-safe) and what this step copied (or, for
        the snapshot of every tool's fields, what is never changed), so it may run in a worker
        thread while the index changes.

        The answer comes from the first of these that finds a tool (``PreparedSearch.match``
        says which, see :data:`MATCH_KINDS`): the query's words, with unknown words replaced
        by the index's nearest words (typo correction) and the thesaurus's words at a
        discount; loose matching (:meth:`_loose`), raised by the apps its words match best;
        every tool, read-only ones first, taking turns between apps.
        """
        try:
            limit = max(0, min(int(limit), MAX_LIMIT))
        except (TypeError, ValueError, OverflowError):
            limit = DEFAULT_LIMIT
        if not isinstance(query, str):
            return PreparedSearch(query, [], limit)
        text = query[:MAX_QUERY_CHARS]
        if not text.strip() or limit == 0 or not self._tools:
            return PreparedSearch(query, [], limit)
        typed = query_words(text)
        all_words = split_words(text)
        corrections = self._corrections(typed)
        unknown = self._unknown_share(typed, corrections)
        words = _substitute(typed, corrections, every=True)
        all_words = _substitute(all_words, corrections, every=False)
        extra: list[str] = []
        if self.weights.expansion > 0 and words:
            words, extra = rewrite(words, all_words)
        scores = self._scores(_TOOL_SCORES, self.weights.columns(), words, extra) if words else {}
        if self.weights.app_prior > 0 and scores:
            self._apply_app_prior(scores, words, extra)
        wanted = limit if self.reranker is None else max(limit, self.reranker.candidates)
        hits = self._hits(scores, wanted, app)
        match = "corrected" if corrections else "words"
        if hits:
            hits = self._rated(hits, words, match)
        else:
            hits, match = self._fallback(typed, wanted, app)
        if self.reranker is None:
            return PreparedSearch(query, hits, limit, match=match, unknown=unknown)
        # A fallback's hits are no BM25 candidates: the dense ones go first, they come after.
        bm25_hits = hits if match in ("words", "corrected") else []
        texts = [_text(self._tools[h.agent_name]) for h in bm25_hits[: self.reranker.candidates]]
        if self.reranker.dense <= 0:
            if not bm25_hits:
                return PreparedSearch(query, hits, limit, match=match, unknown=unknown)
            return PreparedSearch(query, hits, limit, self.reranker, texts, match=match, unknown=unknown,
                                  embed_text=_corrected_text(text, corrections))
        if self._snapshot is None:
            self._snapshot = dict(self._fields)
        return PreparedSearch(query, hits, limit, self.reranker, texts, self._snapshot, scores, app, match=match,
                              unknown=unknown, embed_text=_corrected_text(text, corrections))

    def embed_text(self, query: str) -> str:
        """The text a hybrid search of ``query`` embeds: the query (cut to its first
        :data:`MAX_QUERY_CHARS`) with its typos corrected as :meth:`prepare` corrects them, so
        the daemon can embed it alongside BM25, once (``PreparedSearch.embedded_as``)."""
        text = query[:MAX_QUERY_CHARS]
        return _corrected_text(text, self._corrections(query_words(text))) or text

    def _unknown_share(self, words: list[str], corrections: Mapping[str, list[str]]) -> float:
        """The share of the query's words that no tool has in any form and that are no typo
        of a word one has ("thermostat", "parcel"): a query about something no app does has many."""
        if not words:
            return 0.0
        unknown = [w for w in words if w.isalpha() and w not in corrections and w not in self._vocabulary
                   and not self._knows(w)]
        return len(unknown) / len(words)

    def _hits(self, scores: Mapping[str, float], wanted: int, app: str | None) -> list[SearchHit]:
        """The best ``wanted`` of ``scores`` (of ``app``, if given) as hits, ties by name."""
        def order(item: tuple[str, float]) -> tuple[float, str]:
            return -item[1], item[0]

        # the first ``wanted`` without sorting every match (thousands at 10,000 tools)
        ranked = sorted(scores.items(), key=order) if app is not None else heapq.nsmallest(wanted, scores.items(), key=order)
        hits: list[SearchHit] = []
        for name, score in ranked:
            tool = self._tools[name]
            if app is not None and tool.app != app:
                continue
            spec = tool.spec
            hits.append(SearchHit(name, tool.app, spec.description, spec.input_schema, score, spec.title,
                                  written=bool(spec.example_requests)))
            if len(hits) == wanted:
                break
        return hits

    def _corrections(self, words: list[str], *, loose: bool = False) -> dict[str, list[str]]:
        """The nearest known words of each query word that neither the index nor the English
        lexicon knows (a typo; see ``_lexicon``)."""
        out: dict[str, list[str]] = {}
        for word in words:
            if word in self._vocabulary or not word.isalpha():
                continue
            if is_word(word):  # a real word the tools lack ("parse", "bank"), never a typo
                continue
            limit = max_distance(word, loose=loose)
            if not loose and self._knows(word):  # a form FTS5's stemmer matches ("cropping")
                continue
            closest = self._vocabulary.closest(word, limit)
            if closest:
                out[word] = closest
        if out and not loose:
            self._keep_coherent(out, words)
        return out

    def _keep_coherent(self, corrections: dict[str, list[str]], words: list[str]) -> None:
        """Drop, in place, corrections that none of the apps the rest of the query is about has.

        A real word the index lacks looks like a typo too ("team" is one edit from "teal",
        "lunch" from "launch"); a correction that agrees with the rest of the query is likely
        right, one that does not is likely a different word. The rest is the query's other
        words, corrected ("paus the musik": "pause" is checked against "music"); it agrees
        when an app that matches it within half the best app's score has a tool with the
        corrected word (see :meth:`_in_apps`). A query with no other word keeps it.
        """
        apps_of: dict[str, set[str]] = {}

        def apps(terms: list[str]) -> set[str]:
            key = " ".join(terms)
            if key not in apps_of:
                prior = self._scores(_APP_SCORES, (), *rewrite(terms)) if terms else {}
                best = max(prior.values(), default=0.0)
                apps_of[key] = {label for label, score in prior.items() if best > 0 and score >= _COHERENT * best}
            return apps_of[key]

        before = dict(corrections)
        for word in before:
            rest = _substitute([w for w in words if w != word], before, every=True)
            about = apps(rest)
            if not about:
                continue
            kept = [c for c in before[word] if self._in_apps(c, about)]
            if kept:
                corrections[word] = kept
            else:
                del corrections[word]

    def _in_apps(self, word: str, apps: set[str]) -> bool:
        """Whether a tool of ``apps`` has ``word`` (in any column) or, for a word no tool has,
        a synonym of it from the thesaurus ("photo": image); stops at the first."""
        match = match_expression([word] if self._knows(word) else list(synonyms(word)))
        if match is None:
            return False
        for (name,) in self._db.execute(_TOOL_NAMES, (match,)):
            if self._tools[name].app in apps:
                return True
        return False

    def _knows(self, word: str) -> bool:
        match = match_expression([word])
        return match is not None and self._db.execute(_ANY_TOOL, (match,)).fetchone() is not None

    def _rated(self, hits: list[SearchHit], words: list[str], match: str) -> list[SearchHit]:
        """``hits`` with their ``confidence``: how many of the query's words (after typo
        correction, idioms replaced) the tool's name, title, description, typical requests and
        app contain, by light stem. ``high``: at least 60 % of them, a score at least half the best one, and
        no word corrected; ``medium``: at least 30 %; ``low``: fewer (found through the
        thesaurus or parameter text)."""
        stems = {light_stem(w) for w in words}
        if not stems:
            return [attrs.evolve(hit, confidence="low", coverage=0.0) for hit in hits]
        best = hits[0].score
        rated: list[SearchHit] = []
        for hit in hits:
            own = self._stems.get(hit.agent_name)
            if own is None:
                tool = self._tools.get(hit.agent_name)
                requests = " ".join(tool.spec.example_requests or ()) if tool is not None else ""
                text = f"{hit.agent_name} {hit.title or ''} {hit.description} {requests}"
                own = self._stems[hit.agent_name] = frozenset(light_stem(w) for w in split_words(text))
            share = len(stems & own) / len(stems)
            if share >= 0.6 and hit.score >= 0.5 * best and match == "words":
                level = "high"
            elif share >= 0.3:
                level = "medium"
            else:
                level = "low"
            rated.append(attrs.evolve(hit, confidence=level, coverage=share))
        return rated

    def _fallback(self, words: list[str], wanted: int, app: str | None) -> tuple[list[SearchHit], str]:
        """Hits (all rated ``low``, scores below 0) for a query none of whose words matched."""
        expression = self._loose(words)
        if expression is not None:
            scores = self._bm25_expression(_TOOL_SCORES, self.weights.columns(), expression, 1.0)
            if self.weights.app_prior > 0 and scores:  # the apps the loose words match best
                self._raise_by_app(scores, self._bm25_expression(_APP_SCORES, (), expression, 1.0))
            hits = self._hits(scores, wanted, app)
            if hits:
                best = hits[0].score
                return [attrs.evolve(h, score=h.score / best - 1.0, confidence="low", coverage=0.0)
                        for h in hits], "loose"
        return self._most_likely(wanted, app), "any"

    def _loose(self, words: list[str]) -> str | None:
        """An FTS5 expression for a query whose words matched nothing: each word's light stem
        (4 letters or more) as a prefix, and its corrections one edit further than usual."""
        terms = [light_stem(w) for w in words if w.isalpha()]
        terms = [t for t in terms if len(t) >= 4]
        for corrections in self._corrections(words, loose=True).values():
            terms += [light_stem(c) for c in corrections if len(light_stem(c)) >= 3]
        return prefix_expression(dict.fromkeys(terms))

    def _most_likely(self, wanted: int, app: str | None) -> list[SearchHit]:
        """Nothing matched at all: read-only tools first (safe to try), apps taking turns."""
        by_app: dict[str, list[IndexedTool]] = {}
        for tool in self._tools.values():
            if app is None or tool.app == app:
                by_app.setdefault(tool.app, []).append(tool)
        queues = [sorted(tools, key=lambda t: (not _read_only(t), t.agent_name))
                  for _, tools in sorted(by_app.items())]
        out: list[SearchHit] = []
        turn = 0
        while len(out) < wanted and any(turn < len(q) for q in queues):
            for queue in queues:
                if turn < len(queue):
                    out.append(self._fallback_hit(queue[turn], -3.0 - len(out) / 1000))
            turn += 1
        return out[:wanted]

    def _fallback_hit(self, tool: IndexedTool, score: float) -> SearchHit:
        spec = tool.spec
        return SearchHit(tool.agent_name, tool.app, spec.description, spec.input_schema, score, spec.title, "low",
                         coverage=0.0, written=bool(spec.example_requests))

    def _apply_app_prior(self, scores: dict[str, float], words: list[str], extra: list[str]) -> None:
        """Raise each hit by how well the query matches its app as a whole, in place.

        A query's words often name the kind of app more than the tool ("turn the *music*
        down", "*slide*"): the app's row, all its tools' text in one document, matches them
        even when the right tool's own text does not. A hit's score is multiplied by
        ``1 + app_prior * app_score / best_app_score``, so only tools that matched are moved,
        and most of all within the app the query is about.
        """
        self._raise_by_app(scores, self._scores(_APP_SCORES, (), words, extra))

    def _raise_by_app(self, scores: dict[str, float], prior: Mapping[str, float]) -> None:
        best = max(prior.values(), default=0.0)
        if best <= 0:
            return
        raised = {app: 1.0 + self.weights.app_prior * score / best for app, score in prior.items()}
        tools = self._tools
        for name, score in scores.items():
            scores[name] = score * raised.get(tools[name].app, 1.0)

    def _scores(self, sql: str, columns: tuple[float, ...], words: list[str], extra: list[str]) -> dict[str, float]:
        """BM25 relevance (positive, higher is better) of each row ``sql`` matches for ``words``,
        plus ``Weights.expansion`` times that for the thesaurus words ``extra``. ``columns``:
        the column weights ``sql`` takes before the MATCH expression."""
        scores = self._bm25(sql, columns, words, 1.0)
        for key, score in self._bm25(sql, columns, extra, self.weights.expansion).items():
            scores[key] = scores.get(key, 0.0) + score
        return scores

    def _bm25(self, sql: str, columns: tuple[float, ...], words: list[str], factor: float) -> dict[str, float]:
        return self._word_scores.summed(sql, columns, words, factor)

    def _bm25_expression(self, sql: str, columns: tuple[float, ...], match: str, factor: float) -> dict[str, float]:
        try:
            rows = self._db.execute(sql, (*columns, match)).fetchall()
        except sqlite3.Error:  # pragma: no cover - quoting makes this unreachable
            return {}
        # FTS5's bm25() is negative, more negative is better; a tiny IDF can round to -0.0.
        return {key: -float(score) * factor for key, score in rows if math.isfinite(score)}
