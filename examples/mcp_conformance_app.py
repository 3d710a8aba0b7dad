"""The fixture app for the official MCP conformance suite (``@modelcontextprotocol/conformance``).

The suite's ``server`` scenarios expect an MCP server with particular tools, resources,
resource templates and prompts (those of the suite's own ``everything-server``). This app
offers them through toolbridge, so the suite can run unchanged against the app's one-app
scope, where they keep their own names::

    python examples/mcp_conformance_app.py &          # registers as "Conformance"
    npx @modelcontextprotocol/conformance server --url http://127.0.0.1:<port>/mcp/apps/Conformance

(The suite sends no ``Authorization`` header: ``tests/test_mcp_conformance_suite.py`` puts a
small loopback proxy that adds the bearer token in between; docs/other-languages.md, "Official MCP conformance".)

Why not ``examples/conformance_app.py``: that is the fixture of toolbridge's *own* conformance
kit (``toolbridge conformance app``, broker/conformance/README.md), whose contract says it
registers exactly six tools and speaks wire protocol 1; the resources and prompts below would
make it register differently (protocol 2) and break the kit's vectors. The two fixtures test
different sides: that one the app client library against the wire protocol, this one the
daemon's MCP face against the MCP specification.

Elicitation (``ctx.elicit``) works in both eras: the handshake era's ``elicitation/create``
and 2026-07-28's input-required results, whose retries resume the same call here. Not here
(so the suite's scenarios for them fail; docs/other-languages.md, "Official MCP conformance", and
``EXPECTED_FAILURES`` in the test list each with its reason): sampling and roots requests,
which toolbridge does not relay from apps, and the diagnostic tools that need them
(``test_missing_capability``, ``test_input_required_result_capabilities``). (Completions
need nothing from the app: the suite only checks that ``completion/complete`` answers.)

It finds the daemon as every app does (TOOLBRIDGE_HOME / TOOLBRIDGE_PORT / TOOLBRIDGE_TOKEN,
else runtime.json and token), and exits 0 after a clean shutdown on SIGTERM or SIGINT, or when
its stdin closes (Windows has no SIGTERM).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import sys
from typing import Any

import trio

from app_client import App, Content, Elicitation, ElicitationError, RegistrationRejected, ToolContext, ToolError
from app_client.wire import ToolSpec

#: A 1x1 PNG (the suite checks only that image data and a MIME type are there).
PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
#: A tiny WAV file: a RIFF header and no samples.
WAV_B64 = base64.b64encode(
    b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x40\x1f\x00\x00\x80\x3e\x00\x00\x02\x00\x10\x00"
    b"data\x00\x00\x00\x00").decode("ascii")

#: A 2026-07-28 call paused for the user's answer keeps its admission slot until the client
#: retries (or elicitation_timeout): the suite leaves several paused, so room for many at once.
app = App("Conformance", instance_id=os.environ.get("TOOLBRIDGE_INSTANCE_ID") or None, elicitation=True,
          max_concurrency=32)


# --- tools -----------------------------------------------------------------------------------


@app.tool
async def test_simple_text() -> Content:
    """Tests simple text content response"""
    return Content([{"type": "text", "text": "This is a simple text response for testing."}])


@app.tool
async def test_image_content() -> Content:
    """Tests image content response"""
    return Content([{"type": "image", "data": PNG_B64, "mimeType": "image/png"}])


@app.tool
async def test_audio_content() -> Content:
    """Tests audio content response"""
    return Content([{"type": "audio", "data": WAV_B64, "mimeType": "audio/wav"}])


@app.tool
async def test_embedded_resource() -> Content:
    """Tests embedded resource content response"""
    return Content([{"type": "resource", "resource": {
        "uri": "test://embedded-resource", "mimeType": "text/plain",
        "text": "This is an embedded resource content."}}])


@app.tool
async def test_multiple_content_types() -> Content:
    """Tests response with multiple content types (text, image, resource)"""
    return Content([
        {"type": "text", "text": "Multiple content types test:"},
        {"type": "image", "data": PNG_B64, "mimeType": "image/png"},
        {"type": "resource", "resource": {"uri": "test://mixed-content-resource", "mimeType": "application/json",
                                          "text": json.dumps({"test": "data", "value": 123})}},
    ])


@app.tool
async def test_tool_with_progress(ctx: ToolContext) -> str:
    """Tests tool that reports progress notifications"""
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100, f"Completed step {step} of 100")
        if step < 100:
            await trio.sleep(0.05)
    return "done"


@app.tool
async def test_tool_with_logging(ctx: ToolContext) -> str:
    """Tests tool that emits log messages during execution"""
    for step, message in enumerate(("Tool execution started", "Tool processing data", "Tool execution completed")):
        if step:
            await trio.sleep(0.05)
        ctx.log("info", message)  # to the agent that made the call, at the level it asked for
    return "Tool with logging executed successfully"


@app.tool
async def test_error_handling() -> None:
    """Tests error response handling"""
    raise ToolError("This tool intentionally returns an error for testing")


# --- elicitation (protocol.md section 13): both eras, through ctx.elicit -----------------------
# In the handshake era the broker asks the agent with elicitation/create; in 2026-07-28 the call
# is answered with an input-required result and the client's retry resumes the same call here.


def _answered(answer: Elicitation) -> str:
    return f"action={answer.action}, content={json.dumps(answer.content, sort_keys=True)}"


async def _ask(ctx: ToolContext, message: str, schema: dict[str, Any], key: str | None = None) -> Elicitation:
    try:
        return await ctx.elicit(message, schema, key=key)
    except ElicitationError as exc:  # the client cannot ask its user (no capability, timeout, ...)
        raise ToolError(f"could not ask the user: {exc}") from None


@app.tool
async def test_elicitation(message: str, ctx: ToolContext) -> str:
    """Tests elicitation: asks the user for a username and an email"""
    answer = await _ask(ctx, message, {
        "type": "object",
        "properties": {"username": {"type": "string", "description": "User's response"},
                       "email": {"type": "string", "description": "User's email address"}},
        "required": ["username", "email"]})
    return f"User response: <{_answered(answer)}>"


#: SEP-1034: a default for every primitive type.
SEP1034_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"],
                   "default": "active"},
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
    "required": [],
}


@app.tool
async def test_elicitation_sep1034_defaults(ctx: ToolContext) -> str:
    """Tests elicitation with default values for every primitive type (SEP-1034)"""
    answer = await _ask(ctx, "Please review and confirm these values", SEP1034_SCHEMA)
    return f"Elicitation completed: {_answered(answer)}"


#: SEP-1330: the five enum forms (untitled, titled, legacy enumNames; untitled and titled multi-select).
SEP1330_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "description": "Pick one", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {"type": "string", "description": "Pick one", "oneOf": [
            {"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"},
            {"const": "value3", "title": "Third Option"}]},
        "legacyEnum": {"type": "string", "description": "Pick one", "enum": ["opt1", "opt2", "opt3"],
                       "enumNames": ["Option One", "Option Two", "Option Three"]},
        "untitledMulti": {"type": "array", "description": "Pick some", "minItems": 1, "maxItems": 3,
                          "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {"type": "array", "description": "Pick some", "minItems": 1, "maxItems": 3,
                        "items": {"anyOf": [{"const": "value1", "title": "First Choice"},
                                            {"const": "value2", "title": "Second Choice"},
                                            {"const": "value3", "title": "Third Choice"}]}},
    },
    "required": [],
}


@app.tool
async def test_elicitation_sep1330_enums(ctx: ToolContext) -> str:
    """Tests elicitation with the enum schema forms of SEP-1330"""
    answer = await _ask(ctx, "Please pick your options", SEP1330_SCHEMA)
    return f"Elicitation completed: {_answered(answer)}"


def _form(**properties: str) -> dict[str, Any]:
    return {"type": "object", "properties": {name: {"type": kind} for name, kind in properties.items()},
            "required": list(properties)}


# 2026-07-28 multi round-trip requests (SEP-2322): the input-required results come from the
# broker; each tool just asks, naming its question (``key``: the inputRequests key the suite
# expects, under which a client may also answer up front). The broker seals the requestState.


@app.tool
async def test_input_required_result_elicitation(ctx: ToolContext) -> str:
    """Tests an input-required result with one elicitation (SEP-2322)"""
    answer = await _ask(ctx, "What is your name?", _form(name="string"), key="user_name")
    return f"Hello, {answer.content.get('name')}!" if answer.accepted else f"No name given ({answer.action})"


@app.tool
async def test_input_required_result_request_state(ctx: ToolContext) -> str:
    """Tests that requestState round-trips: the retry resumes this very call (SEP-2322)"""
    answer = await _ask(ctx, "Please confirm", _form(ok="boolean"), key="confirm")
    return f"state-ok: {_answered(answer)}"


@app.tool
async def test_input_required_result_multi_round(ctx: ToolContext) -> str:
    """Tests two rounds of input-required results in one call (SEP-2322)"""
    name = await _ask(ctx, "Step 1: What is your name?", _form(name="string"), key="step1")
    color = await _ask(ctx, "Step 2: What is your favorite color?", _form(color="string"), key="step2")
    return f"{name.content.get('name')} likes {color.content.get('color')}"


@app.tool
async def test_input_required_result_tampered_state(ctx: ToolContext) -> str:
    """Tests that a tampered requestState is refused (the broker seals it)"""
    answer = await _ask(ctx, "Please confirm", _form(ok="boolean"))
    return f"confirmed: {_answered(answer)}"


# --- server-stateless's diagnostic tools (2026-07-28) -----------------------------------------


@app.tool
async def test_logging_tool(ctx: ToolContext) -> str:
    """Logs while it runs (only a request that set a log level hears it)"""
    ctx.log("info", "test_logging_tool ran")
    return "logged"


@app.tool
async def test_streaming_elicitation(ctx: ToolContext) -> str:
    """Asks the user: in 2026-07-28 an input-required result, never a request on the stream"""
    answer = await _ask(ctx, "Continue?", _form(ok="boolean"))
    return _answered(answer)


async def _dynamic_tool() -> str:
    """A tool test_trigger_tool_change adds and removes"""
    return "dynamic"


def _dynamic_prompt() -> str:
    return "A prompt test_trigger_prompt_change adds and removes."


@app.tool
async def test_trigger_tool_change() -> str:
    """Changes the app's tool list (adds or removes test_dynamic_tool): agents hear list_changed"""
    if "test_dynamic_tool" in app.tools:
        await app.remove_tool("test_dynamic_tool")
        return "removed test_dynamic_tool"
    await app.add_tool(_dynamic_tool, name="test_dynamic_tool")
    return "added test_dynamic_tool"


