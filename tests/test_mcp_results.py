"""Mapping tools and call outcomes to MCP results (pure functions)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from app_client.wire import ToolResult, ToolSpec
from broker.mcp.jsonrpc import INVALID_PARAMS, RpcError
from broker.mcp.results import ERROR_KIND_KEY, RETRY_AFTER_KEY, call_result, list_page, tool_entry
from broker.core.router import CallOutcome

IMAGE = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}


def fake_tool(spec: ToolSpec, agent_name: str = "App__t") -> Any:
    return SimpleNamespace(agent_name=agent_name, spec=spec, instance=SimpleNamespace(label="App"))


def test_tool_entry_passes_the_spec_through() -> None:
    spec = ToolSpec(
        "t", "Does t", {"type": "object", "properties": {"x": {"type": "integer"}}}, title="T",
        annotations={"destructiveHint": False}, output_schema={"type": "object"}, timeout_ms=10,
    )
    assert tool_entry(fake_tool(spec)) == {
        "name": "App__t", "title": "T", "description": "Does t",
        "inputSchema": {"type": "object", "properties": {"x": {"type": "integer"}}},
        "outputSchema": {"type": "object"}, "annotations": {"destructiveHint": False},
    }


def test_tool_entry_fills_in_a_description_and_drops_a_non_object_output_schema() -> None:
    entry = tool_entry(fake_tool(ToolSpec("t", "", {"type": "object"}, output_schema={"type": "string"})))
    assert entry == {"name": "App__t", "description": "t (from the app App)", "inputSchema": {"type": "object"}}


def test_a_shortened_or_sanitized_name_carries_the_app_and_tool_in_meta() -> None:
    long = ToolSpec("Export.As PDF", "Export")
    entry = tool_entry(fake_tool(long, agent_name="App__Export_As_PDF"))
    assert entry["_meta"] == {"toolbridge/app": "App", "toolbridge/tool": "Export.As PDF"}
    assert "_meta" not in tool_entry(fake_tool(ToolSpec("t", "T")))  # App__t says it all


def test_pages_cover_every_name_once_in_order() -> None:
    names = [f"App__{c}" for c in "abcde"]
    entries = [{"name": n} for n in names]
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page, cursor = list_page(names, entries, cursor, 2)
        pages += 1
        seen += [e["name"] for e in page]
        if cursor is None:
            break
    assert (seen, pages) == (names, 3)
    # A cursor survives the list changing under it: it points after a name, not at an index.
    page, _ = list_page(["App__0", *names], [{"name": "App__0"}, *entries], list_page(names, entries, None, 2)[1], 2)
    assert [e["name"] for e in page] == ["App__c", "App__d"]
    assert list_page([], [], None, 2) == ([], None)


@pytest.mark.parametrize("cursor", ["garbage!", "Zm9v", 5])
def test_foreign_cursors_are_invalid_params(cursor: Any) -> None:
    with pytest.raises(RpcError) as caught:
        list_page(["a"], [{"name": "a"}], cursor, 2)
    assert caught.value.code == INVALID_PARAMS


def test_ok_with_data() -> None:
    assert call_result(CallOutcome("ok", result=ToolResult(data={"n": 3})), "App__t") == {
        "content": [{"type": "text", "text": '{"n":3}'}], "isError": False, "structuredContent": {"n": 3},
    }
    assert call_result(CallOutcome("ok", result=ToolResult(data="plain")), "App__t") == {
        "content": [{"type": "text", "text": "plain"}], "isError": False,
    }
    assert call_result(CallOutcome("ok", result=ToolResult(data=[1, 2])), "App__t")["content"][0]["text"] == "[1,2]"
    assert "structuredContent" not in call_result(CallOutcome("ok", result=ToolResult(data=[1, 2])), "App__t")


def test_ok_with_content_blocks_and_structured_content() -> None:
    result = ToolResult(data={"ignored": True}, content=[{"type": "text", "text": "see"}, IMAGE],
                        structured_content={"w": 2})
    assert call_result(CallOutcome("ok", result=result), "App__t") == {
        "content": [{"type": "text", "text": "see"}, IMAGE], "isError": False, "structuredContent": {"w": 2},
    }


def test_an_invalid_content_block_becomes_an_error_result() -> None:
    mapped = call_result(CallOutcome("ok", result=ToolResult(content=[{"type": "image", "data": "x"}])), "App__t")
    assert mapped["isError"] is True
    assert "invalid content block #0" in mapped["content"][0]["text"]


@pytest.mark.parametrize("kind", ["invalid_arguments", "guard_rejected", "timeout", "cancelled",
                                  "app_disconnected", "app_error", "internal_error", "shutdown"])
def test_failures_are_error_results(kind: str) -> None:
    assert call_result(CallOutcome(kind, "what happened"), "App__t") == {
        "content": [{"type": "text", "text": "what happened"}], "isError": True, "_meta": {ERROR_KIND_KEY: kind},
    }


def test_busy_carries_the_retry_hint_and_app_errors_keep_their_blocks() -> None:
    busy = call_result(CallOutcome("busy", "retry later", retry_after_ms=250), "App__t")
    assert busy["_meta"] == {ERROR_KIND_KEY: "busy", RETRY_AFTER_KEY: 250}
    failed = call_result(CallOutcome("app_error", "it broke", result=ToolResult(success=False, error="it broke",
                                                                                 content=[IMAGE])), "App__t")
    assert failed["content"] == [{"type": "text", "text": "it broke"}, IMAGE]


def test_unknown_tool_is_a_protocol_error() -> None:
    with pytest.raises(RpcError) as caught:
        call_result(CallOutcome("unknown_tool", "unknown tool 'App__x'"), "App__x")
    assert (caught.value.code, caught.value.data) == (INVALID_PARAMS, {"name": "App__x"})
