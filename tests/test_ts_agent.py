"""An agent (the MCP SDK, through `toolbridge stdio`) drives the TypeScript fixture app.

The app is clients/typescript's conformance fixture (CONTRACT-16), run by Node as a separate
process that finds the daemon through its home directory; the daemon runs in this trio loop so
the test can kill it abruptly and start another on the same home (new port), which the app and
the relay must both follow.
"""

from __future__ import annotations

from pathlib import Path

import trio
from mcp import Client, StdioServerParameters
from mcp import types as mcp_types

from agentkit import app_process, call_the_fixture_tools
from mcp_testkit import relay_command, relay_env, start_daemon_task
from ts_testkit import FIXTURE_APP, build, node, node_env


async def test_an_agent_drives_the_typescript_app_through_stdio_across_a_daemon_restart(tmp_path: Path) -> None:
    build()
    home = tmp_path / "home"
    command = relay_command(home, "--no-start")
    params = StdioServerParameters(command=command[0], args=command[1:], env=relay_env())
    async with trio.open_nursery() as nursery:
        first, first_scope, first_finished = await start_daemon_task(nursery, home)
        env = node_env(TOOLBRIDGE_HOME=str(home))
        async with app_process([node(), str(FIXTURE_APP)], env) as (app, stdout, stderr):
            await stdout.wait_for("connected Conformance\n")
            async with Client(params) as agent:
                names = {tool.name for tool in (await agent.list_tools()).tools}
                assert {f"Conformance__{n}" for n in ("echo", "progress", "slow", "image", "structured", "fail")} <= names

                echo = await agent.call_tool("Conformance__echo", {"text": "héllo"})
                assert not echo.is_error
                assert echo.content == [mcp_types.TextContent(type="text", text="héllo")]

                await call_the_fixture_tools(agent, stderr)

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
