"""``broker.core.uri_templates``: the linear matcher means what the regex it replaced meant."""

from __future__ import annotations

import random
import re

import pytest

from broker.core.uri_templates import EXPRESSION, UriTemplate


def reference(template: str) -> re.Pattern[str]:
    """The broker's former matcher (a backtracking regex): the meaning to keep, on short inputs."""
    parts, last = [], 0
    for match in EXPRESSION.finditer(template):
        parts += [re.escape(template[last:match.start()]), r"[^/?#{}]*"]
        last = match.end()
    return re.compile("".join([*parts, re.escape(template[last:])]))


@pytest.mark.parametrize(("template", "uri", "expected"), [
    ("cal://{year}-{month}-{day}", "cal://2024-01-02", True),
    ("cal://{year}-{month}-{day}", "cal://2024-01-02-03", True),  # ambiguous: still a match
    ("cal://{year}-{month}-{day}", "cal://--", True),  # empty values
    ("cal://{year}-{month}-{day}", "cal://2024-01", False),
    ("cal://{year}-{month}-{day}", "cal://2024/01-02", False),  # a value never holds '/'
    ("file:///notes/{name}", "file:///notes/a%2Fb", True),
    ("file:///notes/{name}", "file:///notes/a/b", False),
    ("file:///notes/{name}", "file:///notes/", True),
    ("{a}{b}", "xy", True),
    ("{a}{b}", "x?y", False),
    ("x{a}/{b}y", "x/y", True),
    ("x{a}/{b}y", "xy", False),  # the literals may not overlap
    ("p/{a-b}", "p/{a-b}", True),  # not an expression: literal text
    ("plain://uri", "plain://uri", True),
    ("plain://uri", "plain://uri2", False),
    ("{a}/x/{b}", "q/x/x/r", False),
    ("{a}x/{b}", "ax/ax/", False),
])
def test_examples(template: str, uri: str, expected: bool) -> None:
    assert UriTemplate.parse(template).matches(uri) is expected
    assert (reference(template).fullmatch(uri) is not None) is expected


def test_agrees_with_the_regex_on_many_small_cases() -> None:
    rng = random.Random(27)
    pieces = ["a", "b", "ab", "/", "-", "?", "{", "}", "{x}", "{y}"]
    matched = 0
    for _ in range(20_000):
        template = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 7)))
        # Mostly expansions of the template, some of them mutated: near misses.
        uri = EXPRESSION.sub(lambda _: "".join(rng.choice("ab-/") for _ in range(rng.randint(0, 3))), template)
        if uri and rng.random() < 0.4:
            at = rng.randrange(len(uri))
            uri = uri[:at] + rng.choice("ab-/?{}") + uri[at + 1:]
        expected = reference(template).fullmatch(uri) is not None
        matched += expected
        assert UriTemplate.parse(template).matches(uri) is expected, (template, uri)
    assert 5_000 < matched < 15_000  # both outcomes well covered
