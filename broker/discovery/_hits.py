"""What a search answers: the hits (:class:`SearchHit`) and a prepared search
(:class:`PreparedSearch`: BM25's hits plus what the semantic re-ranking needs, finished in a
worker thread when it embeds the query), split from ``_index`` (the FTS5 index that makes
them) to keep each module small.

A finished search rates its hits with the calibrated models of ``_calibration``: each hit's
``confidence`` and the answer's :attr:`PreparedSearch.no_clear_fit` ("no tool clearly fits").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import attrs

from app_client.protocol import ToolSpec

from ._calibration import ANSWER_HITS, answer_probability, hit_probability, level, no_clear_fit
from ._semantic import Pool, SemanticReranker, tool_text
from ._text import MAX_QUERY_CHARS

if TYPE_CHECKING:
    from ._semantic import Vector

__all__ = ["IndexedTool", "SearchHit", "HitFields", "PreparedSearch", "MATCH_KINDS", "CONFIDENCE_LEVELS"]

#: How an answer's best hits were found, surest first (``PreparedSearch.match``, see _fallback):
#: the query's words (or their thesaurus words); some words only after typo correction; by
#: meaning only (the semantic extra's dense candidates); loose matching (word stems as
#: prefixes, corrections one edit further, raised by the apps they match best); nothing
#: matched: the most likely tools (read-only first, every app in turn).
MATCH_KINDS: Final = ("words", "corrected", "semantic", "loose", "any")
#: A hit's ``confidence``, highest first (see :meth:`ToolIndex._confidence`).
CONFIDENCE_LEVELS: Final = ("high", "medium", "low")


@attrs.frozen
class IndexedTool:
    """One tool as the index holds it: agent-facing name, app label, the app's spec."""

    agent_name: str
    app: str
    spec: ToolSpec


@attrs.frozen
class SearchHit:
    """One search result. ``score`` is relevance, higher is better; compare within one query.
    ``confidence`` is one of :data:`CONFIDENCE_LEVELS` (None: not rated)."""

    agent_name: str
    app: str
    description: str
    input_schema: dict[str, Any]
    score: float
    title: str | None = None
    confidence: str | None = None
    #: Share of the query's words (light stems) in the tool's name, title and description
    #: (None: not rated); what the confidence is calibrated on, not part of the answer's JSON.
    coverage: float | None = attrs.field(default=None, eq=False)
    #: Cosine similarity of query and tool by embedding (None: not computed), likewise.
    similarity: float | None = attrs.field(default=None, eq=False)
    #: Whether the tool's author wrote typical requests for it (``exampleRequests``): "no clear
    #: fit" has a threshold of its own for such tools (``_calibration``), not part of the JSON.
    written: bool = attrs.field(default=False, eq=False)

    def to_json(self) -> dict[str, Any]:
        """The JSON object ``search_tools`` returns for this hit."""
        out: dict[str, Any] = {"name": self.agent_name, "app": self.app}
        if self.title:
            out["title"] = self.title
        out["description"] = self.description
        out["inputSchema"] = self.input_schema
        if self.confidence is not None:
            out["confidence"] = self.confidence
        return out