_dynamic_prompts: set[str] = set()


@app.tool
async def test_trigger_prompt_change() -> str:
    """Changes the app's prompt list (adds or removes test_dynamic_prompt): agents hear list_changed"""
    if _dynamic_prompts:
        app.remove_prompt("test_dynamic_prompt")
        _dynamic_prompts.clear()
        return "removed test_dynamic_prompt"
    app.add_prompt(_dynamic_prompt, name="test_dynamic_prompt", description="Added at runtime")
    _dynamic_prompts.add("test_dynamic_prompt")
    return "added test_dynamic_prompt"


#: SEP-1613 / SEP-2106: the whole JSON Schema 2020-12 vocabulary, which the daemon must list as
#: the app wrote it ($schema, $defs with $anchor, allOf/anyOf, if/then/else).
JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                          "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}
JSON_SCHEMA_TOOL = ToolSpec(
    "json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
    JSON_SCHEMA_2020_12)

#: SEP-2243: an argument an HTTP client also sends as the header ``Mcp-Param-Region`` (the
#: daemon checks that the two agree before the app sees the call).
CUSTOM_HEADER_TOOL = ToolSpec(
    "test_custom_header", "Tests an argument mirrored in a custom Mcp-Param header (SEP-2243)",
    {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
     "required": ["region"]})
