"""Discovery round 5 (issue 32): quality per failure class on the two new catalogues.

Usage::

    .venv/bin/python bench/discovery/round5.py                       # the development set
    .venv/bin/python bench/discovery/round5.py --misses              # plus the dev queries not first
    .venv/bin/python bench/discovery/round5.py --held-out            # the held-out set, aggregates only
    .venv/bin/python bench/discovery/round5.py --semantic            # also the hybrid search

    # any catalogue file(s) and query file, aggregates only (e.g. a blind set nobody tuned on):
    .venv/bin/python bench/discovery/round5.py --semantic --aggregate-only \
        --catalogues A.json,B.json --queries Q.json [--requests R.json,S.json]

One index holds both catalogues (catalogue_studio.json, catalogue_home.json: 173 tools, 14 apps).
Rows per ``kind`` of query (the failure classes of issue 32): ``typo`` (no word of the
language), ``realword`` (real words that look like typos or have a second sense),
``paraphrase``, ``param`` (the telling word only in a parameter), ``plain``, and ``none`` (no
tool answers). recall@k and MRR are over the queries some tool answers; "flagged" is the share
of queries whose answer says no tool clearly fits (``PreparedSearch.no_clear_fit``): wanted
high for ``none``, low for the rest. "corrected" counts the queries whose words the typo
correction changed, and of those how many had no typo (kind other than ``typo``).
``--held-out`` refuses ``--misses``: the held-out set is never read query by query.

``--catalogues`` (comma-separated, same format as ``catalogue_*.json``: ``{"apps": [{"name",
"tools": [...]}]}``; one index, app labels made unique across files as the broker does) and
``--queries`` (``{"queries": [...]}`` or a bare list; each ``{"query", "expected", "kind"}``,
``class`` accepted for ``kind``; ``expected`` a tool name, a list of acceptable ones, or
``[]`` / ``""`` / ``null`` when no tool answers) measure any set; ``--aggregate-only`` prints
no query, no tool name and no per-query line (it refuses ``--misses``). Latency rows: the time
of one search (``prepare`` + ``finish``, limit 50, the query embedded inline for the hybrid,
every tool already embedded), median and p95, per class.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from app_client.wire import ToolSpec  # noqa: E402
from broker.discovery import MAX_LIMIT, ToolIndex, query_words  # noqa: E402
from run import load_corpus  # noqa: E402

HERE = Path(__file__).resolve().parent
CATALOGUES = (HERE / "catalogue_studio.json", HERE / "catalogue_home.json")
DEV = HERE / "queries_round5_dev.json"
HELD_OUT = HERE / "queries_round5_holdout.json"
KINDS = ("plain", "typo", "realword", "paraphrase", "param", "none")


def load(path: Path) -> list[tuple[str, list[str], str]]:
    """(query, acceptable tools, kind); no acceptable tool = no tool answers."""
    data = json.loads(path.read_text())
    out = []
    for q in data["queries"] if isinstance(data, dict) else data:
        expected = q.get("expected")
        if not expected:  # [], "", null, absent
            accepted: list[str] = []
        elif isinstance(expected, str):
            accepted = [expected]
        else:
            accepted = [e for e in expected if e]
        kind = q.get("kind") or q.get("class") or ("none" if not accepted else "unclassed")
        out.append((q["query"], accepted, str(kind)))
    return out


def tools(paths: tuple[Path, ...] | list[Path] = CATALOGUES, requests: list[Path] | None = None,
          ) -> list[tuple[str, str, ToolSpec]]:
    """Every catalogue's tools in one list, named as the broker names them (labels unique
    across the files); with ``requests``, files of typical requests (``{"App": {"tool":
    ["...", ...]}}``) that become the tools' ``exampleRequests``."""
    merged: dict[str, dict[str, list[str]]] = {}
    for path in requests or ():
        for app, by_tool in json.loads(path.read_text()).items():
            merged.setdefault(app, {}).update(by_tool)
    return load_corpus(*paths, requests=merged)


def evaluate(index: ToolIndex, queries: list[tuple[str, list[str], str]], misses: bool) -> dict[str, dict[str, float]]:
    rows: dict[str, dict[str, float]] = {}
    listed: list[str] = []
    levels: dict[str, list[int]] = {}  # first hit's confidence -> [queries, right, no answer at all]
    for query, expected, kind in queries[:5]:  # warm up (first calls load caches)
        index.prepare(query, MAX_LIMIT).finish()
    for query, expected, kind in queries:
        start = time.perf_counter()
        prepared = index.prepare(query, MAX_LIMIT)
        ranked = prepared.finish()
        elapsed = (time.perf_counter() - start) * 1000
        found = [h.agent_name for h in ranked]
        flagged = bool(getattr(prepared, "no_clear_fit", False))
        hits = ranked[:1]
        level = levels.setdefault(hits[0].confidence or "none" if hits else "empty", [0, 0, 0])
        level[0] += 1
        level[1] += bool(hits) and hits[0].agent_name in expected
        level[2] += not expected
        corrected = bool(index._corrections(query_words(query)))
        for key in (kind, "all answerable" if expected else "all none"):
            row = rows.setdefault(key, {"n": 0, "a": 0, "r1": 0, "r5": 0, "mrr": 0.0, "flagged": 0, "corrected": 0})
            row["n"] += 1
            row["a"] += bool(expected)
            times = rows.setdefault(f"ms {key}", {})
            times[str(len(times))] = elapsed
            if key.startswith("all"):
                every = rows.setdefault("ms all", {})
                every[str(len(every))] = elapsed
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


