"""RFC 6570 level-1 URI templates, matched in time linear in the URI, with nothing compiled.

Theory of operation
-------------------
A template such as ``cal://{year}-{month}-{day}`` is split once, when first matched
(:attr:`UriTemplate.literals`: linear in its length, no regex compiled), into its literal segments
``["cal://", "-", "-", ""]`` with a variable between each two. A variable's value is any run of characters other than
``/ ? # { }`` (what :data:`EXCLUDED` holds; possibly empty): the meaning the broker's
templates always had (a backtracking regex ``cal://[^/?#{}]*-[^/?#{}]*-[^/?#{}]*`` before, which
took seconds for a 2 KB near miss such as ``cal://`` followed by 2,000 ``-`` and a ``/``).

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

So the match either succeeds with the earliest placements or not at all: one left-to-right pass,
each character looked at a bounded number of times (``str.find`` is CPython's two-way search
for long texts; the URI's length is bounded by :data:`MAX_URI_CHARS` besides). Which values the
variables would get does not matter to the broker (it passes the URI on; the app extracts them
itself), only whether the URI matches, so ambiguous splits (``2024-01-02-03``) cannot change
anything.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["EXCLUDED", "EXPRESSION", "MAX_URI_CHARS", "UriTemplate"]

#: A level-1 expression: ``{name}`` (anything else in braces is literal text, as it always was).
EXPRESSION: Final = re.compile(r"\{([A-Za-z0-9_.%]+)\}")
#: What a variable's value never holds (and what only a literal can match).
EXCLUDED: Final = "/?#{}"
_EXCLUDED_CHAR: Final = re.compile(r"[/?#{}]")
#: The longest resource URI (the app's own part) the broker matches, reads or passes on as
#: updated: 8 KiB, four times the longest template an app may declare (2,048 characters).
MAX_URI_CHARS: Final = 8192


class UriTemplate:
    """One template: its literal segments (one more than its variables), split on first use."""

    __slots__ = ("text", "_literals")

    def __init__(self, text: str) -> None:
        self.text = text
        self._literals: tuple[str, ...] | None = None

    @classmethod
    def parse(cls, template: str) -> UriTemplate:
        """``template``, split when it is first matched (an app may offer 1,000 of 2 KB: splitting
        them all at once, ~30-75 ms, would be a stall of its own; matching takes turns)."""
        return cls(template)

    @property
    def literals(self) -> tuple[str, ...]:
        """``literals[0]``, variable, ``literals[1]``, variable, ..., ``literals[-1]``."""
        if self._literals is None:
            # split() with the expression's one group alternates literal, name, literal, ...
            self._literals = tuple(EXPRESSION.split(self.text)[::2])
        return self._literals

    def matches(self, uri: str) -> bool:
        """Whether ``uri`` is an expansion of the template (see the module docstring)."""
        literals = self.literals
        first, last = literals[0], literals[-1]
        if len(literals) == 1:
            return uri == first
        end = len(uri) - len(last)
        if end < len(first) or not uri.startswith(first) or not uri.endswith(last):
            return False
        position = len(first)
        for literal in literals[1:-1]:
            found = uri.find(literal, position, end)
            # The earliest copy: if the text before it holds an excluded character, so would the
            # text before any later copy.
            if found < 0 or _EXCLUDED_CHAR.search(uri, position, found) is not None:
                return False
            position = found + len(literal)
        return _EXCLUDED_CHAR.search(uri, position, end) is None

    def __repr__(self) -> str:
        return f"UriTemplate({self.text!r})"
