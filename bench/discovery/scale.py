"""Search latency at 10,000 tools at every moment, embedding throughput, and a restart (issue 32 item 5).

    .venv/bin/python bench/discovery/scale.py [--seconds 60] [--tools 10000] [--requests]

The corpus (corpus.json) copied under new app names up to ``--tools`` tools, each copy's
description and first parameter naming its app (so no two tools share a text to embed). First BM25 alone
(no semantic extra): the search latency over the development queries. Then the daemon's
set-up: a ``SemanticReranker(background=True)`` with a disk cache in a temporary directory,
synced with every tool at once (the background thread starts embedding them, at low
priority), and searches run in this thread, one every ``--every`` seconds, for ``--seconds`` while it embeds
(or until every tool is embedded, its text and then its params text, if sooner):
their latency percentiles, and how many tools were embedded meanwhile (the throughput, from
which the time for all of them is extrapolated; the texts first, then the params texts). Last, a "restart": a new reranker over the
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
from broker.discovery import CACHE_FILE, IndexedTool, SemanticReranker, ToolIndex, params_text, tool_text  # noqa: E402


def _requests(spec: ToolSpec, label: str) -> list[str]:
    """Four typical requests of a realistic length (~40 characters each, as the helpers' were),
    made of the tool's own words, for ``--requests``: what they cost, not what they find."""
    words = [w for w in spec.description.lower().rstrip(".").split() if w.isalpha()] or [spec.name.lower()]
    return [f"please {' '.join(words[:4])} in {label}", f"can you {' '.join(words[1:5])} for me",
            f"I want to {' '.join(words[-4:])} now", f"{' '.join(words[:3])} again, like before"]


def _own_copy(spec: ToolSpec, label: str, requests: bool = False) -> ToolSpec:
    """``spec`` with its app's label in its description and its first parameter's, so each
    copy has texts of its own to embed (its text and its params text); with ``requests``,
    four typical requests (:func:`_requests`)."""
    schema = dict(spec.input_schema)
    properties = dict(schema.get("properties") or {})
    if properties:
        first = next(iter(properties))
        properties[first] = {**properties[first], "description": f"{properties[first].get('description', '')} ({label})"}
        schema["properties"] = properties
    return ToolSpec(name=spec.name, description=f"{spec.description} ({label})", input_schema=schema, title=spec.title,
                    annotations=spec.annotations, output_schema=spec.output_schema,
                    example_requests=_requests(spec, label) if requests else None)


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"median {statistics.median(ordered):.1f} / p95 {p95:.1f} / max {ordered[-1]:.1f} ms ({len(ordered)} searches)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to search while embedding")
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--every", type=float, default=0.1, help="seconds between searches while embedding")
    parser.add_argument("--budget", type=float, default=QUERY_EMBED_BUDGET,
                        help="how long a search waits for its query's vector (seconds; the daemon's by default)")
    parser.add_argument("--requests", action="store_true",
                        help="give every tool four typical requests (exampleRequests; round 13)")
    args = parser.parse_args(argv)
    tools = [IndexedTool(name, label, _own_copy(spec, label, args.requests))
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
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)

        def search(query: str) -> tuple[float, bool]:
            """One search as the daemon runs it: its latency (ms) and whether its vector was late."""
            start = time.perf_counter()
            # the text to embed (typos corrected) first, then its embedding in a thread of its
            # own, alongside BM25
            text = index.embed_text(query)
            vector = pool.submit(reranker.embed_query, text)
            prepared = index.prepare(query, 5)
            try:  # at most the budget from the start, then BM25's answer (as the daemon)
                query_vector = vector.result(timeout=max(0.0, args.budget - (time.perf_counter() - start)))
            except concurrent.futures.TimeoutError:  # (it ends in its thread; the next query waits for it)
                prepared.rate(prepared.hits[:5])
                return (time.perf_counter() - start) * 1000, True
            prepared.finish(query_vector if prepared.embedded_as == text else None)
            return (time.perf_counter() - start) * 1000, False

        # (ms, late) of the searches while the tool texts are embedded, then while the params texts are
        phases: tuple[list[tuple[float, bool]], list[tuple[float, bool]]] = ([], [])
        began = time.perf_counter()
        texts_done: float | None = None  # seconds from the start until every tool's text was embedded
        with_params = sum(1 for t in tools if params_text(t.spec.name, t.spec.title, t.spec.input_schema) is not None)
        i = 0
        while time.perf_counter() - began < args.seconds and (reranker.cached() < len(tools)
                                                              or reranker.cached_params() < with_params):
            phases[texts_done is not None].append(search(probes[i % len(probes)]))
            i += 1
            if texts_done is None and reranker.cached() == len(tools):
                texts_done = time.perf_counter() - began
            time.sleep(args.every)  # an agent's searches come one at a time, not back to back
        elapsed = texts_done or time.perf_counter() - began
        embedded = reranker.cached()
        for phase, what in zip(phases, ("the tool texts", "the params texts"), strict=True):
            if phase:
                print(f"| hybrid, {len(tools):,} tools, while the background thread embeds {what} | "
                      f"{percentiles([ms for ms, _ in phase])}; {sum(late for _, late in phase)} answered in "
                      f"BM25's order (vector late) |")
        print(f"| sync of {len(tools):,} tools (index + scheduling) | {sync_ms:.0f} ms |")
        per_tool = elapsed / max(1, embedded) * 1000
        whole = (f"all {len(tools):,} in {elapsed / 60:.1f} min (measured)" if embedded == len(tools)
                 else f"all {len(tools):,} in ~{per_tool * len(tools) / 60000:.1f} min")
        print(f"| background embedding while searching: tool texts | {embedded:,} tools in {elapsed:.0f} s: "
              f"{per_tool:.1f} ms per tool, {whole} |")
        total = time.perf_counter() - began
        print(f"| then their params texts (second vectors) | {reranker.cached_params():,} of {with_params:,} by "
              f"{total:.0f} s from the start ({total / 60:.1f} min)"
              + ("" if reranker.cached_params() == with_params else ", not all") + " |")
        if embedded == len(tools):  # and once every tool is embedded: each development query once
            after = []
            for query in probes:
                after.append(search(query))
                time.sleep(args.every)
            print(f"| hybrid, {len(tools):,} tools, every tool embedded | {percentiles([ms for ms, _ in after])}; "
                  f"{sum(was_late for _, was_late in after)} answered in BM25's order |")
        pool.shutdown()
        index.close()
        # a restart: the same texts, a new process's reranker over the same file
        texts = [(t.agent_name, tool_text(t.spec.name, t.spec.description, t.spec.title, t.spec.example_requests))
                 for t in tools]
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