RAW_TOOLS = [JSON_SCHEMA_TOOL, CUSTOM_HEADER_TOOL]


async def _raw_schema_tool(parameters: dict[str, Any], ctx: ToolContext) -> str:
    """The tools whose input schemas are given as JSON (the decorator derives schemas from signatures)."""
    if ctx.tool == JSON_SCHEMA_TOOL.name:
        return f"JSON Schema 2020-12 tool called with: {json.dumps(parameters)}"
    if ctx.tool == CUSTOM_HEADER_TOOL.name:
        return f"region: {parameters.get('region')}"
    raise ToolError(f"unknown tool {ctx.tool!r}")


# --- resources -------------------------------------------------------------------------------


@app.resource("test://static-text", name="static-text", title="Static Text Resource",
              description="A static text resource for testing", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@app.resource("test://static-binary", name="static-binary", title="Static Binary Resource",
              description="A static binary resource (image) for testing", mime_type="image/png")
def static_binary() -> bytes:
    return base64.b64decode(PNG_B64)


@app.resource_template("test://template/{id}/data", name="template", title="Resource Template",
                       description="A resource template with parameter substitution", mime_type="application/json")
def template(id: str) -> str:  # noqa: A002 - the template's variable is called id
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@app.resource("test://watched-resource", name="watched-resource", title="Watched Resource",
              description="A resource that agents may subscribe to", mime_type="text/plain")
def watched() -> str:
    return "Watched resource content"


# --- prompts ---------------------------------------------------------------------------------


@app.prompt(title="Simple Test Prompt", description="A simple prompt without arguments")
def test_simple_prompt() -> str:
    return "This is a simple prompt for testing."


@app.prompt(title="Prompt With Arguments", description="A prompt with required arguments")
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@app.prompt(title="Prompt With Embedded Resource", description="A prompt that includes an embedded resource")
def test_prompt_with_embedded_resource(resourceUri: str) -> list[Any]:  # noqa: N803 - the suite's name
    return [
        {"role": "user", "content": {"type": "resource", "resource": {
            "uri": resourceUri, "mimeType": "text/plain", "text": "Embedded resource content for testing."}}},
        {"role": "user", "content": {"type": "text", "text": "Please process the embedded resource above."}},
    ]


@app.prompt(title="Prompt With Image", description="A prompt that includes image content")
def test_prompt_with_image() -> list[Any]:
    return [
        {"role": "user", "content": {"type": "image", "data": PNG_B64, "mimeType": "image/png"}},
        {"role": "user", "content": {"type": "text", "text": "Please analyze the image above."}},
    ]


# --- running ---------------------------------------------------------------------------------


async def _wait_for_quit() -> None:
    if os.name == "posix":
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                return
    # Windows: quit when stdin closes.
    await trio.to_thread.run_sync(sys.stdin.buffer.read, abandon_on_cancel=True)


async def main() -> int:
    # The decorated tools stay as they are (same specs: neither withdrawn nor re-added); the
    # raw-schema tools join them, their calls going to _raw_schema_tool.
    await app.set_tool_specs([*(tool.spec for tool in app.tools.values()), *RAW_TOOLS], _raw_schema_tool)
    refused: list[RegistrationRejected] = []

    async def run_app(cancel_scope: trio.CancelScope) -> None:
        try:
            await app.run()
        except RegistrationRejected as exc:  # refused for good: retrying cannot help
            refused.append(exc)
            cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_app, nursery.cancel_scope)
        await _wait_for_quit()
        nursery.cancel_scope.cancel()  # App.run sends goodbye as it stops
    if refused:
        print(f"MCP conformance app: registration refused: {refused[0]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(trio.run(main))
