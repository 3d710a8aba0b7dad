"""RFC 6570 level-1 URI templates, matched in time linear in the URI, with nothing compiled.

Theory of operation
-------------------
A template such as ``cal://{year}-{month}-{day}`` is split once, when first matched
(:attr:`UriTemplate.literals`: linear in its length, no regex compiled), into its literal segments
``["cal://", "-", "-", ""]`` with a variable between each two. A variable's value is any run of
characters other than the template's *excluded* ones (possibly empty): ``/ ? #`` for an app's
own templates (``app_client.resources``), ``/ ? # { }`` in the broker, the meanings their
backtracking regexes (``cal://[^/?#]*-[^/?#]*-[^/?#]*``) always had. Those took seconds for a
2 KB near miss such as ``cal://`` followed by 2,000 ``-`` and a ``/``, and compiling 1,000
templates of 2 KB took 12.5 s.

:meth:`UriTemplate.matches` answers what a full match of that regex would: is there *any* way to
split the URI into the literals and variable values? The first and last literals are anchored
(``startswith`` / ``endswith``); each literal in between is placed at its *earliest* occurrence
after the previous one, and the text skipped over (a variable's value) must hold no excluded
character. No backtracking is needed, because the earliest placement never loses a match:

* If the literal holds an excluded character, no valid placement is earlier than another valid
  one: an earlier copy would put its first excluded character either inside the skipped text (not
  allowed) or over a non-excluded character of the later copy (it would not be a copy).
* If it holds none, moving it earlier only hands characters that are not excluded (its own, and
  skipped ones) to the next variable.

So the match either succeeds with the earliest placements or not at all: one left-to-right pass
(``str.find`` is CPython's two-way search for long texts; resource URIs are bounded by
:data:`MAX_RESOURCE_URI_CHARS` besides).

:meth:`UriTemplate.match` also gives the variables' values, exactly those the regex gave. A
backtracking regex with greedy variables gives the first variable the longest value it can
have, then the second, and so on: the literals at their *latest* placements. By the same
argument mirrored, placing each literal at its latest occurrence, from the right, never loses a
match and puts every literal as late as any match could; that is the earliest-placement pass
over the reversed URI and literals. Ambiguous URIs (``2024-01-02-03``: ``year`` is
``2024-01``) thus split as they always did.
"""

from __future__ import annotations

import functools
import re
from typing import Final

__all__ = ["BROKER_EXCLUDED", "BROKER_EXPRESSION", "MAX_RESOURCE_URI_CHARS", "UriTemplate"]

#: The broker's level-1 expression, ``{name}`` (anything else in braces is literal text).
BROKER_EXPRESSION: Final = re.compile(r"\{([A-Za-z0-9_.%]+)\}")
#: What a variable's value never holds in the broker's matching.
BROKER_EXCLUDED: Final = "/?#{}"
#: The longest resource URI (an app's own) the broker matches, reads or passes on as updated:
#: 8 KiB, four times the longest template an app may declare (2,048 characters).
MAX_RESOURCE_URI_CHARS: Final = 8192


@functools.lru_cache(maxsize=8)
def _excluded_class(excluded: str) -> re.Pattern[str]:
    return re.compile("[" + re.escape(excluded) + "]")


class UriTemplate:
    """One template: its literal segments (one more than its variables), split on first use."""

    __slots__ = ("text", "_expression", "_excluded", "_split")

    def __init__(self, text: str, *, expression: re.Pattern[str] = BROKER_EXPRESSION,
                 excluded: str = BROKER_EXCLUDED) -> None:
        self.text = text
        self._expression = expression
        self._excluded = _excluded_class(excluded)
        self._split: list[str] | None = None

    def _parts(self) -> list[str]:
        # split() with the expression's one group alternates literal, name, literal, ... Done on
        # first use: an app may offer 1,000 templates of 2 KB (splitting them all at once, 30-75
        # ms, would be a stall of its own).
        if self._split is None:
            self._split = self._expression.split(self.text)
        return self._split

    @property
    def literals(self) -> list[str]:
        """``literals[0]``, variable, ``literals[1]``, variable, ..., ``literals[-1]``."""
        return self._parts()[::2]

    @property
    def names(self) -> list[str]:
        """The variables' names, in order."""
        return self._parts()[1::2]

    def matches(self, uri: str) -> bool:
        """Whether ``uri`` is an expansion of the template (see the module docstring)."""
        return _earliest(uri, self.literals, self._excluded) is not None

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables' values (not decoded) as a greedy regex would split ``uri``, or None.
        A name used twice gets its last value."""
        literals = self.literals
        size = len(uri)
        backwards = _earliest(uri[::-1], [literal[::-1] for literal in reversed(literals)], self._excluded)
        if backwards is None:
            return None
        # Each reversed literal's start, mapped back: where the literal ends in ``uri``.
        ends = [size - start for start in reversed(backwards)]
        values = {}
        for index, name in enumerate(self.names):
            begin = ends[index]
            values[name] = uri[begin:ends[index + 1] - len(literals[index + 1])]
        return values

    def __repr__(self) -> str:
        return f"UriTemplate({self.text!r})"


def _earliest(uri: str, literals: list[str], excluded: re.Pattern[str]) -> list[int] | None:
    """The literals' earliest valid start positions in ``uri`` (the first at 0, the last at the
    end), or None when ``uri`` does not match."""
    first, last = literals[0], literals[-1]
    if len(literals) == 1:
        return [0] if uri == first else None
    end = len(uri) - len(last)
    if end < len(first) or not uri.startswith(first) or not uri.endswith(last):
        return None
    starts = [0]
    position = len(first)
    for literal in literals[1:-1]:
        found = uri.find(literal, position, end)
        # The earliest copy: if the text before it holds an excluded character, so would the
        # text before any later copy.
        if found < 0 or excluded.search(uri, position, found) is not None:
            return None
        starts.append(found)
        position = found + len(literal)
    if excluded.search(uri, position, end) is not None:
        return None
    starts.append(end)
    return starts
