"""Schema regular expressions (``pattern``, ``patternProperties``) matched without backtracking.

Theory of operation
-------------------
``jsonschema`` matches ``pattern`` and ``patternProperties`` with Python's ``re``, which
backtracks: ``^(a+)+$`` against 32 ``a`` and a ``!`` takes minutes, on the daemon's event loop.
Here every pattern of a tool's schema is compiled once, at registration, into a
:class:`Matcher`:

* **RE2** (``google-re2``) when the pattern can be said in RE2's syntax with the same meaning:
  matching is linear in the text, whatever the pattern. :func:`to_re2` translates the Python
  pattern (``jsonschema`` checks every pattern with ``re.compile``, so the input is Python
  syntax) where the engines differ: ``\\d \\w \\s`` and their negations are Unicode in Python
  and ASCII in RE2 (spelled with ``\\p{..}`` classes here), Python's ``$`` also matches before
  a final newline (``(?:\\n?\\z)`` here), ``\\uXXXX`` becomes ``\\x{XXXX}``. What cannot be
  translated with the same meaning (``\\b``, inline flags, lookaround, backreferences,
  possessive or atomic groups, ...) goes to the fallback.
* **The ``regex`` module with a timeout** otherwise. It speaks Python's syntax (its VERSION0 is
  ``re``-compatible), and every match is given at most :data:`MATCH_TIMEOUT`; all fallback
  matches of one validation share :data:`CALL_BUDGET`. A match that runs out makes the argument
  invalid with a message saying so: the call is refused, the loop does not stall.

The matchers are reached through a context variable that :func:`matching` sets around one
validation, so one ``jsonschema`` validator class per dialect (:func:`safe_validator_class`)
serves every schema. The class overrides the keywords that match (``pattern``,
``patternProperties``, ``additionalProperties``); ``unevaluatedProperties`` reaches
``re.search`` inside ``jsonschema``'s helper modules, whose ``re`` is pointed at
:class:`_SafeRe` (it uses the active matchers, and plain ``re`` outside a validation, e.g. for
the metaschema).
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import time
from collections.abc import Iterator
from typing import Any, Final

import jsonschema
import jsonschema._keywords
import jsonschema._legacy_keywords
import jsonschema._utils
import jsonschema.validators
import re2
import regex
from jsonschema.exceptions import ValidationError

from ..errors import BrokerError

#: The longest one fallback (``regex`` module) match may run. Ordinary patterns match in
#: microseconds; 50 ms is far beyond them yet short enough that a refused call is no stall.
MATCH_TIMEOUT: Final = 0.05
#: All fallback matches of one validation together (an array of many strings, each checked by
#: a slow pattern, must not add up to a stall either).
CALL_BUDGET: Final = 0.1
#: The ``validator`` of the error a timed-out pattern check gives (see ``validation``).
TIMEOUT_RULE: Final = "pattern_timeout"

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a pattern RE2 refuses is expected (it goes to the fallback)
_RE2_OPTIONS.max_mem = 32 << 20  # a large pattern's automaton; beyond it: the fallback

_CLASS: Final = {
    "d": r"\p{Nd}",  # Python's \d: Unicode decimal digits
    "w": r"\p{L}\p{N}_",  # Python's \w: str.isalnum() or "_"
    "s": r"\t\n\x0b\f\r\x1c-\x1f\x85\p{Z}",  # Python's \s: str.isspace()
}


class PatternTimeout(BrokerError):
    """A fallback match ran out of time: the argument is refused."""


def to_re2(pattern: str) -> str | None:
    """``pattern`` (Python syntax) in RE2 syntax with the same meaning, or None if unsure."""
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n:
                return None
            d = pattern[i + 1]
            if d in "dws":
                out.append(_CLASS[d] if in_class else f"[{_CLASS[d]}]")
            elif d in "DWS":
                if in_class:
                    return None  # a negated class inside a class: not expressible in RE2
                out.append(f"[^{_CLASS[d.lower()]}]")
            elif d in "uU":
                width = 4 if d == "u" else 8
                digits = pattern[i + 2:i + 2 + width]
                if len(digits) != width or not all(h in "0123456789abcdefABCDEF" for h in digits):
                    return None
                out.append(f"\\x{{{digits}}}")
                i += 2 + width
                continue
            elif d.isalnum() and d not in "afnrtvxAz":
                return None  # \b \B \Z \N{..} backreferences octal ...: meanings differ
            else:
                out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            if c == "[":
                return None  # RE2 reads [: as a POSIX class; Python as a literal
            if c == "]":
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            i += 1
            if i < n and pattern[i] == "^":
                out.append("^")
                i += 1
            if i < n and pattern[i] == "]":
                return None  # a leading literal ]: spelled differently
            continue
        if c == "$":
            out.append(r"(?:\n?\z)")  # Python's $: at the end or before a final newline
        elif c == "(" and pattern.startswith("(?", i):
            if pattern.startswith("(?:", i) or (pattern.startswith("(?P<", i)):
                out.append(c)
            else:
                return None  # lookaround, inline flags, comments, atomic groups, (?P=name)
        elif c == "{" and pattern.startswith("{,", i):
            return None  # Python: {0,n}; RE2: literal
        elif c in "*+?}" and i + 1 < n and pattern[i + 1] == "+":
            return None  # possessive: RE2 would refuse it anyway
        else:
            out.append(c)
        i += 1
    return "".join(out)


class Matcher:
    """One compiled pattern: RE2 when it can, else ``regex`` with a timeout."""

    __slots__ = ("pattern", "_re2", "_fallback")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._re2: Any = None
        self._fallback: Any = None
        translated = to_re2(pattern)
        if translated is not None:
            try:
                self._re2 = re2.compile(translated, _RE2_OPTIONS)
            except re2.error:
                pass
        if self._re2 is None:
            self._fallback = regex.compile(pattern)  # may raise regex.error: the caller decides

    @property
    def linear(self) -> bool:
        return self._re2 is not None

    def search(self, text: str, deadline: float) -> bool:
        """True when ``pattern`` matches somewhere in ``text``; :class:`PatternTimeout` if the
        fallback runs out of time (``deadline``: ``time.monotonic()`` of the call's budget)."""
        if self._re2 is not None:
            try:
                return self._re2.search(text) is not None
            except UnicodeEncodeError:  # a lone surrogate: RE2 needs UTF-8; the fallback copes
                pass
        if self._fallback is None:
            self._fallback = regex.compile(self.pattern)
        remaining = min(MATCH_TIMEOUT, deadline - time.monotonic())
        if remaining <= 0:
            raise PatternTimeout(self.pattern)
        try:
            return self._fallback.search(text, timeout=remaining) is not None
        except TimeoutError:
            raise PatternTimeout(self.pattern) from None


class PatternSet:
    """The matchers of one schema, compiled at registration (see :func:`collect_patterns`)."""

    __slots__ = ("_matchers",)

    def __init__(self, patterns: set[str]) -> None:
        self._matchers: dict[str, Matcher] = {}
        for pattern in patterns:
            try:
                self._matchers[pattern] = Matcher(pattern)
            except regex.error:
                pass  # not really a pattern (a "pattern" key inside a default, say): compiled if used

    def __len__(self) -> int:
        return len(self._matchers)

    @property
    def linear(self) -> bool:
        """Every pattern runs on RE2 (none can take the fallback's time)."""
        return all(matcher.linear for matcher in self._matchers.values())

    def matcher(self, pattern: str) -> Matcher:
        found = self._matchers.get(pattern)
        if found is None:  # only for a pattern the walk missed; bounded by the schema's size
            found = self._matchers[pattern] = Matcher(pattern)
        return found


def collect_patterns(schema: Any) -> set[str]:
    """Every string that may be used as a regex in ``schema`` (iteratively: no depth limit)."""
    found: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            value = node.get("pattern")
            if isinstance(value, str):
                found.add(value)
            keyed = node.get("patternProperties")
            if isinstance(keyed, dict):
                found.update(k for k in keyed if isinstance(k, str))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


_active: contextvars.ContextVar[tuple[PatternSet, float] | None] = contextvars.ContextVar(
    "toolbridge_patterns", default=None
)


@contextlib.contextmanager
def matching(patterns: PatternSet) -> Iterator[None]:
    """Make ``patterns`` the ones used by the validation run inside, with a fresh budget."""
    token = _active.set((patterns, time.monotonic() + CALL_BUDGET))
    try:
        yield
    finally:
        _active.reset(token)


def _search(pattern: str, text: str) -> bool:
    active = _active.get()
    if active is None:  # not a tool's validation (the metaschema): trusted patterns
        return re.search(pattern, text) is not None
    patterns, deadline = active
    return patterns.matcher(pattern).search(text, deadline)


def _timeout_error(what: str) -> ValidationError:
    return ValidationError(
        f"the pattern check for {what} took too long (over {MATCH_TIMEOUT * 1000:.0f} ms); "
        "the tool's pattern is too slow for this value: send a shorter or simpler value",
        validator=TIMEOUT_RULE,
    )


# --- the keywords ----------------------------------------------------------------------------


def _pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    try:
        matched = _search(patrn, instance)
    except PatternTimeout:
        yield _timeout_error("this value")
        return
    if not matched:
        yield ValidationError(f"{instance!r} does not match {patrn!r}")


def _pattern_properties(validator: Any, pattern_properties: dict[str, Any], instance: Any,
                        schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        for key, value in instance.items():
            try:
                matched = _search(pattern, key)
            except PatternTimeout:
                yield _timeout_error("a property name")
                return
            if matched:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, ap: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    # jsonschema's own, with its one re.search (over the patterns joined by "|") done per pattern.
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = set()
    for key in instance:
        if key in properties:
            continue
        try:
            if any(_search(p, key) for p in patterns):
                continue
        except PatternTimeout:
            yield _timeout_error("a property name")
            return
        extras.add(key)
    if validator.is_type(ap, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], ap, path=extra)
    elif not ap and extras:
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            listed = ", ".join(repr(each) for each in sorted(patterns))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {listed}")
        else:
            error = "Additional properties are not allowed (%s %s unexpected)"
            yield ValidationError(error % jsonschema._utils.extras_msg(sorted(extras, key=str)))


_OVERRIDES: Final = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
}
_classes: dict[type[Any], type[Any]] = {}


def safe_validator_class(cls: type[Any]) -> type[Any]:
    """``cls`` (a jsonschema validator class) with the keywords that match regexes replaced."""
    safe = _classes.get(cls)
    if safe is None:
        keywords = {k: v for k, v in _OVERRIDES.items() if k in cls.VALIDATORS}
        safe = _classes[cls] = jsonschema.validators.extend(cls, keywords)  # type: ignore[no-untyped-call]
    return safe


class _SafeRe:
    """What ``re`` is inside jsonschema's helper modules: ``search`` goes through the matchers."""

    def search(self, pattern: str, string: str) -> bool:
        return _search(pattern, string)

    def __getattr__(self, name: str) -> Any:
        return getattr(re, name)


# unevaluatedProperties (2019-09, 2020-12) finds property names matched by patternProperties with
# re.search inside these modules; a timeout there raises PatternTimeout, which the validation
# turns into the same refusal.
for _module in (jsonschema._utils, jsonschema._legacy_keywords):
    if getattr(_module, "re", None) is re:
        _module.re = _SafeRe()  # type: ignore[attr-defined]