def _ms(times: dict[str, float] | None) -> str:
    if not times:
        return "- | -"
    values = sorted(times.values())
    p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
    return f"{statistics.median(values):.1f} | {p95:.1f}"


def table(title: str, rows: dict[str, dict[str, float]]) -> None:
    print(f"\n| {title} | n | recall@1 | recall@5 | MRR | flagged 'nothing fits' | corrected | ms median | ms p95 |")
    print("|---|---|---|---|---|---|---|---|---|")
    kinds = [*KINDS, *sorted(k for k in rows if not k.startswith(("ms ", "all")) and k not in KINDS)]
    for key in (*kinds, "all answerable", "all none", "all"):
        row = rows.get(key)
        if key == "all":
            n = sum(rows[k]["n"] for k in ("all answerable", "all none") if k in rows)
            flagged = sum(rows[k]["flagged"] for k in ("all answerable", "all none") if k in rows)
            corrected = sum(rows[k]["corrected"] for k in ("all answerable", "all none") if k in rows)
            if n:
                print(f"| all | {n} | - | - | - | {int(flagged)} ({flagged / n:.0%}) | {int(corrected)} | {_ms(rows.get('ms all'))} |")
            continue
        if row is None:
            continue
        n = row["n"]
        a = row["a"]  # recall and MRR over the row's answerable queries
        if not a:
            quality = "| - | - | - "
        else:
            quality = f"| {row['r1'] / a:.3f} | {row['r5'] / a:.3f} | {row['mrr'] / a:.3f} "
        print(f"| {key} | {n} {quality}| {int(row['flagged'])} ({row['flagged'] / n:.0%}) | {int(row['corrected'])} "
              f"| {_ms(rows.get(f'ms {key}'))} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--held-out", action="store_true", help="measure the held-out set (aggregates only)")
    parser.add_argument("--misses", action="store_true", help="list the development queries not answered first")
    parser.add_argument("--semantic", action="store_true", help="also the hybrid search (needs the semantic extra)")
    parser.add_argument("--catalogues", help="comma-separated catalogue files (default: the round-5 pair)")
    parser.add_argument("--queries", type=Path, help="a query file (default: the round-5 dev set)")
    parser.add_argument("--requests", help="comma-separated files of typical requests per tool "
                        '({"App": {"tool": [...]}}), given to the tools as their exampleRequests')
    parser.add_argument("--aggregate-only", action="store_true",
                        help="print aggregates only, never a query or a tool name (refuses --misses)")
    args = parser.parse_args(argv)
    if (args.held_out or args.aggregate_only) and args.misses:
        parser.error("--misses reads queries one by one: not with --held-out or --aggregate-only")
    if args.held_out and args.queries:
        parser.error("--held-out and --queries name two query files")
    query_file = args.queries or (HELD_OUT if args.held_out else DEV)
    queries = load(query_file)
    corpus = tools([Path(p) for p in args.catalogues.split(",") if p] if args.catalogues else CATALOGUES,
                   [Path(p) for p in args.requests.split(",") if p] if args.requests else None)
    name = "held-out" if args.held_out else ("dev" if query_file == DEV else query_file.stem)
    print(f"{name}: {len(queries)} queries ({sum(not e for _, e, _ in queries)} with no answering tool) "
          f"over {len(corpus)} tools")
    known = {agent for agent, _, _ in corpus}
    unknown = sum(any(e not in known for e in expected) for _, expected, _ in queries)
    if unknown:  # a count only: which ones would reveal queries
        print(f"warning: {unknown} queries expect a tool name that is in no catalogue (check the names' labels)")
    if not args.semantic:
        print("(BM25 alone; add --semantic for the hybrid search too)")
    index = ToolIndex()
    index.replace_all(corpus)
    table(f"{name}, BM25", evaluate(index, queries, args.misses and not args.semantic))
    if args.semantic:
        from broker.discovery import SemanticReranker, load_embedder

        reranker = SemanticReranker(load_embedder())
        hybrid = ToolIndex(reranker=reranker)
        hybrid.replace_all(corpus)
        hybrid.embed_now()
        table(f"{name}, hybrid (semantic)", evaluate(hybrid, queries, args.misses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
