"""``app_client.protocol.UriTemplate``: the linear matcher means what the regexes it replaced meant,
in the broker (match or not) and in an app (the variables' values)."""

from __future__ import annotations

import random
import re

import pytest

from app_client.protocol import BROKER_EXPRESSION as EXPRESSION
from app_client.protocol import UriTemplate
from app_client.resources import define_template, find


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
    assert UriTemplate(template).matches(uri) is expected
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
        assert UriTemplate(template).matches(uri) is expected, (template, uri)
    assert 5_000 < matched < 15_000  # both outcomes well covered


APP_EXPRESSION = re.compile(r"\{([A-Za-z0-9_]+)\}")


def app_reference(template: str) -> re.Pattern[str]:
    """app_client's former matcher: named greedy groups of ``[^/?#]*``."""
    parts, last = [], 0
    for match in APP_EXPRESSION.finditer(template):
        parts += [re.escape(template[last:match.start()]), f"(?P<{match.group(1)}>[^/?#]*)"]
        last = match.end()
    return re.compile("".join([*parts, re.escape(template[last:])]))


@pytest.mark.parametrize(("template", "uri", "values"), [
    ("cal://{year}-{month}-{day}", "cal://2024-01-02", {"year": "2024", "month": "01", "day": "02"}),
    ("cal://{year}-{month}-{day}", "cal://2024-01-02-03", {"year": "2024-01", "month": "02", "day": "03"}),
    ("{a}{b}", "xy", {"a": "xy", "b": ""}),  # the first variable takes all it can
    ("x{a}/{b}y", "x/y", {"a": "", "b": ""}),
    ("notes://{name}", "notes://a{b}", {"name": "a{b}"}),  # braces are values in an app's templates
    ("file:///docs/{name}.md", "file:///docs/a/b.md", None),
])
def test_an_app_gets_the_values_the_regex_gave(template: str, uri: str, values: dict[str, str] | None) -> None:
    matcher = UriTemplate(template, expression=APP_EXPRESSION, excluded="/?#")
    assert matcher.match(uri) == values
    found = app_reference(template).fullmatch(uri)
    assert (found.groupdict() if found else None) == values


def test_app_values_agree_with_the_regex_on_many_small_cases() -> None:
    rng = random.Random(28)
    pieces = ["a", "b", "ab", "/", "-", "?", "{x}", "{y}", "{z}"]
    matched = 0
    for _ in range(20_000):
        chosen: list[str] = []
        for piece in (rng.choice(pieces) for _ in range(rng.randint(1, 7))):
            if not (piece.startswith("{") and piece in chosen):  # a name at most once (a regex's rule)
                chosen.append(piece)
        template = "".join(chosen)
        uri = APP_EXPRESSION.sub(lambda _: "".join(rng.choice("ab-/{") for _ in range(rng.randint(0, 3))), template)
        if uri and rng.random() < 0.4:
            at = rng.randrange(len(uri))
            uri = uri[:at] + rng.choice("ab-/?") + uri[at + 1:]
        found = app_reference(template).fullmatch(uri)
        expected = found.groupdict() if found else None
        matched += expected is not None
        assert UriTemplate(template, expression=APP_EXPRESSION, excluded="/?#").match(uri) == expected, (template, uri)
    assert 5_000 < matched < 15_000


def test_app_client_finds_past_a_near_miss_and_decodes_values() -> None:
    """The app's own lookup (``find``) used a backtracking regex too: a URI that matches a later
    template and nearly matches an earlier one took seconds in the app (cubic; here it is short
    enough to finish either way); a name used twice was a ``re.error``."""
    handler = lambda **_: ""  # noqa: E731
    day = define_template(handler, "cal://{year}-{month}-{day}")
    anything = define_template(handler, "cal://{rest}/")
    definitions = {d.key: d for d in (day, anything)}
    near_miss = "cal://" + "-" * 300 + "/"
    assert find(definitions, near_miss) == (anything, {"rest": "-" * 300})
    assert find(definitions, "cal://2024-01-02%20x") == (day, {"year": "2024", "month": "01", "day": "02 x"})
    with pytest.raises(ValueError, match="twice"):
        define_template(handler, "x://{a}/{a}")
