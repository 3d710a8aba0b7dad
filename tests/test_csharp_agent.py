"""An agent (the MCP SDK, through `toolbridge stdio`) drives the C# fixture app (issue 29).

The app is clients/csharp's conformance fixture with its version-2 fixtures, run by Mono as a
separate process that finds the daemon through its home directory: tools (echo, progress,
cancel, image, structured, error), a resource read, a prompt and an elicitation. The daemon runs
in this trio loop so the test can kill it abruptly and start another on the same home (another
port), which the app and the relay must both follow.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import trio
from mcp import Client, StdioServerParameters
from mcp import types as mcp_types

from agentkit import app_process, call_the_fixture_tools
from csharp_testkit import FIXTURE_APP, build, cs_env, mono
from mcp_testkit import relay_command, relay_env, start_daemon_task


async def test_an_agent_drives_the_csharp_app_through_stdio_across_a_daemon_restart(tmp_path: Path) -> None:
    build()
    home = tmp_path / "home"
    command = relay_command(home, "--no-start")
    server = StdioServerParameters(command=command[0], args=command[1:], env=relay_env())
    asked: list[types.ElicitRequestParams] = []

    async def user(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"overwrite": True})

    async with trio.open_nursery() as nursery:
        first, first_scope, first_finished = await start_daemon_task(nursery, home)
        env = cs_env(TOOLBRIDGE_HOME=str(home), TOOLBRIDGE_CONFORMANCE_VERSION="2")
        async with app_process([mono(), str(FIXTURE_APP)], env) as (app, stdout, stderr):
            await stdout.wait_for("connected Conformance\n")
            async with Client(server, elicitation_callback=user) as agent:
                names = {tool.name for tool in (await agent.list_tools()).tools}
                assert {f"Conformance__{n}" for n in ("echo", "progress", "slow", "image", "structured", "fail", "ask")} <= names

                echo = await agent.call_tool("Conformance__echo", {"text": "héllo \U0001F600"})
                assert not echo.is_error
                assert echo.content == [mcp_types.TextContent(type="text", text="héllo \U0001F600")]

                await call_the_fixture_tools(agent, stderr)

                fixed = (await agent.read_resource("toolbridge://Conformance/conformance://text")).contents[0]
                assert isinstance(fixed, mcp_types.TextResourceContents) and fixed.text == "hello from Conformance"
                page = (await agent.read_resource("toolbridge://Conformance/conformance://pages/plan%20b")).contents[0]
                assert isinstance(page, mcp_types.TextResourceContents) and page.text == "# plan b"

                greeting = await agent.get_prompt("Conformance__greet", {"name": "Ada"})
                assert greeting.description == "Greet someone"
                assert greeting.messages[0].content == mcp_types.TextContent(type="text", text="Say hello to Ada.")

                answered = await agent.call_tool("Conformance__ask", {})
                assert not answered.is_error, answered
                assert answered.structured_content == {"action": "accept", "content": {"overwrite": True}}
                assert len(asked) == 1 and asked[0].message == "Overwrite report.txt?"

                # The daemon dies without a word; another starts on the same home, on another port.
                first_scope.cancel()
                await first_finished.wait()
                second, second_scope, _ = await start_daemon_task(nursery, home)
                assert second.port != first.port
                await stdout.wait_for("connected Conformance\n", count=2)
                again = await agent.call_tool("Conformance__echo", {"text": "back again"})
                assert again.content == [mcp_types.TextContent(type="text", text="back again")]
            app.terminate()  # SIGTERM: a clean shutdown (goodbye), then exit status 0
            with trio.fail_after(10):
                assert await app.wait() == 0
        second_scope.cancel()
