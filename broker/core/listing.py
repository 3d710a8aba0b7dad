"""Prepared lists for ``resources/list``, ``resources/templates/list`` and ``prompts/list``.

Theory of operation
-------------------
A list page is cut from one sorted list (``broker.mcp.results.list_page``: the cursor is the
last key of the previous page, found by bisection). Building that list for every page cost
~1.1 s per page of ``prompts/list`` over 63,000 prompts (every entry made and the whole list
sorted, each time). Instead each app's entries are made once, when it offers them, as a *run*
sorted by key (:func:`sorted_run`); the directory keeps a :class:`Listing` per list and rebuilds
it only after a change, from the runs (:meth:`Listing.of`: concatenating and sorting presorted
runs is a merge, ~10 ms for 63,000 entries). A page then costs a bisection and a slice.

Entries are shared by every page and session that lists them: nobody may change one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

import attrs

__all__ = ["EMPTY", "Entry", "Listing", "Run", "sorted_run"]

Entry = dict[str, Any]
#: One app's entries with their sort keys (agent-facing URIs or names), sorted by key.
Run = list[tuple[str, Entry]]


def sorted_run(entries: Iterable[Entry], key: Callable[[Entry], str]) -> Run:
    """``entries`` with their keys, sorted by key."""
    run = [(key(entry), entry) for entry in entries]
    run.sort(key=_first)
    return run


def _first(pair: tuple[str, Entry]) -> str:
    return pair[0]


@attrs.frozen
class Listing:
    """A whole list, sorted: ``names[i]`` is the key of ``entries[i]``."""

    names: list[str]
    entries: list[Entry]

    @classmethod
    def of(cls, runs: Iterable[Run]) -> Listing:
        """The runs merged (timsort finds each presorted run and merges them)."""
        pairs = [pair for run in runs for pair in run]
        pairs.sort(key=_first)
        return cls([name for name, _ in pairs], [entry for _, entry in pairs])


EMPTY: Final = Listing([], [])
