"""Fit the hybrid search's fusion on the development sets (issue 32 item 3), reproducibly.

    .venv/bin/python bench/discovery/fit.py
    .venv/bin/python bench/discovery/fit.py --calibrate   # confidence and "nothing fits"
    .venv/bin/python bench/discovery/fit.py --requests    # the typical requests' BM25 weight

Embeds every tool of both corpora once, records each development query's candidates (BM25's
best and the closest by embedding, with their BM25 scores and cosines, exactly as
``SemanticReranker.gather`` produces them), then scores every fusion setting of a fixed grid
offline: reciprocal-rank fusion with k and the embedding weight, and the earlier blend with
its weight, the weight of the query-to-app similarity (``APP_WEIGHT``, round 6) and the
strength of the BM25 margin's damping (``MARGIN_DAMPING``, round 9). Prints the grid's best
settings by MRR (then recall@1) over the answerable development queries; the chosen one is
``FUSION``, ``RRF_K``, ``SEMANTIC_WEIGHT``, ``APP_WEIGHT`` and ``MARGIN_DAMPING`` in
``broker/discovery/_semantic.py``.

Development sets only: the round-5 dev set over the new catalogues and the earlier sets
(queries.json, queries_holdout.json, queries_holdout2.json, queries_holdout3.json) over
corpus.json, all of which guided earlier rounds, and, since round 9, the blind sets blind6 to
blind9 (blind10 since round 11, blind11 since round 12, blind12 since round 13, blind13 since
round 15) over their own catalogues (spent: each
was measured once as a blind set and then guided a decision, so they are development data now).
queries_holdout4.json, queries_round5_holdout.json and any newer blind set are never read here.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import round5  # noqa: E402
from run import CORPUS, HOLDOUT, HOLDOUT2, HOLDOUT3, QUERIES, load_corpus, load_tagged  # noqa: E402

from broker.discovery import MAX_LIMIT, SemanticReranker, ToolIndex, Weights, load_embedder  # noqa: E402
from broker.discovery._semantic import Pool, fused_scores  # noqa: E402

#: Round 6: near misses no tool answers, for the "nothing fits" calibration (dev only).
NONE_DEV = Path(__file__).resolve().parent / "queries_round6_none_dev.json"
#: Blind sets spent on earlier rounds (development data since round 9): folder, its catalogues.
BLIND_CATALOGUES = {"blind6": ("lab", "office"), "blind7": ("media", "ops"), "blind8": ("make", "learn"),
                    "blind9": ("field", "desk"), "blind10": ("leisure", "trade"), "blind11": ("counter", "stage"),
                    "blind12": ("depot", "guild"), "blind13": ("bench", "route")}


def blind_set(folder: str) -> tuple[list[Path], Path]:
    """A blind set's catalogue files and query file."""
    return ([round5.HERE / folder / f"catalogue_{name}.json" for name in BLIND_CATALOGUES[folder]],
            round5.HERE / folder / f"queries_{folder}.json")


def blind_set_with_requests(folder: str) -> tuple[list[Path], Path, list[Path]]:
    """A blind set's catalogue files, query file and its catalogues' typical requests (round 13)."""
    return (*blind_set(folder), [round5.HERE / folder / f"requests_{name}.json" for name in BLIND_CATALOGUES[folder]])


#: Catalogues and queries of each spent blind set.
SPENT_BLIND = [blind_set(folder) for folder in BLIND_CATALOGUES]


def spent_blind() -> list[tuple[list[Any], list[tuple[str, list[str]]]]]:
    """(tools, queries) of each spent blind set."""
    return [(round5.tools(catalogues), [(q, e) for q, e, _ in round5.load(queries)])
            for catalogues, queries in SPENT_BLIND]


