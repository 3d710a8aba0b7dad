"""Search cost of one source tree against another, on the same machine at the same time.

Usage (compare the tree at a commit with this one)::

    git archive <commit> broker app_client | tar -x -C /tmp/old
    .venv/bin/python bench/discovery/timing.py /tmp/old
    .venv/bin/python bench/discovery/timing.py .

Imports ``broker.discovery`` from the given tree, indexes the corpus (235 tools) and the corpus
copied to 10,000 tools (``run.scaled``), and times every development query and its typo'd copy
(690 searches, limit 5) three times; prints the mean per search of each round and the best
round (the least disturbed by other processes on a shared machine).
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    tree = Path(argv[0]).resolve() if argv else HERE.parent.parent
    sys.path.insert(0, str(tree))
    import broker.discovery as discovery

    spec = importlib.util.spec_from_file_location("discovery_bench_run", HERE / "run.py")
    assert spec is not None and spec.loader is not None
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)  # its data helpers only; the index is the tree's
    tools = run.load_corpus()
    queries = [q for p in (run.QUERIES, run.HOLDOUT, run.HOLDOUT2, run.HOLDOUT3) for q, _ in run.load_queries(p)]
    queries += [run.typo(q, i) for i, q in enumerate(list(queries))]
    print(f"tree: {Path(discovery.__file__).parent}")
    for size in (len(tools), run.SCALE):
        index = discovery.ToolIndex()
        index.replace_all(run.scaled(tools, size))
        for query in queries[:50]:  # warm up
            index.search(query, 5)
        rounds = []
        for _ in range(3):
            start = time.perf_counter()
            for query in queries:
                index.search(query, 5)
            rounds.append((time.perf_counter() - start) * 1000 / len(queries))
        print(f"{size:>6} tools: best {min(rounds):.2f} ms per search (rounds: "
              f"{', '.join(f'{r:.2f}' for r in rounds)})")
        index.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
