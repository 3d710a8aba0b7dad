"""The whole stack in real processes: an app built on ``app_client``, the daemon, ``toolbridge
stdio``, and the MCP SDK as the agent (plus the same daemon over HTTP)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import mcp_types as types
import pytest
import trio
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from mcp_testkit import HTTPX_STREAM_WARNINGS, PNG_B64, http_client, mcp_url, relay_command, relay_env, running_daemon

pytestmark = [pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS]

APP = textwrap.dedent(
    """
    import base64, sys, trio
    from app_client import App, ToolContext, ToolError, image, text

    app = App("Notes")

    @app.tool
    async def add(a: int, b: int) -> dict:
        \"\"\"Add two numbers.\"\"\"
        return {"sum": a + b}

    @app.tool
    async def work(steps: int, ctx: ToolContext) -> str:
        \"\"\"Take a few steps, reporting each.\"\"\"
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step}")
        return "done"

    @app.tool
    def refuse() -> None:
        \"\"\"Always refuses.\"\"\"
        raise ToolError("nothing to refuse")

    @app.tool
    def snapshot() -> list:
        \"\"\"A picture.\"\"\"
        return [text("the window"), image(base64.b64decode(sys.argv[1]))]

    @app.tool
    async def wait(ctx: ToolContext) -> str:
        \"\"\"Wait until cancelled.\"\"\"
        try:
            await trio.sleep_forever()
        finally:
            print("cancelled", flush=True)

    trio.run(app.run)
    """
)


async def test_an_app_client_app_driven_over_stdio_and_http(tmp_path: Path) -> None:
    home = tmp_path / "home"
    script = tmp_path / "notes_app.py"
    script.write_text(APP)
    async with running_daemon(home) as info, trio.open_nursery() as nursery:
        app = await trio.lowlevel.open_process(
            [sys.executable, str(script), PNG_B64], stdout=subprocess.PIPE,
            env={**os.environ, "TOOLBRIDGE_HOME": str(home)},
        )
        try:
            with trio.fail_after(15):
                while info.core.registry.lookup("Notes__wait") is None:
                    await info.core.router.wait_tools_changed(info.core.registry.version)

            command = relay_command(home, "--no-start")
            params = StdioServerParameters(command=command[0], args=command[1:], env=relay_env())
            async with Client(params) as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                assert names == {"Notes__add", "Notes__work", "Notes__refuse", "Notes__snapshot", "Notes__wait"}
                assert (await client.call_tool("Notes__add", {"a": 2, "b": 3})).structured_content == {"sum": 5}
                refused = await client.call_tool("Notes__refuse", {})
                assert refused.is_error and "nothing to refuse" in refused.content[0].text  # type: ignore[union-attr]
                seen: list[float] = []

                async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                    seen.append(progress)

                await client.call_tool("Notes__work", {"steps": 3}, progress_callback=on_progress)
                assert seen == [1, 2, 3]

            async with http_client(info) as http:
                async with Client(streamable_http_client(mcp_url(info), http_client=http), mode="legacy") as client:
                    picture = await client.call_tool("Notes__snapshot", {})
                    assert isinstance(picture.content[1], types.ImageContent)
                    assert picture.content[1].data == PNG_B64

                    with trio.move_on_after(0.5):
                        await client.call_tool("Notes__wait", {})
                    assert app.stdout is not None
                    output = b""
                    with trio.fail_after(10):  # the app's stdout also carries its log lines
                        while b"\ncancelled\n" not in b"\n" + output:
                            output += await app.stdout.receive_some(65536)
        finally:
            app.terminate()
            await app.wait()
        nursery.cancel_scope.cancel()