def calibration_sets() -> list[tuple[str, list[Any], list[tuple[str, list[str]]]]]:
    """(name, tools, queries) of every development set the calibration reads: the first sets over
    corpus.json, round 5's development queries with its near misses, and the spent blind sets."""
    old = [(q, e.split("|")) for path in (QUERIES, HOLDOUT, HOLDOUT2, HOLDOUT3) for q, e, _ in load_tagged(path)]
    new = [(q, e) for path in (round5.DEV, NONE_DEV) for q, e, _ in round5.load(path)]
    return [("corpus", load_corpus(CORPUS), old), ("round5", round5.tools(), new),
            *((folder, *pair) for folder, pair in zip(BLIND_CATALOGUES, spent_blind(), strict=True))]
GRID_RRF = [(k, w) for k in (1.0, 3.0, 5.0, 10.0, 20.0, 30.0, 60.0) for w in (0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0)]
GRID_BLEND = [0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
#: BM25 weights of the parameter column (names, descriptions, enum values of the schema).
GRID_PARAMS = [0.5, 1.0, 2.0, 3.0, 4.0]

#: Weights of the query-to-app similarity term (``APP_WEIGHT``, round 6), with each blend weight.
GRID_APP = [0.0, 0.25, 0.5, 0.75, 1.0]
#: Strengths of the BM25 winner's margin damping the embedding terms (``MARGIN_DAMPING``, round 9).
GRID_DAMPING = [0.0, 0.25, 0.5, 0.75]

#: One query's record: expected names (empty: none answers), the candidates, their BM25
#: scores, cosines and their apps' similarities to the query.
Record = tuple[list[str], list[str], list[float], list[float], list[float]]


class Recorder(SemanticReranker):
    """Keeps the last ``gather``'s candidates."""

    last: tuple[list[str], list[float], list[float]] = ([], [], [])
    apps: list[float] = []

    def gather(self, query: str, candidates: Sequence[tuple[str, str, float]],
               pool: Pool | None = None, query_vector: Any = None) -> tuple[list[str], list[float], list[float]]:
        self.last = super().gather(query, candidates, pool, query_vector)
        self.apps = self.app_similarities(self.last[0], query_vector)
        return self.last


def record(corpus: list[Any], queries: list[tuple[str, list[str]]], embedder: Any) -> list[Record]:
    reranker = Recorder(embedder)
    index = ToolIndex(reranker=reranker)
    index.replace_all(corpus)
    index.embed_now()
    out: list[Record] = []
    for query, expected in queries:
        reranker.last = ([], [], [])
        index.prepare(query, MAX_LIMIT).finish()
        names, bm25, cosines = reranker.last
        out.append((expected, list(names), list(bm25), list(cosines), list(reranker.apps)))
    index.close()
    return out


def score(records: list[Record], fusion: str, weight: float, k: float, app: float = 0.0,
          damp: float = 0.0) -> tuple[float, float, float]:
    r1 = r5 = mrr = 0.0
    n = 0
    for expected, names, bm25, cosines, apps in records:
        if not expected:
            continue
        n += 1
        if not names:
            continue
        fused = fused_scores(bm25, cosines, apps, fusion=fusion, weight=weight, rrf_k=k, app_weight=app,
                             margin_damping=damp)
        order = [names[i] for i in sorted(range(len(names)), key=lambda i: -fused[i])]
        rank = min((order.index(e) + 1 for e in expected if e in order), default=0)
        r1 += rank == 1
        r5 += 0 < rank <= 5
        mrr += 1 / rank if rank else 0.0
    return r1 / n, r5 / n, mrr / n


def recall_mrr(index: ToolIndex, queries: list[tuple[str, list[str]]]) -> tuple[float, float, float]:
    """(recall@1, recall@5, MRR) of ``index``'s search over the answerable queries."""
    r1 = r5 = mrr = 0.0
    answerable = [(q, e) for q, e in queries if e]
    for query, expected in answerable:
        found = [h.agent_name for h in index.search(query, MAX_LIMIT)]
        rank = min((found.index(e) + 1 for e in expected if e in found), default=0)
        r1 += rank == 1
        r5 += 0 < rank <= 5
        mrr += 1 / rank if rank else 0.0
    return r1 / len(answerable), r5 / len(answerable), mrr / len(answerable)


def bm25_mrr(corpus: list[Any], queries: list[tuple[str, list[str]]], weights: Weights) -> tuple[float, float]:
    """(recall@1, MRR) of BM25 alone over the answerable queries."""
    index = ToolIndex(weights)
    index.replace_all(corpus)
    r1, _, mrr = recall_mrr(index, queries)
    index.close()
    return r1, mrr


def main() -> int:
    embedder = load_embedder()
    old = [(q, e.split("|")) for path in (QUERIES, HOLDOUT, HOLDOUT2, HOLDOUT3) for q, e, _ in load_tagged(path)]
    new = [(q, e) for q, e, _ in round5.load(round5.DEV)]
    print("| BM25 weight of the parameter column | recall@1 | MRR (all answerable dev queries) |")
    print("|---|---|---|")
    for weight in GRID_PARAMS:
        parts = [bm25_mrr(load_corpus(CORPUS), old, Weights(params=weight)),
                 bm25_mrr(round5.tools(), new, Weights(params=weight))]
        sizes = [len(old), sum(1 for _, e in new if e)]
        r1, mrr = (sum(p[i] * n for p, n in zip(parts, sizes, strict=True)) / sum(sizes) for i in (0, 1))
        print(f"| {weight:g} | {r1:.3f} | {mrr:.3f} |")
    print()
    records = record(load_corpus(CORPUS), old, embedder) + record(round5.tools(), new, embedder)
    for tools, queries in spent_blind():
        records += record(tools, queries, embedder)
    results = []
    for k, w in GRID_RRF:
        results.append((score(records, "rrf", w, k), f"rrf k={k:g} weight={w:g}"))
    for w in GRID_BLEND:
        for app in GRID_APP:
            for damp in GRID_DAMPING:
                results.append((score(records, "blend", w, 0.0, app, damp), f"blend weight={w:g}"
                                + (f" app={app:g}" if app else "") + (f" damping={damp:g}" if damp else "")))
    results.sort(key=lambda r: (-r[0][2], -r[0][0], r[1]))
    print(f"{sum(1 for r in records if r[0])} answerable development queries; best settings by MRR:\n")
    print("| fusion | recall@1 | recall@5 | MRR |")
    print("|---|---|---|---|")
    for (r1, r5, mrr), name in results[:10]:
        print(f"| {name} | {r1:.3f} | {r5:.3f} | {mrr:.3f} |")
    for (r1, r5, mrr), name in results:
        if name == "blend weight=1":
            print(f"| {name} (rounds 2-4) | {r1:.3f} | {r5:.3f} | {mrr:.3f} |")
    Path("/tmp").joinpath("toolbridge-fit-records.json").write_text(json.dumps(records))
    return 0




# --- calibration of confidence and "nothing fits" (issue 32 item 4) -----------------------------


def logistic(x: Any, y: Any, balanced: bool) -> tuple[list[float], list[float], list[float], float]:
    """A logistic regression by gradient descent on standardised features (deterministic):
    (mean, scale, weights, bias); ``balanced`` weighs both classes equally."""
    import numpy as np

    mean = x.mean(0)
    scale = x.std(0) + 1e-9
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    weights = np.where(y == 0, len(y) / (2 * max(1, (y == 0).sum())), len(y) / (2 * max(1, y.sum()))) \
        if balanced else np.ones(len(y))
    w = np.zeros(z.shape[1])
    for _ in range(5000):
        p = 1 / (1 + np.exp(-z @ w))
        w -= 0.3 * (z.T @ ((p - y) * weights) / len(y) + 1e-3 * w)
    return mean.tolist(), scale.tolist(), w[:-1].tolist(), float(w[-1])


def searched(corpus: list[Any], queries: list[tuple[str, list[str]]], embedder: Any,
             ) -> Iterator[tuple[list[str], Any, list[Any]]]:
    """(expected names, the prepared search, its first 5 hits) of each query over ``corpus``:
    hybrid with ``embedder``, BM25 alone without."""
    reranker = SemanticReranker(embedder) if embedder is not None else None
    index = ToolIndex(reranker=reranker)
    index.replace_all(corpus)
    if reranker is not None:
        index.embed_now()
    for query, expected in queries:
        prepared = index.prepare(query, 5)
        yield expected, prepared, prepared.finish()
    index.close()


def answer_features(prepared: Any, hits: list[Any], mode: str) -> list[float]:
    """The answer model's inputs: the best similarity among the hits (not the first's: the app
    term, APP_WEIGHT, may put a less similar tool first) or the first hit's coverage; unknown."""
    best = max((h.similarity or 0.0 for h in hits), default=0.0)
    return [best if mode == "semantic" else hits[0].coverage or 0.0, prepared.unknown]


def calibrate(embedder: Any) -> None:
    import numpy as np

    from broker.discovery._calibration import Logistic

    sets = calibration_sets()
    for mode in ("semantic", "lexical"):
        hit_x, hit_y, answer_x, answer_y = [], [], [], []
        for _, corpus, queries in sets:
            for expected, prepared, hits in searched(corpus, queries, embedder if mode == "semantic" else None):
                for i, hit in enumerate(hits):
                    lexical = [hit.coverage or 0.0, float(i == 0), prepared.unknown]
                    hit_x.append(([hit.similarity or 0.0] if mode == "semantic" else []) + lexical)
                    hit_y.append(hit.agent_name in expected)
                answer_x.append(answer_features(prepared, hits, mode))
                answer_y.append(bool(expected))
        hx, hy = np.array(hit_x), np.array(hit_y, float)
        ax, ay = np.array(answer_x), np.array(answer_y, float)
        hit_model = Logistic(*(tuple(v) if isinstance(v, list) else v for v in logistic(hx, hy, False)))
        answer_model = Logistic(*(tuple(v) if isinstance(v, list) else v for v in logistic(ax, ay, True)))
        hit_p = np.array([hit_model(row) for row in hx])
        answer_p = np.array([answer_model(row) for row in ax])
        # high: the lowest threshold where the hits at or above it are right >= 90 % of the time
        high = next((t for t in np.arange(0.3, 0.99, 0.01) if (hy[hit_p >= t].mean() if (hit_p >= t).any() else 1) >= 0.9),
                    0.9)
        medium = next((t for t in np.arange(0.05, high, 0.01) if (hy[hit_p >= t].mean() if (hit_p >= t).any() else 1) >= 0.5),
                      high / 2)
        # no clear fit: the highest threshold flagging at most 10 % of the answerable queries
        no_fit = max((t for t in np.arange(0.01, 0.99, 0.01) if (answer_p[ay == 1] < t).mean() <= 0.10), default=0.5)
        flagged_none = (answer_p[ay == 0] < no_fit).mean()
        # the same for tools with typical requests (round 13): their words and vectors make more
        # queries look answerable, so the same model needs a threshold of its own there
        written_p, written_y = [], []
        for _, corpus, queries in with_requests():
            for expected, prepared, hits in searched(corpus, queries, embedder if mode == "semantic" else None):
                written_p.append(answer_model(answer_features(prepared, hits, mode)))
                written_y.append(bool(expected))
        wp, wy = np.array(written_p), np.array(written_y)
        no_fit_written = max((t for t in np.arange(0.01, 0.99, 0.01) if (wp[wy] < t).mean() <= 0.10), default=0.5)
        fmt = lambda m: f"Logistic({tuple(round(v, 4) for v in m.mean)}, {tuple(round(v, 4) for v in m.scale)}, " \
                        f"{tuple(round(v, 4) for v in m.weights)}, {m.bias:.4f})"  # noqa: E731
        print(f"\n{mode}: {len(hx)} hits, {len(ax)} answers ({int((ay == 0).sum())} with no answering tool)")
        print(f"HIT_{mode.upper()} = {fmt(hit_model)}")
        print(f"ANSWER_{mode.upper()} = {fmt(answer_model)}")
        print(f"HIGH = {high:.2f}  MEDIUM = {medium:.2f}  NO_FIT_{mode.upper()} = {no_fit:.2f}"
              f"  (dev: {flagged_none:.0%} of no-answer queries flagged)")
        print(f"with typical requests ({int(wy.sum())} answerable, {int((~wy).sum())} no-answer queries): "
              f"NO_FIT_WRITTEN[{mode == 'semantic'}] = {no_fit_written:.2f}  (dev: {(wp[~wy] < no_fit_written).mean():.0%}"
              f" of no-answer queries flagged; at the threshold without requests {(wp[~wy] < no_fit).mean():.0%},"
              f" answerable {(wp[wy] < no_fit).mean():.0%})")


# --- the BM25 weight of the typical requests' column (round 13) --------------------------------

#: Blind sets with typical requests written for their catalogues by helpers who read only the
#: catalogue, never a query (round 13): catalogues, queries, requests; these two chose the
#: requests column's weight (blind12, with its requests, judged the change, and blind13 round 14's
#: candidate: :data:`JUDGED_REQUESTS`).
WITH_REQUESTS = [blind_set_with_requests(folder) for folder in ("blind10", "blind11")]
JUDGED_REQUESTS = [blind_set_with_requests(folder) for folder in ("blind12", "blind13")]
GRID_REQUESTS = [0.5, 1.0, 2.0, 3.0, 5.0]
#: Round 5's development queries (and its near misses) with typical requests for its catalogues
#: (written, like the others, by helpers who read only the catalogue file).
ROUND5_REQUESTS = [round5.HERE / "requests_studio.json", round5.HERE / "requests_home.json"]


def with_requests() -> list[tuple[str, list[Any], list[tuple[str, list[str]]]]]:
    """(name, tools with their typical requests, queries) of every development set that has them:
    blind10 to blind13 and round 5's development queries with its near misses."""
    sets = [(queries.parent.name, round5.tools(catalogues, requests), [(q, e) for q, e, _ in round5.load(queries)])
            for catalogues, queries, requests in [*WITH_REQUESTS, *JUDGED_REQUESTS]]
    sets.append(("round5", round5.tools(list(round5.CATALOGUES), ROUND5_REQUESTS),
                 [(q, e) for path in (round5.DEV, NONE_DEV) for q, e, _ in round5.load(path)]))
    return sets


def fit_requests(embedder: Any) -> None:
    """recall@1 / recall@5 / MRR of BM25 alone and of the hybrid search per weight of the
    ``requests`` column (``Weights.requests``), on each set of :data:`WITH_REQUESTS`."""
    print("| requests weight | " + " | ".join(f"{q.parent.name} BM25 | {q.parent.name} hybrid"
                                           for _, q, _ in WITH_REQUESTS) + " |")
    print("|---|" + "---|---|" * len(WITH_REQUESTS))
    for weight in GRID_REQUESTS:
        cells = []
        for catalogues, queries, requests in WITH_REQUESTS:
            corpus = round5.tools(catalogues, requests)
            tagged = [(q, e) for q, e, _ in round5.load(queries)]
            for reranker in (None, SemanticReranker(embedder)):
                index = ToolIndex(Weights(requests=weight), reranker=reranker)
                index.replace_all(corpus)
                if reranker is not None:
                    index.embed_now()
                r1, r5, mrr = recall_mrr(index, tagged)
                index.close()
                cells.append(f"{r1:.3f} / {r5:.3f} / {mrr:.3f}")
        print(f"| {weight:g} | " + " | ".join(cells) + " |")


if __name__ == "__main__" and "--requests" in sys.argv:
    fit_requests(load_embedder())
elif __name__ == "__main__" and "--calibrate" in sys.argv:
    calibrate(load_embedder())
elif __name__ == "__main__":
    sys.exit(main())
