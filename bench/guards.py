"""The path-traversal guard on large arguments: how long one call blocks the event loop.

Usage: ``python bench/guards.py [--mb 3.8] [--repeats 5] [--json]``

Times ``broker.core.guards.find_path_traversal`` (what the router runs on every call of a guarded
tool, on the event loop) on one argument of about ``--mb`` megabytes, the median of
``--repeats`` runs, for each kind of content:

- ``prose``: text with many '.', '%' and some non-ASCII ("Sales rose 5.2% ... see ch. 3..4");
- ``urlencoded``: a percent-encoded blob (every character escaped, as form data is);
- ``nested``: one '..' encoded as deep as the size allows (``%252525...2e``), the worst case
  for a decoder that goes round after round;
- ``nested_mixed``: the same depth with layers no C shortcut decodes (the Python stack pass);
- ``many_small``: 100,000 short ordinary strings in a list (the walk's own cost).

Run it from the repository root; ``PYTHONPATH=<other tree>`` times another tree's guard.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from broker.core.guards import find_path_traversal


def prose(size: int) -> str:
    sentence = ("Sales rose 5.2% in Q3 (see ch. 3..4, p. 12); margins were 11.5%, up from 9.8%. "
                "Caf\u00e9 costs \u20ac3.50... Wait... the 100% figure is from 2019-2020. ")
    return (sentence * (size // len(sentence) + 1))[:size]


def urlencoded(size: int) -> str:
    return "".join(f"%{b:02X}" for b in (b"docs/report-2024.txt and more " * (size // 90 + 1)))[:size // 3 * 3]


def nested(size: int) -> str:
    return "%" + "25" * ((size - 8) // 2) + "2e%2e/x"


def nested_mixed(size: int) -> str:
    # Each layer a %uFF05 escape whose '％' folds to the '%' of the next: no C shortcut applies.
    return "%uFF05" + "uFF05" * ((size - 16) // 5) + "u002e./x"


def many_small(size: int) -> Any:
    return [f"item {i} of the list, ok" for i in range(100_000)]


CASES: dict[str, Callable[[int], Any]] = {
    "prose": prose, "urlencoded": urlencoded, "nested": nested, "nested_mixed": nested_mixed, "many_small": many_small,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=3.8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="skip further repeats of a case once one run took longer than this")
    args = parser.parse_args()
    size = int(args.mb * 1_000_000)
    results: dict[str, dict[str, Any]] = {}
    for name, make in CASES.items():
        value = {"text": make(size)}
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            found = find_path_traversal(value)
            times.append(time.perf_counter() - start)
            if times[-1] > args.timeout:
                break
        results[name] = {"ms": round(statistics.median(times) * 1000, 1), "found": found, "runs": len(times)}
    if args.json:
        print(json.dumps(results))
    else:
        for name, result in results.items():
            print(f"{name:12} {result['ms']:10.1f} ms   found={result['found']}  runs={result['runs']}")


if __name__ == "__main__":
    main()
