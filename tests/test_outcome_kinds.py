"""OutcomeKind: the strings every outcome kind carries on the wire, in logs and in the call log.

The enum replaced five string tables (router, call log, agent library); these pin what those
tables said, so a renamed member or a moved kind shows up here and not in a user's call log.
"""

from __future__ import annotations

from broker.core.outcome import CallOutcome, OutcomeKind


def test_the_kinds_are_the_strings_they_always_were() -> None:
    assert [str(kind) for kind in OutcomeKind] == [
        "ok", "unknown_tool", "invalid_arguments", "guard_rejected", "busy", "timeout", "cancelled",
        "app_disconnected", "app_error", "internal_error", "shutdown",
    ]
    assert f"{OutcomeKind.TIMEOUT}" == "timeout" and OutcomeKind.BUSY == "busy"


def test_what_each_kind_means_elsewhere() -> None:
    assert {k.value: k.audit_event for k in OutcomeKind} == {
        "ok": "tool_executed",
        "unknown_tool": "unknown_tool",
        "invalid_arguments": "tool_arg_validation_failure",
        "guard_rejected": "tool_guard_rejected",
        "timeout": "tool_timeout",
        "cancelled": "tool_cancelled",
        "busy": "tool_execution_error",
        "app_disconnected": "tool_execution_error",
        "app_error": "tool_execution_error",
        "internal_error": "tool_execution_error",
        "shutdown": "tool_execution_error",
    }
    assert {k.value for k in OutcomeKind if k.app_reportable} == {
        "invalid_arguments", "guard_rejected", "busy", "timeout", "cancelled", "app_disconnected",
        "internal_error", "shutdown"}
    assert {k.value for k in OutcomeKind if k.value_free} == {
        "timeout", "cancelled", "busy", "app_disconnected", "shutdown", "internal_error", "unknown_tool",
        "guard_rejected"}


def test_an_outcome_built_from_a_string_holds_the_member() -> None:
    outcome = CallOutcome("timeout", "slow")
    assert outcome.kind is OutcomeKind.TIMEOUT and outcome.is_error
    assert not CallOutcome(OutcomeKind.OK).is_error
