"""Search latency at 10,000 tools at every moment, embedding throughput, and a restart (issue 32 item 5).

    .venv/bin/python bench/discovery/scale.py [--seconds 60] [--tools 10000]

The corpus (corpus.json) copied under new app names up to ``--tools`` tools, each copy's
description naming its app (so no two tools share a text to embed). First BM25 alone
(no semantic extra): the search latency over the development queries. Then the daemon's
set-up: a ``SemanticReranker(background=True)`` with a disk cache in a temporary directory,
synced with every tool at once (the background thread starts embedding them, at low
priority), and searches run in this thread, one every ``--every`` seconds, for ``--seconds`` while it embeds:
their latency percentiles, and how many tools were embedded meanwhile (the throughput, from
which the time for all of them is extrapolated). Last, a "restart": a new reranker over the
same cache file reads back the vectors embedded so far (time per tool), embedding none.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import HOLDOUT, HOLDOUT2, HOLDOUT3, QUERIES, load_corpus, load_queries, scaled  # noqa: E402

from app_client.wire import ToolSpec  # noqa: E402
from broker.mcp.meta import QUERY_EMBED_BUDGET  # noqa: E402
from broker.discovery import CACHE_FILE, IndexedTool, SemanticReranker, ToolIndex, tool_text  # noqa: E402


def _with_description(spec: ToolSpec, description: str) -> ToolSpec:
    return ToolSpec(name=spec.name, description=description, input_schema=spec.input_schema, title=spec.title,
                    annotations=spec.annotations, output_schema=spec.output_schema)


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return f"median {statistics.median(ordered):.1f} / p95 {p(0.95):.1f} / max {ordered[-1]:.1f} ms ({len(ordered)} searches)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to search while embedding")
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--every", type=float, default=0.1, help="seconds between searches while embedding")
    args = parser.parse_args(argv)
    # each copy's description names its app, so every tool has a text of its own to embed
    tools = [IndexedTool(name, label, _with_description(spec, f"{spec.description} ({label})"))
             for name, label, spec in scaled(load_corpus(), args.tools)]
    probes = [q for path in (QUERIES, HOLDOUT, HOLDOUT2, HOLDOUT3) for q, _ in load_queries(path)]

    plain = ToolIndex()
    plain.sync_tools(1, tools)
    lexical = []
    for query in probes:
        start = time.perf_counter()
        plain.search(query, 5)
        lexical.append((time.perf_counter() - start) * 1000)
    plain.close()
    print(f"| BM25 only, {len(tools):,} tools | {percentiles(lexical)} |")

    with tempfile.TemporaryDirectory() as home:
        cache = Path(home) / CACHE_FILE
        reranker = SemanticReranker(background=True, cache_path=cache)
        reranker.warm_up()
        index = ToolIndex(reranker=reranker)
        start = time.perf_counter()
        index.sync_tools(1, tools)  # schedules every tool for the background thread
        sync_ms = (time.perf_counter() - start) * 1000
        during: list[float] = []
        late = 0
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        began = time.perf_counter()
        i = 0
        while time.perf_counter() - began < args.seconds:
            query = probes[i % len(probes)]
            i += 1
            start = time.perf_counter()
            # as the daemon does: the text to embed (typos corrected) first, then its embedding
            # in a thread of its own, alongside BM25
            text = index.embed_text(query)
            vector = pool.submit(reranker.embed_query, text)
            prepared = index.prepare(query, 5)
            try:  # at most QUERY_EMBED_BUDGET from the start, then BM25's answer (as the daemon)
                query_vector = vector.result(timeout=max(0.0, QUERY_EMBED_BUDGET - (time.perf_counter() - start)))
            except concurrent.futures.TimeoutError:
                late += 1
                prepared.rate(prepared.hits[:5])
            else:
                prepared.finish(query_vector if prepared.embedded_as == text else None)
            during.append((time.perf_counter() - start) * 1000)
            time.sleep(args.every)  # an agent's searches come one at a time, not back to back
        elapsed = time.perf_counter() - began
        pool.shutdown()
        embedded = reranker.cached()
        per_tool = elapsed / max(1, embedded) * 1000
        print(f"| hybrid, {len(tools):,} tools, while the background thread embeds (first {elapsed:.0f} s) | "
              f"{percentiles(during)}; {late} answered in BM25's order (vector late) |")
        print(f"| sync of {len(tools):,} tools (index + scheduling) | {sync_ms:.0f} ms |")
        print(f"| background embedding while searching | {embedded:,} tools in {elapsed:.0f} s: {per_tool:.1f} ms per "
              f"tool, all {len(tools):,} in ~{per_tool * len(tools) / 60000:.1f} min |")
        index.close()
        # a restart: the same texts, a new process's reranker over the same file
        texts = [(t.agent_name, tool_text(t.spec.name, t.spec.description, t.spec.title)) for t in tools]
        restarted = SemanticReranker(cache_path=cache)
        restarted.warm_up()
        assert restarted._cache is not None
        start = time.perf_counter()
        found = restarted._cache.get_many([text for _, text in texts])
        read_ms = (time.perf_counter() - start) * 1000
        print(f"| restart: vectors read back from the disk cache | {len(found):,} of {len(texts):,} distinct texts in "
              f"{read_ms:.0f} ms |")
        restarted._cache.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