@attrs.frozen
class HitFields:
    """What a dense candidate's :class:`SearchHit` and text are made of, copied at indexing."""

    name: str
    app: str
    description: str
    input_schema: dict[str, Any]
    title: str | None
    example_requests: list[str] | None = None

    @classmethod
    def of(cls, tool: IndexedTool) -> HitFields:
        spec = tool.spec
        return cls(spec.name, tool.app, spec.description, spec.input_schema, spec.title, spec.example_requests)

    def text(self) -> str:
        return tool_text(self.name, self.description or "", self.title, self.example_requests)

    def hit(self, agent_name: str, score: float, confidence: str | None = None) -> SearchHit:
        return SearchHit(agent_name, self.app, self.description, self.input_schema, score, self.title, confidence,
                         written=bool(self.example_requests))


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
    pool: Mapping[str, HitFields] | None = None
    #: ...every matching tool's BM25 score (this search's own dict)...
    bm25: dict[str, float] = attrs.Factory(dict)
    #: ...and the app label asked for (dense candidates are filtered by it too).
    app: str | None = None
    #: How the best hits were found, one of :data:`MATCH_KINDS` (:meth:`finish` may change it
    #: to ``"semantic"`` when a tool found by meaning alone comes first).
    match: str = "words"
    #: The share of the query's words no tool knows (see ``_calibration``).
    unknown: float = 0.0
    #: The text the query is embedded as: the query with its typos corrected ("exprot the
    #: drawing" as "export the drawing": a misspelt word is noise to the model); None: as typed.
    embed_text: str | None = None
    #: Set by :meth:`finish`: no tool clearly fits the query (see ``_calibration``).
    no_clear_fit: bool = False
    #: Set by :meth:`finish`: the calibrated probability that some tool answers the query.
    answer_probability: float | None = None

    @property
    def embedded_as(self) -> str:
        """The text :meth:`finish` embeds (``ToolIndex.embed_text`` of the query)."""
        return self.embed_text or self.query[:MAX_QUERY_CHARS]

    @property
    def needs_rerank(self) -> bool:
        """Whether :meth:`finish` embeds the query (slow: run it in a worker thread)."""
        return self.reranker is not None and (bool(self.hits) or self.pool is not None)

    def finish(self, query_vector: Vector | None = None) -> list[SearchHit]:
        """The final hits: ranked with the embeddings when there is a re-ranker (embeds the
        query, unless ``query_vector``, from :meth:`SemanticReranker.embed_query`, is given)."""
        hits = self.hits
        if self.reranker is not None and (hits or self.pool is not None):
            head, tail = hits[: len(self.texts)], hits[len(self.texts) :]
            detail = self.reranker.hybrid_detail(
                self.embedded_as, [(h.agent_name, text, h.score) for h, text in zip(head, self.texts, strict=True)],
                self._pool_lookup() if self.pool is not None else None, query_vector,
            )
            order = [(name, blended) for name, blended, _ in detail]
            best = head[0].score if head and head[0].score > 0 else 1.0
            by_name = {h.agent_name: h for h in hits}
            ranked: list[SearchHit] = []
            for name, blended, cosine in detail:
                hit = by_name.get(name)
                if hit is not None:
                    ranked.append(attrs.evolve(hit, score=blended, similarity=cosine))
                elif self.pool is not None:  # by meaning alone: no query word in the tool
                    ranked.append(attrs.evolve(self.pool[name].hit(name, blended, "low"), coverage=0.0,
                                               similarity=cosine))
            taken = {name for name, _ in order}
            # A fallback's hits (no BM25 candidates) only stand in when the dense step found none.
            if self.texts or not order:
                # after every candidate, in BM25's order: below the lowest fused score
                floor = min((score for _, score in order), default=1.0)
                scale = floor * 0.99 if floor > 0 else 1.0
                ranked += [attrs.evolve(h, score=scale * h.score / best if floor > 0 else h.score / best)
                           for h in tail if h.agent_name not in taken]
            # stable: a candidate before a BM25-only hit of the same score, as before the merge
            hits = sorted(ranked, key=lambda h: -h.score)
            lexical = by_name if self.texts else {}  # a fallback's hits matched no word
            if hits and hits[0].agent_name not in lexical:
                self.match = "semantic"
        return self.rate(hits[: self.limit])

    def rate(self, hits: list[SearchHit]) -> list[SearchHit]:
        """``hits`` (this search's, best first) with their calibrated ``confidence``; sets
        :attr:`no_clear_fit` and :attr:`answer_probability` (see ``_calibration``)."""
        if not hits:
            return hits
        first = hits[0]
        similar = [h for h in hits[:ANSWER_HITS] if h.similarity is not None]
        # the hit the answer model reads: the most similar (semantic) or the first (BM25 only)
        deciding = max(similar, key=lambda h: h.similarity or 0.0) if first.similarity is not None and similar \
            else None
        similarity = deciding.similarity if deciding is not None else None
        probability = answer_probability(similarity, first.coverage or 0.0, self.unknown)
        self.answer_probability = probability
        written = (deciding or first).written
        self.no_clear_fit = self.match == "any" or no_clear_fit(probability, similarity is not None, written)
        rated = []
        for i, hit in enumerate(hits):
            p = hit_probability(hit.similarity, hit.coverage or 0.0, i == 0, self.unknown)
            rated.append(attrs.evolve(hit, confidence="low" if self.no_clear_fit else level(p, hit.similarity is not None)))
        return rated

    def _pool_lookup(self) -> Pool:
        pool, bm25, app = self.pool, self.bm25, self.app
        assert pool is not None

        def lookup(agent_name: str) -> tuple[str, float] | None:
            fields = pool.get(agent_name)
            if fields is None or (app is not None and fields.app != app):
                return None
            return fields.text(), bm25.get(agent_name, 0.0)

        return lookup
