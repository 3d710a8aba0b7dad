"""Schema regexes cannot stall the daemon (issue 14, item 2), and refused arguments stay out of
the daemon's log (item 8).

``pattern`` / ``patternProperties`` run on RE2 (linear time) or, for what RE2 cannot express,
on the ``regex`` module with a timeout: see ``broker.core.patterns``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import structlog
import trio

from broker.core import patterns
from broker.daemon.run import DaemonInfo
from broker.core.validation import compile_schema, log_safe
from mcp_testkit import running_daemon
from rawapp import RawApp

REDOS = "^(a+)+$"  # Python's re: about 2^n steps for n "a" and a "!"
EVIL = "a" * 40 + "!"
#: Lookahead or a backreference: RE2 cannot compile them, the fallback backtracks (catastrophically here).
SLOW_LOOKAHEAD = "^(?=a)(a|aa)+$"
SLOW_BACKREF = r"^(a|a)*\1$"


def string_tool(name: str, pattern: str) -> dict[str, Any]:
    return {"name": name, "description": "takes a patterned string", "inputSchema": {
        "type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}, "required": ["s"]}}


def validator(pattern: str) -> Any:
    return compile_schema("t", string_tool("t", pattern)["inputSchema"], 1 << 20)


# --- the validator ---------------------------------------------------------------------------


def test_a_backtracking_pattern_is_matched_in_linear_time() -> None:
    validate = validator(REDOS)
    started = time.monotonic()
    errors = validate({"s": "a" * 5000 + "!"})  # Python's re would not finish this in a lifetime
    assert time.monotonic() - started < 1.0
    assert len(errors) == 1 and errors[0].startswith("$.s: 'aaaa") and errors[0].endswith("...")
    assert validate({"s": "aaaa"}) == []


@pytest.mark.parametrize("schema, arguments", [
    ({"type": "object", "patternProperties": {REDOS: {"type": "integer"}}}, {EVIL: "x"}),
    ({"type": "object", "patternProperties": {REDOS: {}}, "additionalProperties": False}, {EVIL: 1}),
    ({"type": "object", "patternProperties": {REDOS: {}}, "unevaluatedProperties": False}, {EVIL: 1}),
    ({"type": "object", "propertyNames": {"pattern": REDOS}}, {EVIL: 1}),
])
def test_property_name_patterns_are_linear_too(schema: dict[str, Any], arguments: dict[str, Any]) -> None:
    validate = compile_schema("t", schema, 1 << 20)
    started = time.monotonic()
    validate({EVIL * 100: 1, **arguments})
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize("pattern, good, bad", [
    (r"^\d+$", "٣12", "12a"),  # Python's \d is Unicode (kept as it was)
    (r"^\w+$", "héllo_1", "a-b"),
    (r"^\S+\s\S+$", "a\u2003b", "ab"),
    (r"^[a-z]+$", "abc\n", "abc\n\n"),  # Python's $ also matches before a final newline
    (r"^\u00e9+$", "éé", "e"),
    (r"colou?r", "the color", "colr"),
    (r"^[^\d\s]+$", "abc", "a1"),
    (r"\bcat\b", "a cat", "concat"),  # \b: the fallback (RE2's \b is ASCII-only)
    (r"^(?=.*\d)(?=.*[a-z]).{8,}$", "abcdefg1", "abcdefgh"),  # lookahead: the fallback
    (r"^(\w)\1$", "aa", "ab"),  # backreference: the fallback
    (r"(?i)^abc$", "ABC", "abd"),
])
def test_patterns_mean_what_they_meant(pattern: str, good: str, bad: str) -> None:
    validate = validator(pattern)
    assert validate({"s": good}) == []
    assert validate({"s": bad}) != []


def test_translatable_patterns_use_re2() -> None:
    assert patterns.Matcher(r"^[\w.+-]+@[\w-]+\.[\w.]+$").linear
    assert patterns.Matcher(REDOS).linear
    assert not patterns.Matcher(SLOW_LOOKAHEAD).linear


@pytest.mark.parametrize("pattern", [SLOW_LOOKAHEAD, SLOW_BACKREF])
def test_a_slow_fallback_pattern_times_out_with_a_clear_message(pattern: str) -> None:
    validate = validator(pattern)
    started = time.monotonic()
    errors = validate({"s": "a" * 60 + "!"})
    assert time.monotonic() - started < 1.0  # the budget is 0.1 s
    assert errors == [f"$.s: the pattern check for this value took too long (over 50 ms); the tool's "
                      "pattern is too slow for this value: send a shorter or simpler value"]


def test_many_slow_values_share_one_budget() -> None:
    schema = {"type": "object", "properties": {"v": {"type": "array", "items": {"pattern": SLOW_LOOKAHEAD}}}}
    validate = compile_schema("t", schema, 1 << 20)
    started = time.monotonic()
    errors = validate({"v": ["a" * 60 + "!"] * 200})
    assert time.monotonic() - started < 1.0  # not 200 x 50 ms
    assert errors and all("took too long" in e for e in errors)


def test_log_text_names_the_rule_not_the_value() -> None:
    schema = {"type": "object", "properties": {"pin": {"type": "integer"}, "mode": {"enum": ["a", "b"]},
                                               "code": {"type": "string", "pattern": "^[0-9]+$"}},
              "required": ["pin"], "additionalProperties": False}
    validate = compile_schema("t", schema, 1 << 20)
    errors = validate({"pin": "SECRET-PIN-9999", "mode": "SECRET-MODE", "code": "SECRET-CODE"})
    assert "SECRET-PIN-9999" in "; ".join(errors)  # the agent is told what it sent
    logged = log_safe(errors)
    assert "SECRET" not in logged
    assert logged == ("$.code: fails 'pattern' '^[0-9]+$'; $.mode: fails 'enum' ['a', 'b']; "
                      "$.pin: not of type 'integer'")


# --- through the daemon -------------------------------------------------------------------------


async def registered_app(info: DaemonInfo, tools: list[dict[str, Any]]) -> RawApp:
    app = await RawApp.connect(info.port)
    reply = await app.register(info.token, app_name="Patterns", tools=tools)
    assert reply["type"] == "registered", reply
    return app


async def test_a_redos_argument_is_refused_at_once_through_the_router(tmp_path: Path) -> None:
    """Before: ``re`` ran ``^(a+)+$`` on the event loop; a 32-char argument froze the daemon 71 s."""
    async with running_daemon(tmp_path / "home", http_port=None) as info:
        app = await registered_app(info, [string_tool("check", REDOS), string_tool("look", SLOW_LOOKAHEAD)])
        with trio.fail_after(2):  # a liveness bound: the old code took minutes
            outcome = await info.core.router.call_tool("Patterns__check", {"s": "a" * 32 + "!"})
            slow = await info.core.router.call_tool("Patterns__look", {"s": "a" * 60 + "!"})
        assert outcome.kind == "invalid_arguments" and "does not match" in outcome.message
        assert slow.kind == "invalid_arguments" and "took too long" in slow.message
        await app.aclose()


async def test_refused_argument_values_stay_out_of_the_daemon_log(tmp_path: Path) -> None:
    tool = {"name": "unlock", "description": "", "inputSchema": {
        "type": "object", "properties": {"pin": {"type": "integer"}}, "required": ["pin"]}}
    with structlog.testing.capture_logs() as logs:
        async with running_daemon(tmp_path / "home", http_port=None) as info:
            app = await registered_app(info, [tool])
            outcome = await info.core.router.call_tool("Patterns__unlock", {"pin": "SECRET-PIN-9999"})
            await app.aclose()
    assert outcome.kind == "invalid_arguments"
    assert outcome.message == "invalid arguments for Patterns__unlock: $.pin: 'SECRET-PIN-9999' is not of type 'integer'"
    [audit] = [e for e in logs if e["event"] == "tool_arg_validation_failure"]
    assert audit["error"] == "invalid arguments for Patterns__unlock: $.pin: not of type 'integer'"
    assert not [e for e in logs if "SECRET-PIN-9999" in repr(e)]
