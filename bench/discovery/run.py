"""Benchmark of tool discovery: search quality on the corpus and the size of ``tools/list``.

Usage::

    .venv/bin/python bench/discovery/run.py              # Markdown summary for BENCHMARKS.md
    .venv/bin/python bench/discovery/run.py --misses     # also list queries not ranked first
    .venv/bin/python bench/discovery/run.py --weights 10,2,5,4,1
    .venv/bin/python bench/discovery/run.py --rerank semantic   # also the semantic rows
    .venv/bin/python bench/discovery/run.py --queries blind.json  # only these sets, aggregates only

``--queries PATH`` (repeatable) measures the given query files instead of the development sets,
aggregate figures only (``--misses`` is refused with it: a blind set stays unseen), with a row
per ``kind`` when its queries carry one. ``expected`` may be one agent-facing name or a list
of acceptable ones.

Also measured: the development sets with a typo in every word of five letters or more
(``typo'd``: one deterministic edit per word: a swap, a dropped, doubled or replaced letter),
and the search cost at :data:`SCALE` tools (the corpus copied under new app names).

Each app of corpus.json is registered under its own name as label, so agent-facing names are
``<App>__<Tool>`` exactly as the broker makes them (``broker.core.names``). Every query of
queries.json has one correct tool; recall@k is the share of queries whose tool is among the
first k results, MRR the mean of 1/rank (0 when not in the first 50).

``--rerank semantic`` (needs ``pip install -e '.[semantic]'``) adds two rows per query set:
BM25 + thesaurus with semantic re-ranking of BM25's candidates only (``dense=0``, the earlier
design) and the hybrid search (``broker.discovery.SemanticReranker`` with its defaults: BM25's
best ``--candidates`` plus the ``--dense`` tools closest by embedding), with their costs:
model load, first embedding, embedding every tool once (before any query, as the daemon's
background thread does), the extra time per query, and the dense step alone on 10,000 random
vectors.

``tools/list`` sizes are the compact JSON of the MCP result ``{"tools": [...]}``: in full mode
every tool with name, title, description, inputSchema, outputSchema and annotations; in
discovery mode the two meta-tools. Tokens are approximated as bytes / 4.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from app_client.wire import ToolSpec
from broker.core import names
from broker.discovery import MAX_LIMIT, ToolIndex, Weights, meta_tools

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus.json"
QUERIES = HERE / "queries.json"
HOLDOUT = HERE / "queries_holdout.json"
HOLDOUT2 = HERE / "queries_holdout2.json"
HOLDOUT3 = HERE / "queries_holdout3.json"
#: The number of tools of the scale row (the corpus copied until there are this many).
SCALE = 10_000


@attrs.frozen
class Metrics:
    queries: int
    recall_at_1: float
    recall_at_5: float
    mrr: float
    misses: list[tuple[str, str, list[str]]]  # (query, expected, top-5 found) when not first


def load_corpus(*paths: Path, requests: Mapping[str, Mapping[str, list[str]]] | None = None,
                ) -> list[tuple[str, str, ToolSpec]]:
    """The tools of a catalogue file, or of several as one set (the corpus when none is
    given), as (agent_name, app_label, ToolSpec), named the way the broker names them (labels
    unique across the files). A tool's ``exampleRequests`` come from its catalogue entry, or
    from ``requests[app name][tool name]`` (typical requests written apart from the catalogue)."""
    labels: set[str] = set()
    taken: set[str] = set()
    tools: list[tuple[str, str, ToolSpec]] = []
    for path in paths or (CORPUS,):
        for app in json.loads(path.read_text())["apps"]:
            label = names.make_label(app["name"], labels)
            labels.add(label)
            for raw in app["tools"]:
                spec = ToolSpec(
                    name=raw["name"],
                    description=raw.get("description", ""),
                    input_schema=raw.get("inputSchema", {"type": "object"}),
                    title=raw.get("title"),
                    annotations=raw.get("annotations"),
                    output_schema=raw.get("outputSchema"),
                    example_requests=(requests or {}).get(app["name"], {}).get(raw["name"],
                                                                               raw.get("exampleRequests")),
                )
                agent_name = names.make_agent_name(label, spec.name, taken)
                taken.add(agent_name)
                tools.append((agent_name, label, spec))
    return tools


def load_queries(path: Path = QUERIES) -> list[tuple[str, str]]:
    return [(query, expected) for query, expected, _ in load_tagged(path)]


def load_tagged(path: Path) -> list[tuple[str, str, str | None]]:
    """``(query, expected, kind)``; a list of acceptable tools is joined with "|"."""
    data = json.loads(path.read_text())
    out: list[tuple[str, str, str | None]] = []
    for q in data["queries"]:
        expected = q["expected"]
        out.append((q["query"], "|".join(expected) if isinstance(expected, list) else expected, q.get("kind")))
    return out


def typo(query: str, seed: int) -> str:
    """``query`` with one edit in every word of five letters or more (deterministic)."""
    import random

    rng = random.Random(seed)
    words = query.split(" ")
    for i, word in enumerate(words):
        if len(word) < 5 or not word.isalpha():
            continue
        at = rng.randrange(1, len(word) - 1)
        kind = rng.randrange(4)
        if kind == 0:  # swap two neighbours
            word = word[:at] + word[at + 1] + word[at] + word[at + 2 :]
        elif kind == 1:  # drop a letter
            word = word[:at] + word[at + 1 :]
        elif kind == 2:  # double a letter
            word = word[:at] + word[at] + word[at:]
        else:  # replace a letter
            word = word[:at] + rng.choice("aeiourstnl") + word[at + 1 :]
        words[i] = word
    return " ".join(words)


def evaluate(index: ToolIndex, queries: list[tuple[str, str]]) -> Metrics:
    hits1 = hits5 = 0
    reciprocal = 0.0
    misses: list[tuple[str, str, list[str]]] = []
    for query, expected in queries:
        found = [hit.agent_name for hit in index.search(query, limit=MAX_LIMIT)]
        right = expected.split("|")
        rank = min((found.index(e) + 1 for e in right if e in found), default=0)
        hits1 += rank == 1
        hits5 += 0 < rank <= 5
        reciprocal += 1 / rank if rank else 0.0
        if rank != 1:
            misses.append((query, expected, found[:5]))
    n = len(queries)
    return Metrics(n, hits1 / n, hits5 / n, reciprocal / n, misses)


def calibration(index: ToolIndex, queries: list[tuple[str, str]]) -> dict[str, tuple[int, int]]:
    """For each ``confidence`` of the first hit: (queries, of which the first hit is right)."""
    out: dict[str, tuple[int, int]] = {}
    for query, expected in queries:
        hits = index.search(query, limit=1)
        level = (hits[0].confidence or "none") if hits else "empty"
        n, right = out.get(level, (0, 0))
        out[level] = (n + 1, right + (bool(hits) and hits[0].agent_name in expected.split("|")))
    return out


def scaled(tools: list[tuple[str, str, ToolSpec]], size: int) -> list[tuple[str, str, ToolSpec]]:
    """The corpus copied under new app labels (``App2``, ``App3``...) until it has ``size`` tools."""
    out = list(tools)
    copy = 2
    while len(out) < size:
        for agent_name, label, spec in tools:
            new = f"{label}{copy}"
            out.append((f"{new}__{agent_name.split('__', 1)[1]}", new, spec))
            if len(out) == size:
                break
        copy += 1
    return out


def mcp_tool(agent_name: str, spec: ToolSpec) -> dict[str, Any]:
    tool: dict[str, Any] = {"name": agent_name}
    if spec.title:
        tool["title"] = spec.title
    tool["description"] = spec.description
    tool["inputSchema"] = spec.input_schema
    if spec.output_schema:
        tool["outputSchema"] = spec.output_schema
    if spec.annotations:
        tool["annotations"] = spec.annotations
    return tool


def json_bytes(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--misses", action="store_true", help="list the queries whose tool was not ranked first")
    parser.add_argument("--weights", help="weights name,app,title,description,params[,expansion[,app_prior]]")
    parser.add_argument("--rerank", choices=["off", "semantic"], default="off",
                        help="also measure semantic re-ranking (needs the semantic extra)")
    parser.add_argument("--semantic-weight", type=float, help="weight of the similarity in the blend")
    parser.add_argument("--candidates", type=int, help="how many BM25 hits are candidates")
    parser.add_argument("--dense", type=int, help="how many tools closest by embedding are candidates (hybrid)")
    parser.add_argument("--queries", action="append", type=Path, metavar="PATH",
                        help="measure this query file instead of the development sets (repeatable; aggregates only)")
    args = parser.parse_args(argv)
    if args.queries and args.misses:
        parser.error("--misses lists queries: not with --queries (a blind set stays unseen)")

    weights = Weights(*(float(w) for w in args.weights.split(","))) if args.weights else Weights()
    tools = load_corpus()
    sets: dict[str, list[tuple[str, str]]] = {}
    if args.queries:
        for path in args.queries:
            tagged = load_tagged(path)
            sets[path.stem] = [(q, e) for q, e, _ in tagged]
            for kind in sorted({k for _, _, k in tagged if k}):
                sets[f"{path.stem}, kind {kind}"] = [(q, e) for q, e, k in tagged if k == kind]
    else:
        sets = {"tuning": load_queries(QUERIES), "held-out": load_queries(HOLDOUT),
                "held-out 2": load_queries(HOLDOUT2), "held-out 3": load_queries(HOLDOUT3)}
        dev = [q for qs in list(sets.values()) for q in qs]
        sets["all dev sets, typo'd"] = [(typo(q, i), e) for i, (q, e) in enumerate(dev)]
    apps = sorted({label for _, label, _ in tools})

    index = ToolIndex(weights)
    start = time.perf_counter()
    index.replace_all(tools)
    build_ms = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    index.replace_all(tools)  # nothing changed
    same_ms = (time.perf_counter() - start) * 1000
    first_app = tools[0][1]
    start = time.perf_counter()
    index.replace_all([t for t in tools if t[1] != first_app])  # one app went away...
    index.replace_all(tools)  # ...and came back
    churn_ms = (time.perf_counter() - start) * 1000
    app_size = sum(1 for t in tools if t[1] == first_app)
    plain = ToolIndex(attrs.evolve(weights, expansion=0.0))
    plain.replace_all(tools)
    rows: list[tuple[str, str, Metrics]] = []
    start = time.perf_counter()
    for name, queries in sets.items():
        rows.append((name, "BM25 + thesaurus", evaluate(index, queries)))
    query_ms = (time.perf_counter() - start) * 1000 / sum(len(q) for q in sets.values())
    scale_costs: list[tuple[str, str]] = []
    if not args.queries:
        probes = [q for q, _ in [q for qs in sets.values() for q in qs]]
        for size in (len(tools), SCALE):
            big = ToolIndex(weights)
            start = time.perf_counter()
            big.replace_all(scaled(tools, size))
            big_build = (time.perf_counter() - start) * 1000
            start = time.perf_counter()
            for probe in probes:
                big.search(probe, limit=5)
            big_ms = (time.perf_counter() - start) * 1000 / len(probes)
            worst = 0.0
            for probe in probes:
                start = time.perf_counter()
                big.search(probe, limit=5)
                worst = max(worst, (time.perf_counter() - start) * 1000)
            scale_costs.append((f"search at {size:,} tools, limit 5: mean / worst of {len(probes)} queries "
                                f"(index build {big_build:.0f} ms)", f"{big_ms:.2f} / {worst:.1f} ms"))
            big.close()
    for name, queries in sets.items():
        rows.append((name, "BM25, no thesaurus", evaluate(plain, queries)))
    queries = [q for qs in sets.values() for q in qs]
    costs: list[tuple[str, str]] = []
    if args.rerank == "semantic":
        import numpy as np

        from broker.discovery import CANDIDATES, DENSE, SEMANTIC_WEIGHT, SemanticReranker, load_embedder

        start = time.perf_counter()
        embedder = load_embedder()
        load_ms = (time.perf_counter() - start) * 1000
        start = time.perf_counter()
        embedder.query("warm up")
        first_ms = (time.perf_counter() - start) * 1000
        semantic_ms: dict[str, float] = {}
        reranker = SemanticReranker()
        for ranking, dense in (("BM25 + thesaurus + semantic re-rank", 0),
                               ("hybrid: BM25 + thesaurus ∪ dense, blended", DENSE if args.dense is None else args.dense)):
            reranker = SemanticReranker(embedder, weight=args.semantic_weight or SEMANTIC_WEIGHT,
                                        candidates=args.candidates or CANDIDATES, dense=dense)
            semantic = ToolIndex(weights, reranker=reranker)
            semantic.replace_all(tools)
            start = time.perf_counter()
            semantic.embed_now()
            embed_ms = (time.perf_counter() - start) * 1000
            start = time.perf_counter()
            for name, qs in sets.items():
                rows.append((name, ranking, evaluate(semantic, qs)))
            semantic_ms[ranking] = (time.perf_counter() - start) * 1000 / len(queries) - query_ms
            semantic.close()
        # the dense step alone (matrix-vector product and top-k) on 10,000 random unit vectors
        rng = np.random.default_rng(8)
        big = rng.standard_normal((10_000, 384)).astype(np.float32)
        big /= np.linalg.norm(big, axis=1, keepdims=True)
        scale = SemanticReranker(embedder, dense=reranker.dense)
        with scale._lock:
            for i, row in enumerate(big):
                scale._append_row(f"T{i}", row)
        probe = big[:50] + 0.01
        start = time.perf_counter()
        for vector in probe:
            for _ in zip(range(scale.dense), scale._closest(vector), strict=False):
                pass
        dense_ms = (time.perf_counter() - start) * 1000 / len(probe)
        rerank_ms, hybrid_ms = semantic_ms.values()
        costs = [
            ("semantic: load the model (all-MiniLM-L6-v2, from the models folder)", f"{load_ms:.0f} ms"),
            ("semantic: first embedding after load", f"{first_ms:.0f} ms"),
            (f"semantic: embed all {len(tools)} tools once", f"{embed_ms:.0f} ms ({embed_ms / len(tools):.1f} ms per tool)"),
            (f"semantic: re-rank (old), extra per query (query embedding + {reranker.candidates} cosines)",
             f"{rerank_ms:.1f} ms"),
            (f"semantic: hybrid (new), extra per query (query embedding + {len(tools)} cosines, "
             f"{reranker.candidates} + {reranker.dense} candidates)", f"{hybrid_ms:.1f} ms"),
            (f"semantic: dense step alone, 10,000 tools (matrix-vector product + best {scale.dense})",
             f"{dense_ms:.2f} ms"),
        ]
    rows.sort(key=lambda row: list(sets).index(row[0]))
    every = list(dict.fromkeys(q for qs in sets.values() for q in qs))  # a kind's row repeats its file's
    rated = calibration(index, every)

    full = json_bytes({"tools": [mcp_tool(name, spec) for name, _, spec in tools]})
    discovery = json_bytes({"tools": meta_tools()})
    answers = [json_bytes([h.to_json() for h in index.search(q, limit=5)]) for q, _ in queries]
    answer = sum(answers) / len(answers)

    w = attrs.astuple(weights)
    print("### Tool discovery (BM25, SQLite FTS5)\n")
    print(f"Corpus: {len(tools)} tools in {len(apps)} apps (bench/discovery/corpus.json); query sets: "
          f"{', '.join(f'{name} ({len(qs)})' for name, qs in sets.items())}. Weights "
          f"name/app/title/description/params/expansion/app prior = {'/'.join(f'{x:g}' for x in w)}.\n")
    print("| queries | ranking | recall@1 | recall@5 | MRR |")
    print("|---|---|---|---|---|")
    for name, ranking, m in rows:
        print(f"| {name} ({m.queries}) | {ranking} | {m.recall_at_1:.3f} | {m.recall_at_5:.3f} | {m.mrr:.3f} |")
    print()
    print(f"| first hit's confidence (BM25 + thesaurus, the {len(every)} distinct queries above) | queries | first hit right |")
    print("|---|---|---|")
    for level in ("high", "medium", "low", "none", "empty"):
        if level in rated:
            n, right = rated[level]
            print(f"| {level} | {n} | {right} ({right / n:.0%}) |")
    print()
    print("| cost | value |")
    print("|---|---|")
    print(f"| index build ({len(tools)} tools) | {build_ms:.1f} ms |")
    print(f"| re-sync, nothing changed | {same_ms:.1f} ms |")
    print(f"| re-sync, one app ({app_size} tools) left and came back | {churn_ms:.1f} ms |")
    print(f"| search, mean per query | {query_ms:.2f} ms |")
    for what, value in scale_costs:
        print(f"| {what} | {value} |")
    for what, value in costs:
        print(f"| {what} | {value} |")
    print()
    print("| `tools/list` | bytes | ~tokens (bytes/4) |")
    print("|---|---|---|")
    print(f"| full mode ({len(tools)} tools) | {full} | {full // 4} |")
    print(f"| discovery mode (2 meta-tools) | {discovery} | {discovery // 4} |")
    print(f"| one `search_tools` answer, limit 5 (mean) | {answer:.0f} | {answer / 4:.0f} |")
    if args.misses:
        ranking = "hybrid: BM25 + thesaurus ∪ dense, blended" if args.rerank == "semantic" else "BM25 + thesaurus"
        print(f"\nQueries whose tool was not first ({ranking}):\n")
        for query, expected, found in [miss for _, r, m in rows if r == ranking for miss in m.misses]:
            where = found.index(expected) + 1 if expected in found else "-"
            print(f"- `{query}` -> expected {expected} (rank {where}); got {', '.join(found[:3]) or 'nothing'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
