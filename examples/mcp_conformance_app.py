"""The fixture app for the official MCP conformance suite (``@modelcontextprotocol/conformance``).

The suite's ``server`` scenarios expect an MCP server with particular tools, resources,
resource templates and prompts (those of the suite's own ``everything-server``). This app
offers them through toolbridge, so the suite can run unchanged against the app's one-app
scope, where they keep their own names::

    python examples/mcp_conformance_app.py &          # registers as "Conformance"
    npx @modelcontextprotocol/conformance server --url http://127.0.0.1:<port>/mcp/apps/Conformance

(The suite sends no ``Authorization`` header: ``tests/test_mcp_conformance_suite.py`` puts a
small loopback proxy that adds the bearer token in between; README "Official MCP conformance".)

Why not ``examples/conformance_app.py``: that is the fixture of toolbridge's *own* conformance
kit (``toolbridge conformance app``, broker/conformance/README.md), whose contract says it
registers exactly six tools and speaks wire protocol 1; the resources and prompts below would
make it register differently (protocol 2) and break the kit's vectors. The two fixtures test
different sides: that one the app client library against the wire protocol, this one the
daemon's MCP face against the MCP specification.

Not here yet (so the suite's scenarios for them fail; README lists each with its reason):
elicitation and sampling — app_client cannot express them yet. (Completions need nothing
from the app: the suite only checks that ``completion/complete`` answers.)

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

from app_client import App, Content, RegistrationRejected, ToolContext, ToolError
from app_client.wire import ToolSpec

#: A 1x1 PNG (the suite checks only that image data and a MIME type are there).
PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
#: A tiny WAV file: a RIFF header and no samples.
WAV_B64 = base64.b64encode(
    b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x40\x1f\x00\x00\x80\x3e\x00\x00\x02\x00\x10\x00"
    b"data\x00\x00\x00\x00").decode("ascii")

app = App("Conformance", instance_id=os.environ.get("TOOLBRIDGE_INSTANCE_ID") or None)


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
