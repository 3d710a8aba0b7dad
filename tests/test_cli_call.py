"""`toolbridge call` (issue 19 items 5-7): --arg read by the tool's schema, the unknown-tool
message and did-you-mean, and the --args-json / --json flags. Real daemon, real CLI processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from app_client.wire import ToolInvocation, ToolResponse, ToolResult, ToolSpec
from broker.cli.call_args import accepted_types, convert_value, parse_arguments, unknown_tool_message
from broker.cli.daemon_client import McpLineClient, locate, open_agent_stream
from broker.core.names import near_names
from broker.core.validation import compile_schema
from mcp_testkit import DEMO_TOOLS, ScriptedApp, running_daemon

TOOLBRIDGE = [sys.executable, "-m", "broker"]

TYPED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "on": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "opts": {"$ref": "#/$defs/Opts"},
        "maybe": {"type": ["string", "null"]},
        "either": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        "mode": {"enum": ["1", "2"]},
    },
    "$defs": {"Opts": {"type": "object", "properties": {"a": {"type": "integer"}}}},
}
#: ScriptedApp answers "echo" with the parameters it got; this one declares typed properties.
STRICT_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["field", "text"],
    "properties": {"field": {"enum": ["title", "body"]}, "text": {"type": "string"}, "size": {"type": "integer"}},
}
TOOLS = [*DEMO_TOOLS, ToolSpec("type_text", "Echo, typed", TYPED_SCHEMA), ToolSpec("set_field", "Strict", STRICT_SCHEMA)]


class TypedApp(ScriptedApp):
    """ScriptedApp with the typed tool (answered like echo)."""

    def __init__(self, port: int, token: str) -> None:
        super().__init__(port, token, tools=TOOLS)

    async def _answer(self, call: ToolInvocation) -> None:
        if call.tool in ("type_text", "set_field"):
            await self.send(ToolResponse(call.correlation_id, ToolResult(data={"echo": call.parameters})))
        else:
            await super()._answer(call)


async def run(*args: str) -> subprocess.CompletedProcess[str]:
    result = await trio.run_process([*TOOLBRIDGE, *args], capture_stdout=True, capture_stderr=True, check=False)
    return subprocess.CompletedProcess(result.args, result.returncode, result.stdout.decode(), result.stderr.decode())


# --- item 5: values read by the schema ------------------------------------------------------


def convert(key: str, text: str) -> Any:
    return convert_value(key, text, TYPED_SCHEMA["properties"].get(key), TYPED_SCHEMA)


def test_a_string_property_keeps_the_text() -> None:
    assert convert("text", "123") == "123"
    assert convert("text", "true") == "true"
    assert convert("text", "null") == "null"
    assert convert("text", '{"a": 1}') == '{"a": 1}'
    assert convert("mode", "1") == "1"  # an enum of strings is a string


def test_typed_properties_are_json() -> None:
    assert convert("count", "3") == 3
    assert convert("ratio", "2") == 2 and convert("ratio", "2.5") == 2.5
    assert convert("on", "false") is False
    assert convert("tags", '["a","b"]') == ["a", "b"]
    assert convert("opts", '{"a": 1}') == {"a": 1}  # through $ref
    assert convert("undeclared", "7") == 7 and convert("undeclared", "plain words") == "plain words"


def test_unions_prefer_the_json_value_and_fall_back_to_text() -> None:
    assert convert("maybe", "null") is None
    assert convert("maybe", "123") == "123"  # 123 is neither string-or-null's other type: text
    assert convert("maybe", "hello") == "hello"
    assert convert("either", "5") == 5
    assert convert("either", "five") == "five"
    assert convert("either", '"5"') == "5"  # quoted: a string
    assert accepted_types({"anyOf": [{"type": "integer"}, {}]}, {}) is not None


def test_a_value_of_the_wrong_type_is_a_usage_error_in_json_spelling() -> None:
    with pytest.raises(ValueError) as caught:
        convert("count", "true")
    message = str(caught.value)
    assert "'count' takes integer, not boolean (true)" in message and "True" not in message
    with pytest.raises(ValueError, match="not JSON"):
        convert("on", "yes")
    with pytest.raises(ValueError, match="JSON object"):
        parse_arguments([], "[1]", TYPED_SCHEMA)


async def test_call_sends_strings_for_string_properties(tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "home") as info, trio.open_nursery() as nursery:
        app = await TypedApp(info.port, info.token).start(nursery)
        home = str(info.core.settings.home)
        ok = await run("call", "Demo__type_text", "--home", home, "--arg", "text=123", "--arg", "count=3",
                       "--arg", "on=true", "--arg", "maybe=null", "--arg", "tags=[\"x\"]", "--quiet")
        assert ok.returncode == 0, ok.stderr
        assert app.invocations[-1].parameters == {"text": "123", "count": 3, "on": True, "maybe": None, "tags": ["x"]}

        wrong = await run("call", "Demo__type_text", "--home", home, "--arg", "count=true")
        assert wrong.returncode == 2 and "(true)" in wrong.stderr and "True" not in wrong.stderr
        assert len(app.invocations) == 1  # nothing was sent

        # The daemon's own validation message spells the value as JSON too.
        invalid = await run("call", "Demo__type_text", "--home", home, "--args-json", '{"text": true}')
        assert invalid.returncode == 2  # the command line was wrong (issue 30 item 6), not the tool
        assert "true is not of type 'string'" in invalid.stdout + invalid.stderr
        assert "True" not in invalid.stdout + invalid.stderr
        nursery.cancel_scope.cancel()


async def test_a_missing_or_extra_argument_says_what_to_change(tmp_path: Path) -> None:
    # Issue 30 item 6: the exit status of a usage error (2), not "the tool reported an error" (1),
    # and what to add or which names the tool takes.
    async with running_daemon(tmp_path / "home") as info, trio.open_nursery() as nursery:
        app = await TypedApp(info.port, info.token).start(nursery)
        home = str(info.core.settings.home)
        missing = await run("call", "Demo__set_field", "--home", home, "--arg", "field=title")
        assert missing.returncode == 2, missing.stderr
        assert "add --arg text=VALUE (a string): it is required" in missing.stderr
        assert "field=" not in missing.stderr.split("required")[-1]  # only the missing one

        none_given = await run("call", "Demo__set_field", "--home", home)
        assert none_given.returncode == 2
        assert "add --arg field=VALUE" in none_given.stderr and "add --arg text=VALUE" in none_given.stderr

        extra = await run("call", "Demo__set_field", "--home", home, "--arg", "field=body", "--arg", "text=x",
                          "--arg", "colour=red")
        assert extra.returncode == 2
        assert "the tool has no parameter colour; its parameters: field, text, size" in extra.stderr
        assert app.invocations == []  # the daemon refused every one before the app

        ok = await run("call", "Demo__set_field", "--home", home, "--arg", "field=body", "--arg", "text=x", "--quiet")
        assert ok.returncode == 0, ok.stderr
        nursery.cancel_scope.cancel()


def test_validation_messages_spell_values_as_json() -> None:
    validate = compile_schema("t", TYPED_SCHEMA, 1 << 20)
    assert validate({"text": True}) == ["$.text: true is not of type 'string'"]
    assert validate({"mode": None}) == ["$.mode: null is not one of ['1', '2']"]
    assert validate({"text": {"a": [False]}}) == ['$.text: {"a":[false]} is not of type \'string\'']
    assert validate({"count": "x"}) == ["$.count: 'x' is not of type 'integer'"]  # unchanged: same in both


# --- item 6: the unknown-tool message ---------------------------------------------------------


def test_near_names() -> None:
    known = ["Notes__type_text", "Notes__save", "Paint__draw"]
    assert near_names("Notes__typetext", known)[0] == "Notes__type_text"
    assert near_names("type_text", known) == ["Notes__type_text"]
    assert near_names("notes__TYPE_TEXT", known) == ["Notes__type_text"]
    assert near_names("Notes__tpye_text", known) == []  # a typo: only the CLI's fuzzy search
    assert near_names("Notes__tpye_text", known, fuzzy=True) == ["Notes__type_text"]
    assert near_names("Notes__sav", known, fuzzy=True) == ["Notes__save"]
    assert near_names("Calendar__book", known, fuzzy=True) == []
    assert "no app is connected" in unknown_tool_message("x", [])


async def test_unknown_tool_in_the_cli_and_over_mcp(tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "home") as info, trio.open_nursery() as nursery:
        home = str(info.core.settings.home)
        nothing = await run("call", "Demo__type_text", "--home", home)
        assert nothing.returncode == 3 and "no app is connected" in nothing.stderr

        await TypedApp(info.port, info.token).start(nursery)
        for typed in ("Demo__typetext", "type_text", "Demo__tpye_text"):
            missing = await run("call", typed, "--home", home)
            assert missing.returncode == 3, missing.stderr
            assert "run `toolbridge tools`" in missing.stderr and "tools/list" not in missing.stderr
            assert "Did you mean Demo__type_text?" in missing.stderr, missing.stderr

        # Agents keep the MCP wording, with the better did-you-mean.
        link = await open_agent_stream(locate(info.core.settings.home))
        try:
            client = McpLineClient(link)
            await client.initialize()
            reply = await client.request("tools/call", {"name": "Demo__typetext", "arguments": {}})
        finally:
            await link.aclose()
        message = reply["error"]["message"]
        assert "Call tools/list" in message and "Did you mean one of: Demo__type_text" in message
        nursery.cancel_scope.cancel()


async def test_unknown_tool_over_mcp_says_when_no_app_is_connected(tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "home") as info:
        link = await open_agent_stream(locate(info.core.settings.home))
        try:
            client = McpLineClient(link)
            await client.initialize()
            reply = await client.request("tools/call", {"name": "Notes__save", "arguments": {}})
        finally:
            await link.aclose()
        assert "No app is connected" in reply["error"]["message"]


# --- item 7: --args-json for arguments, --json for output -----------------------------------


async def test_args_json_and_json_output(tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "home") as info, trio.open_nursery() as nursery:
        app = await TypedApp(info.port, info.token).start(nursery)
        home = str(info.core.settings.home)

        plain = await run("call", "Demo__echo", "--home", home, "--args-json", '{"text": "a"}', "--arg", "n=2")
        assert plain.returncode == 0, plain.stderr
        assert json.loads(plain.stdout) == {"echo": {"text": "a", "n": 2}} and plain.stderr == ""

        as_json = await run("call", "Demo__echo", "--home", home, "--json", "--args-json", '{"text": "b"}')
        assert as_json.returncode == 0, as_json.stderr
        assert json.loads(as_json.stdout)["structuredContent"] == {"echo": {"text": "b"}}

        flag_first = await run("call", "--json", "Demo__text", "--home", home)
        assert flag_first.returncode == 0, flag_first.stderr
        assert json.loads(flag_first.stdout)["content"][0]["text"] == "just text"

        # The old spelling still means "these are the arguments", with a warning on stderr.
        old = await run("call", "Demo__echo", "--home", home, "--json", '{"text": "c"}')
        assert old.returncode == 0, old.stderr
        assert "deprecated" in old.stderr and "--args-json" in old.stderr
        assert json.loads(old.stdout) == {"echo": {"text": "c"}}  # the tool's output, not the MCP result
        old_first = await run("call", "--json", '{"text": "d"}', "Demo__echo", "--home", home)
        assert old_first.returncode == 0 and "deprecated" in old_first.stderr
        assert app.invocations[-1].parameters == {"text": "d"}

        unknown = await run("call", "Demo__nope", "--home", home, "--json")
        assert unknown.returncode == 3 and "unknown tool" in json.loads(unknown.stdout)["error"]["message"]
        nursery.cancel_scope.cancel()


async def test_token_list_json(tmp_path: Path) -> None:
    issued = await run("token", "--home", str(tmp_path), "--issue", "ci", "--scope", "agent")
    assert issued.returncode == 0, issued.stderr
    listed = await run("token", "--home", str(tmp_path), "--list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [(r["name"], r["scopes"]) for r in rows] == [("ci", ["agent"])] and issued.stdout.strip() not in listed.stdout
    alone = await run("token", "--home", str(tmp_path), "--json")
    assert alone.returncode == 1 and "--json goes with --list" in alone.stderr
