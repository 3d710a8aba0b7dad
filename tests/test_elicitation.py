"""Elicitation (protocol.md section 13) end to end: a raw-socket app asks the agent's user inside
a call; the real daemon; the MCP SDK as the agent over stdio and HTTP, in the handshake era
(``elicitation/create``) and in 2026-07-28 (an input-required result and the SDK's retry).
Bad input: forged, altered and replayed request states, an agent that never answers, a client
without the capability, a second elicit while one waits, an unknown call, a huge schema."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
import trio

from app_client import App, ElicitationError, ToolContext
from app_client.protocol import (
    AppConnection, Elicit, ElicitResult, Error, Ignored, LocalProtocolError, Register, Registered, ToolCancel,
    ToolInvocation, ToolResponse, ToolResult, ToolSpec,
)
from broker.core.elicitation import check_content, check_schema
from broker.daemon.run import DaemonInfo
from mcp_testkit import HTTPX_STREAM_WARNINGS, ScriptedApp, connect_agent, http_client, mcp_url, running_daemon

pytestmark = [pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS]

FORM = {"type": "object", "properties": {"overwrite": {"type": "boolean", "title": "Overwrite?"},
                                         "name": {"type": "string", "minLength": 1}},
        "required": ["overwrite"]}
OBJECT = {"type": "object"}
TOOLS = [ToolSpec(name, "", OBJECT) for name in ("ask", "ask_url", "ask_twice", "ask_huge", "ask_stranger",
                                                   "ask_named", "ask_badkey")]
MODERN_HEADERS = {"Mcp-Method": "tools/call", "MCP-Protocol-Version": "2026-07-28"}


class Asker(ScriptedApp):
    """A protocol-v2 app whose tools ask the user (``elicit``) and answer with what they heard."""

    def __init__(self, port: int, token: str) -> None:
        super().__init__(port, token, "Asker", tools=TOOLS)
        self.results: list[ElicitResult] = []
        self.errors: list[Error] = []

    def _register(self) -> Register:
        return Register(app_name="Asker", token=self.token, tools=self.tools, max_concurrency=8, protocol_version=2)

    async def _handle(self, message: Any) -> bool:
        if isinstance(message, ElicitResult):
            self.results.append(message)
            return True
        if isinstance(message, Error):
            self.errors.append(message)
            return True
        return False

    async def heard(self, cid: int, count: int = 1) -> list[ElicitResult]:
        await self.until(lambda: len([r for r in self.results if r.correlation_id == cid]) >= count, timeout=20)
        return [r for r in self.results if r.correlation_id == cid]

    async def _answer(self, call: ToolInvocation) -> None:
        cid = call.correlation_id
        if call.tool == "ask":
            await self.send(Elicit(cid, 1, "Overwrite report.txt?", requested_schema=FORM))
        elif call.tool in ("ask_named", "ask_badkey"):
            key = "overwrite_q" if call.tool == "ask_named" else "has space"
            await self.send(Elicit(cid, 1, "Overwrite report.txt?", requested_schema=FORM, input_key=key))
        elif call.tool == "ask_url":
            await self.send(Elicit(cid, 1, "Sign in to the print service", mode="url",
                                   url="https://print.example.com/login"))
        elif call.tool == "ask_twice":
            await self.send(Elicit(cid, 1, "First?", requested_schema=FORM))
            await self.send(Elicit(cid, 2, "Second?", requested_schema=FORM))
        elif call.tool == "ask_huge":
            huge = {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "x" * 600}
                                                     for i in range(60)}}
            await self.send(Elicit(cid, 1, "Fill in all of this", requested_schema=huge))
        elif call.tool == "ask_stranger":
            await self.send(Elicit(cid + 1000, 1, "For a call that is not mine", requested_schema=FORM))
            await self.until(lambda: any(e.correlation_id == cid + 1000 for e in self.errors))
            await self.send(ToolResponse(cid, ToolResult(data={"refused": True})))
            return
        else:
            return
        results = await self.heard(cid, 2 if call.tool == "ask_twice" else 1)
        first = [r for r in results if r.elicit_id == 1][0]
        answer = {"action": first.action, "content": first.content, "errorCode": first.error_code,
                  "elicitId": first.elicit_id}
        await self.send(ToolResponse(cid, ToolResult(data=answer)))


@asynccontextmanager
async def daemon_and_app(tmp_path: Path, **settings: Any) -> AsyncIterator[tuple[Path, DaemonInfo, Asker]]:
    home = tmp_path / "home"
    async with running_daemon(home, **settings) as info, trio.open_nursery() as nursery:
        app = await Asker(info.port, info.token).start(nursery)
        yield home, info, app
        await app.close()


def data_of(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result
    assert result.structured_content is not None
    return result.structured_content


COMBOS = [("stdio", "legacy"), ("http", "legacy"), ("stdio", "auto"), ("http", "auto")]


# --- the happy paths, with the real SDK as the agent --------------------------------------------


@pytest.mark.parametrize(("transport", "mode"), COMBOS)
async def test_the_user_answers_a_form_inside_the_call(tmp_path: Path, transport: str, mode: str) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def user(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"overwrite": True, "name": "report-2.txt"})

    async with daemon_and_app(tmp_path) as (home, info, app):
        async with connect_agent(transport, mode, info, home, elicitation_callback=user) as client:
            answer = data_of(await client.call_tool("Asker__ask", {}))
    assert answer == {"action": "accept", "content": {"overwrite": True, "name": "report-2.txt"},
                      "errorCode": None, "elicitId": 1}
    assert len(asked) == 1 and isinstance(asked[0], types.ElicitRequestFormParams)
    assert asked[0].message == "Overwrite report.txt?" and asked[0].requested_schema == FORM
    # One app call from start to end: the 2026-07-28 retry resumed it, it did not call again.
    assert [i.tool for i in app.invocations] == ["ask"]


@pytest.mark.parametrize(("transport", "mode"), [("http", "legacy"), ("stdio", "auto")])
async def test_decline_and_url_mode(tmp_path: Path, transport: str, mode: str) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def user(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        if isinstance(params, types.ElicitRequestURLParams):
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="decline")

    async with daemon_and_app(tmp_path) as (home, info, app):
        async with connect_agent(transport, mode, info, home, elicitation_callback=user) as client:
            declined = data_of(await client.call_tool("Asker__ask", {}))
            url = data_of(await client.call_tool("Asker__ask_url", {}))
    assert (declined["action"], declined["content"]) == ("decline", None)
    assert (url["action"], url["content"], url["errorCode"]) == ("accept", None, None)
    assert isinstance(asked[1], types.ElicitRequestURLParams) and asked[1].url == "https://print.example.com/login"


@pytest.mark.parametrize(("transport", "mode"), COMBOS)
async def test_a_client_without_the_capability_is_not_asked(tmp_path: Path, transport: str, mode: str) -> None:
    async with daemon_and_app(tmp_path) as (home, info, app):
        async with connect_agent(transport, mode, info, home) as client:  # no elicitation_callback
            with trio.fail_after(5):  # at once: never a hang
                answer = data_of(await client.call_tool("Asker__ask", {}))
    assert (answer["action"], answer["errorCode"]) == ("cancel", "elicitation_unsupported")
    result = app.results[0]
    assert result.error is not None and "did not declare form-mode elicitation" in result.error


async def test_elicitations_are_call_log_rows_without_the_answers(tmp_path: Path) -> None:
    from test_pipeline_kinds import logged_kinds

    async def user(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"overwrite": True, "name": "top-secret-name"})

    async with daemon_and_app(tmp_path, call_log_flush_interval=0.05) as (home, info, app):
        async with connect_agent("http", "legacy", info, home, elicitation_callback=user) as client:
            data_of(await client.call_tool("Asker__ask", {}))
        await logged_kinds(home, 2)
        with sqlite3.connect(f"file:{home / 'calls.sqlite3'}?mode=ro", uri=True) as db:
            rows = db.execute("select tool, arguments, error_kind from calls where tool = 'elicitation'").fetchall()
        db.close()
    assert len(rows) == 1
    tool, arguments, kind = rows[0]
    assert json.loads(arguments) == {"tool": "Asker__ask", "mode": "form"} and kind == "ok"
    assert "top-secret" not in arguments and "Overwrite" not in arguments


# --- bad input from the app ------------------------------------------------------------------------


async def test_a_second_elicit_while_one_waits_is_refused(tmp_path: Path) -> None:
    async def user(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="cancel")

    async with daemon_and_app(tmp_path) as (home, info, app):
        async with connect_agent("stdio", "legacy", info, home, elicitation_callback=user) as client:
            answer = data_of(await client.call_tool("Asker__ask_twice", {}))
        second = [r for r in app.results if r.elicit_id == 2][0]
    assert (second.action, second.error_code) == ("cancel", "elicitation_pending")
    assert answer["action"] == "cancel" and answer["elicitId"] == 1  # the first was asked and answered


async def test_a_huge_or_nested_schema_is_refused_and_the_call_goes_on(tmp_path: Path) -> None:
    async def user(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise AssertionError("the user must not be asked")

    async with daemon_and_app(tmp_path) as (home, info, app):
        async with connect_agent("http", "legacy", info, home, elicitation_callback=user) as client:
            answer = data_of(await client.call_tool("Asker__ask_huge", {}))
    assert (answer["action"], answer["errorCode"]) == ("cancel", "invalid_elicit")
    assert "over 32768 bytes" in (app.results[0].error or "")


async def test_an_elicit_for_a_call_that_is_not_the_apps_is_refused(tmp_path: Path) -> None:
    async with daemon_and_app(tmp_path) as (home, info, app):
        async with connect_agent("http", "legacy", info, home) as client:
            assert data_of(await client.call_tool("Asker__ask_stranger", {})) == {"refused": True}
    assert [e.code for e in app.errors] == ["unknown_correlation_id"]
    assert app.results == []


def test_the_app_machine_elicits_only_for_running_calls() -> None:
    machine = AppConnection()
    machine.start(Register(app_name="A", protocol_version=2))
    machine.receive_message(Registered("a", "i", "A", {}, 5000, protocol_version=2))
    with pytest.raises(LocalProtocolError, match="not running"):
        machine.send(Elicit(7, 1, "?", requested_schema=FORM))
    assert machine.receive_message(ToolInvocation(7, "ask")) == ToolInvocation(7, "ask")
    assert machine.send(Elicit(7, 1, "?", requested_schema=FORM)).startswith(b'{"type":"elicit"')
    assert machine.receive_message(ElicitResult(7, 1, "accept")) == ElicitResult(7, 1, "accept")
    assert isinstance(machine.receive_message(ToolCancel(7)), ToolCancel)
    with pytest.raises(LocalProtocolError, match="cancelled"):
        machine.send(Elicit(7, 2, "?", requested_schema=FORM))
    assert isinstance(machine.receive_message(ElicitResult(7, 2, "accept")), Ignored)  # nobody's any more
    v1 = AppConnection()
    v1.start(Register(app_name="A"))
    v1.receive_message(Registered("a", "i", "A", {}, 5000, protocol_version=1))
    v1.receive_message(ToolInvocation(1, "ask"))
    with pytest.raises(LocalProtocolError, match="version 2"):
        v1.send(Elicit(1, 1, "?", requested_schema=FORM))


def test_the_schema_is_mcps_flat_subset() -> None:
    assert check_schema(FORM) is None
    assert check_schema({"type": "object", "properties": {
        "color": {"type": "string", "oneOf": [{"const": "#f00", "title": "Red"}]},
        "colors": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "minItems": 1},
        "n": {"type": "integer", "minimum": 0}, "when": {"type": "string", "format": "date"}}}) is None
    # SEP-1034 defaults and SEP-1330's five enum forms (the official suite's fixtures ask them).
    assert check_schema({"type": "object", "required": [], "properties": {
        "name": {"type": "string", "default": "John Doe"}, "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5}, "verified": {"type": "boolean", "default": True},
        "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
        "legacy": {"type": "string", "enum": ["a", "b"], "enumNames": ["A", "B"]},
        "titled": {"type": "string", "oneOf": [{"const": "v1", "title": "First"}]},
        "multi": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 2},
        "titled_multi": {"type": "array", "items": {"anyOf": [{"const": "v1", "title": "First"}]},
                         "default": ["v1"]}}}) is None
    nested = {"type": "object", "properties": {"a": {"type": "object", "properties": {}}}}
    assert "nested objects are not allowed" in (check_schema(nested) or "")
    assert "$ref" in (check_schema({"type": "object", "properties": {"a": {"type": "string"}}, "$ref": "#"}) or "")
    assert "format" in (check_schema({"type": "object", "properties": {"a": {"type": "string", "format": "x"}}})
                        or "")
    assert check_content(FORM, {"overwrite": "yes"}) == "the answer's field 'overwrite' is not a boolean"
    assert check_content(FORM, {}) == "the answer lacks the required field 'overwrite'"
    assert check_content(FORM, {"overwrite": True, "other": 1}) is not None


# --- bad input from the agent ------------------------------------------------------------------------


async def test_an_agent_that_never_answers_times_out(tmp_path: Path) -> None:
    never = trio.Event()

    async def user(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        await never.wait()  # the user walked away
        raise AssertionError("unreachable")

    async with daemon_and_app(tmp_path, elicitation_timeout=0.5) as (home, info, app):
        async with connect_agent("http", "legacy", info, home, elicitation_callback=user) as client:
            with trio.fail_after(10):
                answer = data_of(await client.call_tool("Asker__ask", {}))
    assert (answer["action"], answer["errorCode"]) == ("cancel", "elicitation_timeout")


async def test_an_agent_error_or_a_malformed_answer_reaches_the_app_as_agent_error(tmp_path: Path) -> None:
    answers: list[Any] = [types.ErrorData(code=-32603, message="the dialog crashed"),
                          types.ElicitResult(action="accept", content={"overwrite": "maybe"})]

    async def user(context: Any, params: types.ElicitRequestParams) -> Any:
        return answers.pop(0)

    async with daemon_and_app(tmp_path) as (home, info, app):
        async with connect_agent("stdio", "legacy", info, home, elicitation_callback=user) as client:
            crashed = data_of(await client.call_tool("Asker__ask", {}))
            malformed = data_of(await client.call_tool("Asker__ask", {}))
    assert (crashed["action"], crashed["errorCode"]) == ("cancel", "agent_error")
    assert (malformed["action"], malformed["errorCode"]) == ("cancel", "agent_error")
    assert "the dialog crashed" in (app.results[0].error or "")
    assert "'overwrite' is not a boolean" in (app.results[1].error or "")


async def _modern_call(http: httpx2.AsyncClient, info: DaemonInfo, request_id: int, path: str = "",
                       name: str = "Asker__ask", arguments: Any = None, **params: Any) -> Any:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments or {}, "_meta": meta, **params}}
    reply = await http.post(mcp_url(info) + path, json=body, headers={**MODERN_HEADERS, "Mcp-Name": name,
                                                               "Accept": "application/json, text/event-stream"})
    return reply.json()


async def test_a_forged_altered_or_replayed_request_state_is_refused(tmp_path: Path) -> None:
    """A raw JSON-RPC client (the SDK retries by itself and cannot be made to cheat)."""
    accept = {"toolbridge_elicit_1": {"action": "accept", "content": {"overwrite": True}}}
    async with daemon_and_app(tmp_path) as (home, info, app), http_client(info) as http:
        first = (await _modern_call(http, info, 1))["result"]
        assert first["resultType"] == "input_required"
        assert first["inputRequests"]["toolbridge_elicit_1"]["method"] == "elicitation/create"
        state = first["requestState"]
        body, _, mac = state.partition(".")
        altered = body[:-2] + ("A" if body[-2] != "A" else "B") + body[-1] + "." + mac
        for bad in (altered, "forged", body + "." + mac[::-1], ""):
            refused = await _modern_call(http, info, 2, requestState=bad, inputResponses=accept)
            assert refused["error"]["code"] == -32602
            assert "not one toolbridge issued" in refused["error"]["message"]
        elsewhere = await _modern_call(http, info, 3, "/apps/Asker", "ask", requestState=state, inputResponses=accept)
        assert "belongs to another client or another tool" in elsewhere["error"]["message"]  # another scope
        other_tool = await _modern_call(http, info, 3, name="Asker__ask_url", requestState=state,
                                        inputResponses=accept)
        assert "belongs to another client or another tool" in other_tool["error"]["message"]
        wrong = await _modern_call(http, info, 3, requestState=state,
                                   inputResponses={"toolbridge_elicit_1": {"action": "accept",
                                                                           "content": {"overwrite": "no"}}})
        assert "is not a boolean" in wrong["error"]["message"]  # refused; the state stays good
        done = (await _modern_call(http, info, 4, requestState=state, inputResponses=accept))["result"]
        assert done["resultType"] == "complete" and done["structuredContent"]["action"] == "accept"
        replayed = await _modern_call(http, info, 5, requestState=state, inputResponses=accept)
        assert replayed["error"]["code"] == -32602 and "used already" in replayed["error"]["message"]
        assert [i.tool for i in app.invocations] == ["ask"]


async def test_a_paused_call_whose_retry_never_comes_is_cancelled_at_the_app(tmp_path: Path) -> None:
    async with daemon_and_app(tmp_path, elicitation_timeout=0.3) as (home, info, app), http_client(info) as http:
        first = (await _modern_call(http, info, 1))["result"]
        assert first["resultType"] == "input_required"
        cid = app.invocations[0].correlation_id
        await app.until(lambda: any(c.correlation_id == cid for c in app.cancels), timeout=5)
        late = await _modern_call(http, info, 2, requestState=first["requestState"],
                                  inputResponses={"toolbridge_elicit_1": {"action": "cancel"}})
        assert late["error"]["code"] == -32602 and "expired" in late["error"]["message"]


async def test_a_retry_without_the_answer_is_asked_again(tmp_path: Path) -> None:
    async with daemon_and_app(tmp_path) as (home, info, app), http_client(info) as http:
        first = (await _modern_call(http, info, 1))["result"]
        # Paused, the app's call is still live: in the correlation map, holding its admission slot.
        (call,) = list(info.core.calls)
        assert not call.done and call.tool.instance.admission.active == 1
        again = (await _modern_call(http, info, 2, requestState=first["requestState"], inputResponses={}))["result"]
        assert again["resultType"] == "input_required" and again["requestState"] != first["requestState"]
        assert again["inputRequests"] == first["inputRequests"]
        done = (await _modern_call(http, info, 3, requestState=again["requestState"],
                                   inputResponses={"toolbridge_elicit_1": {"action": "decline"}}))["result"]
        assert done["structuredContent"]["action"] == "decline"


async def test_input_responses_without_a_request_state_start_a_new_call_that_asks_again(tmp_path: Path) -> None:
    """Answers with no requestState answer nothing toolbridge asked: a new call, asked afresh
    (an input-required result, not an error; mrtr "Error Handling"); bad ones change nothing."""
    async with daemon_and_app(tmp_path) as (home, info, app), http_client(info) as http:
        for rpc_id, responses in enumerate(({"wrong_key": {"action": "accept", "content": {"data": "x"}}},
                                            {"toolbridge_elicit_1": 12345}, None), start=1):
            asked = (await _modern_call(http, info, rpc_id, inputResponses=responses))["result"]
            assert asked["resultType"] == "input_required", asked
            assert asked["inputRequests"]["toolbridge_elicit_1"]["method"] == "elicitation/create"
        assert [i.tool for i in app.invocations] == ["ask"] * 3
        refused = await _modern_call(http, info, 9, requestState=None, inputResponses={})
        assert refused["error"]["code"] == -32602 and "requestState must be" in refused["error"]["message"]


async def test_an_app_names_its_question_and_a_client_may_answer_it_up_front(tmp_path: Path) -> None:
    """2026-07-28: the app's inputKey is the inputRequests key; a tools/call that carries the
    answer under it is answered at once (mrtr's ephemeral pattern). Generated keys are never
    answered up front, a malformed up-front answer is not used, and a bad key is refused."""
    accept = {"action": "accept", "content": {"overwrite": True}}
    async with daemon_and_app(tmp_path) as (home, info, app), http_client(info) as http:
        asked = (await _modern_call(http, info, 1, name="Asker__ask_named"))["result"]
        assert list(asked["inputRequests"]) == ["overwrite_q"]
        done = (await _modern_call(http, info, 2, name="Asker__ask_named",
                                   inputResponses={"overwrite_q": accept, "extra": {"action": "cancel"}}))["result"]
        assert done["resultType"] == "complete" and done["structuredContent"]["action"] == "accept"
        malformed = (await _modern_call(http, info, 3, name="Asker__ask_named",
                                        inputResponses={"overwrite_q": 12345}))["result"]
        assert malformed["resultType"] == "input_required"
        generated = (await _modern_call(http, info, 4, inputResponses={"toolbridge_elicit_1": accept}))["result"]
        assert generated["resultType"] == "input_required"
        bad = (await _modern_call(http, info, 5, name="Asker__ask_badkey"))["result"]
        assert bad["structuredContent"]["errorCode"] == "invalid_elicit"


# --- app_client: ctx.elicit and ctx.elicit_sync ----------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_app_client_tools_ask_with_ctx_elicit(tmp_path: Path, mode: str) -> None:
    app = App("Files", home=tmp_path / "home", elicitation=True, max_concurrency=4)

    @app.tool
    async def save(path: str, ctx: ToolContext) -> dict:
        answer = await ctx.elicit(f"{path} exists. Overwrite it?", FORM)
        return {"action": answer.action, "content": answer.content}

    @app.tool
    def export(ctx: ToolContext) -> dict:  # a worker thread: the blocking form
        answer = ctx.elicit_sync("Sign in first", url="https://print.example.com/login")
        return {"action": answer.action}

    @app.tool
    async def unasked(ctx: ToolContext) -> dict:
        try:
            await ctx.elicit("Anyone?", FORM)
        except ElicitationError as exc:
            return {"code": exc.code}
        return {"code": None}

    async def user(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        if isinstance(params, types.ElicitRequestURLParams):
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"overwrite": False, "name": "b.txt"})

    home = tmp_path / "home"
    async with running_daemon(home) as info, app.connected(timeout=10):
        async with connect_agent("http", mode, info, home, elicitation_callback=user) as client:
            saved = data_of(await client.call_tool("Files__save", {"path": "a.txt"}))
            exported = data_of(await client.call_tool("Files__export", {}))
        async with connect_agent("stdio", mode, info, home) as client:  # no capability
            unasked_result = data_of(await client.call_tool("Files__unasked", {}))
    assert saved == {"action": "accept", "content": {"overwrite": False, "name": "b.txt"}}
    assert exported == {"action": "decline"}
    assert unasked_result == {"code": "elicitation_unsupported"}


async def test_app_client_names_its_question_with_key(tmp_path: Path) -> None:
    """ctx.elicit(key=...) and elicit_sync(key=...): the inputRequests key a 2026-07-28 client
    sees, and answers up front."""
    app = App("Files", home=tmp_path / "home", elicitation=True, max_concurrency=4)

    @app.tool
    async def save(ctx: ToolContext) -> dict:
        answer = await ctx.elicit("Overwrite it?", FORM, key="overwrite_q")
        return {"action": answer.action, "content": answer.content}

    @app.tool
    def export(ctx: ToolContext) -> dict:  # a worker thread: the blocking form
        return {"action": ctx.elicit_sync("Overwrite it?", FORM, key="export_q").action}

    home = tmp_path / "home"
    accept = {"action": "accept", "content": {"overwrite": True}}
    async with running_daemon(home) as info, app.connected(timeout=10), http_client(info) as http:
        asked = (await _modern_call(http, info, 1, name="Files__save"))["result"]
        assert list(asked["inputRequests"]) == ["overwrite_q"]
        done = (await _modern_call(http, info, 2, name="Files__save", inputResponses={"overwrite_q": accept}))
        assert done["result"]["structuredContent"] == {"action": "accept", "content": {"overwrite": True}}
        exported = await _modern_call(http, info, 3, name="Files__export", inputResponses={"export_q": accept})
        assert exported["result"]["structuredContent"] == {"action": "accept"}


async def test_a_stdio_session_that_ends_cancels_its_paused_calls_at_once(tmp_path: Path) -> None:
    """2026-07-28 over an agent link (what `toolbridge stdio` speaks): only that session could
    resume its paused call, so when it ends the app hears toolCancel at once, not at expiry."""
    async with daemon_and_app(tmp_path) as (home, info, app):
        stream = await trio.open_tcp_stream("127.0.0.1", info.port)
        await stream.send_all(json.dumps({"type": "agentConnect", "token": info.token}).encode() + b"\n")
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "Asker__ask", "arguments": {}, "_meta": meta}}
        await stream.send_all(json.dumps(call).encode() + b"\n")
        buffer = b""
        with trio.fail_after(10):
            while b'"input_required"' not in buffer:
                buffer += await stream.receive_some(65536)
        await stream.aclose()
        cid = app.invocations[0].correlation_id
        await app.until(lambda: any(c.correlation_id == cid for c in app.cancels), timeout=5)
        assert len(info.core.calls) == 0


async def test_a_call_through_discovery_modes_call_tool_pauses_and_resumes_too(tmp_path: Path) -> None:
    wrapped = {"name": "Asker__ask", "arguments": {}}
    async with daemon_and_app(tmp_path) as (home, info, app), http_client(info) as http:
        first = (await _modern_call(http, info, 1, "/discovery", "call_tool", wrapped))["result"]
        assert first["resultType"] == "input_required"
        done = (await _modern_call(http, info, 2, "/discovery", "call_tool", wrapped,
                                   requestState=first["requestState"],
                                   inputResponses={"toolbridge_elicit_1": {"action": "accept",
                                                                           "content": {"overwrite": False}}}))
        assert done["result"]["structuredContent"] == {"action": "accept", "content": {"overwrite": False},
                                                       "errorCode": None, "elicitId": 1}
