"""Discovery round 5 (issue 32): quality per failure class on the two new catalogues.

Usage::

    .venv/bin/python bench/discovery/round5.py                       # the development set
    .venv/bin/python bench/discovery/round5.py --misses              # plus the dev queries not first
    .venv/bin/python bench/discovery/round5.py --held-out            # the held-out set, aggregates only
    .venv/bin/python bench/discovery/round5.py --semantic            # also the hybrid search

One index holds both catalogues (catalogue_studio.json, catalogue_home.json: 173 tools, 14 apps).
Rows per ``kind`` of query (the failure classes of issue 32): ``typo`` (no word of the
language), ``realword`` (real words that look like typos or have a second sense),
``paraphrase``, ``param`` (the telling word only in a parameter), ``plain``, and ``none`` (no
tool answers). recall@k and MRR are over the queries some tool answers; "flagged" is the share
of queries whose answer says no tool clearly fits (``PreparedSearch.no_clear_fit``): wanted
high for ``none``, low for the rest. "corrected" counts the queries whose words the typo
correction changed, and of those how many had no typo (kind other than ``typo``).
``--held-out`` refuses ``--misses``: the held-out set is never read query by query.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import load_corpus  # noqa: E402

from broker.discovery import MAX_LIMIT, ToolIndex, query_words, tool_text  # noqa: E402

HERE = Path(__file__).resolve().parent
CATALOGUES = (HERE / "catalogue_studio.json", HERE / "catalogue_home.json")
DEV = HERE / "queries_round5_dev.json"
HELD_OUT = HERE / "queries_round5_holdout.json"
KINDS = ("plain", "typo", "realword", "paraphrase", "param", "none")


def load(path: Path) -> list[tuple[str, list[str], str]]:
    out = []
    for q in json.loads(path.read_text())["queries"]:
        expected = q["expected"]
        out.append((q["query"], [expected] if isinstance(expected, str) else list(expected), q["kind"]))
    return out


def tools() -> list:
    out = []
    for path in CATALOGUES:
        out += load_corpus(path)
    return out


def evaluate(index: ToolIndex, queries: list[tuple[str, list[str], str]], misses: bool) -> dict[str, dict[str, float]]:
    rows: dict[str, dict[str, float]] = {}
    listed: list[str] = []
    levels: dict[str, list[int]] = {}  # first hit's confidence -> [queries, right, no answer at all]
    for query, expected, kind in queries:
        prepared = index.prepare(query, MAX_LIMIT)
        found = [h.agent_name for h in prepared.finish()]
        flagged = bool(getattr(prepared, "no_clear_fit", False))
        hits = prepared.finish()[:1]
        level = levels.setdefault(hits[0].confidence or "none" if hits else "empty", [0, 0, 0])
        level[0] += 1
        level[1] += bool(hits) and hits[0].agent_name in expected
        level[2] += not expected
        corrected = bool(index._corrections(query_words(query)))
        for key in (kind, "all answerable" if expected else "all none"):
            row = rows.setdefault(key, {"n": 0, "r1": 0, "r5": 0, "mrr": 0.0, "flagged": 0, "corrected": 0})
            row["n"] += 1
            row["flagged"] += flagged
            row["corrected"] += corrected
            if expected:
                rank = min((found.index(e) + 1 for e in expected if e in found), default=0)
                row["r1"] += rank == 1
                row["r5"] += 0 < rank <= 5
                row["mrr"] += 1 / rank if rank else 0.0
                if misses and key == kind and rank != 1:
                    listed.append(f"- [{kind}] `{query}` -> {expected[0]} rank {rank or '-'}; got {', '.join(found[:3])}"
                                  f"{' FLAGGED' if flagged else ''}")
            elif misses and key == kind and not flagged:
                listed.append(f"- [none, not flagged] `{query}` -> got {', '.join(found[:2])}")
    for line in listed:
        print(line)
    print("\n| first hit's confidence | queries | first hit right | no tool answers the query |")
    print("|---|---|---|---|")
    for name in ("high", "medium", "low", "none", "empty"):
        if name in levels:
            n, right, nothing = levels[name]
            print(f"| {name} | {n} | {right} ({right / n:.0%}) | {nothing} ({nothing / n:.0%}) |")
    return rows


def table(title: str, rows: dict[str, dict[str, float]]) -> None:
    print(f"\n| {title} | n | recall@1 | recall@5 | MRR | flagged 'nothing fits' | corrected |")
    print("|---|---|---|---|---|---|---|")
    for key in (*KINDS, "all answerable", "all none"):
        row = rows.get(key)
        if row is None:
            continue
        n = row["n"]
        if key in ("none", "all none"):
            quality = "| - | - | - "
        else:
            quality = f"| {row['r1'] / n:.3f} | {row['r5'] / n:.3f} | {row['mrr'] / n:.3f} "
        print(f"| {key} | {n} {quality}| {int(row['flagged'])} ({row['flagged'] / n:.0%}) | {int(row['corrected'])} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--held-out", action="store_true", help="measure the held-out set (aggregates only)")
    parser.add_argument("--misses", action="store_true", help="list the development queries not answered first")
    parser.add_argument("--semantic", action="store_true", help="also the hybrid search (needs the semantic extra)")
    args = parser.parse_args(argv)
    if args.held_out and args.misses:
        parser.error("--misses reads queries one by one: not with --held-out")
    queries = load(HELD_OUT if args.held_out else DEV)
    corpus = tools()
    name = "held-out" if args.held_out else "dev"
    print(f"{name}: {len(queries)} queries over {len(corpus)} tools")
    index = ToolIndex()
    index.replace_all(corpus)
    table(f"{name}, BM25", evaluate(index, queries, args.misses and not args.semantic))
    if args.semantic:
        from broker.discovery import SemanticReranker, load_embedder

        reranker = SemanticReranker(load_embedder())
        hybrid = ToolIndex(reranker=reranker)
        hybrid.replace_all(corpus)
        reranker.embed((agent, tool_text(spec.name, spec.description, spec.title)) for agent, _, spec in corpus)
        table(f"{name}, hybrid (semantic)", evaluate(hybrid, queries, args.misses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
