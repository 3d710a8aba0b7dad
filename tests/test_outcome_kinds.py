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
        "ok": "TOOL_EXECUTED",
        "unknown_tool": "UNKNOWN_TOOL",
        "invalid_arguments": "TOOL_ARG_VALIDATION_FAILURE",
        "guard_rejected": "TOOL_GUARD_REJECTED",
        "timeout": "TOOL_TIMEOUT",
        "cancelled": "TOOL_CANCELLED",
        "busy": "TOOL_EXECUTION_ERROR",
        "app_disconnected": "TOOL_EXECUTION_ERROR",
        "app_error": "TOOL_EXECUTION_ERROR",
        "internal_error": "TOOL_EXECUTION_ERROR",
        "shutdown": "TOOL_EXECUTION_ERROR",
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
