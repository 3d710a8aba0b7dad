"""Wire protocol v2's completions, log messages and elicitation (protocol.md sections 12 and 13)
from the TypeScript client, for real: a daemon, the TypeScript conformance fixture app under Node
(its version-2 fixtures), and the MCP SDK through `toolbridge stdio` in both eras.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import Client, StdioServerParameters

from broker.daemon.run import DaemonInfo
from mcp_testkit import relay_command, relay_env, running_daemon
from ts_testkit import FIXTURE_APP, build, node, node_env


async def until_registered(info: DaemonInfo, name: str, timeout: float = 20) -> None:
    with trio.fail_after(timeout):
        while info.core.registry.lookup(name) is None:
            await info.core.router.wait_tools_changed(info.core.registry.version)


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated:mcp.shared.exceptions.MCPDeprecationWarning")
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_sdk_completes_hears_logs_and_answers_a_question_from_a_ts_app(tmp_path: Path, mode: str) -> None:
    build()
    home = tmp_path / "home"
    heard: list[tuple[str, str | None, Any]] = []
    asked: list[types.ElicitRequestParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        heard.append((params.level, params.logger, params.data))

    async def user(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"overwrite": True})

    async with running_daemon(home, http_port=None) as info:
        app = await trio.lowlevel.open_process(
            [node(), str(FIXTURE_APP)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=node_env(TOOLBRIDGE_HOME=str(home), TOOLBRIDGE_CONFORMANCE_VERSION="2"),
        )
        try:
            await until_registered(info, "Conformance__ask")
            command = relay_command(home, "--no-start")
            params = StdioServerParameters(command=command[0], args=command[1:], env=relay_env())
            extra: dict[str, Any] = {"log_level": "info"} if mode == "auto" else {}
            async with Client(params, mode=mode, logging_callback=on_log, elicitation_callback=user, **extra) as agent:
                greet = types.PromptReference(name="Conformance__greet")
                got = (await agent.complete(greet, {"name": "name", "value": "al"})).completion
                assert got.values == ["Alice", "Alfred"]
                page = types.ResourceTemplateReference(uri="toolbridge://Conformance/conformance://pages/{name}")
                got = (await agent.complete(page, {"name": "name", "value": "pl"})).completion
                assert (got.values, got.total, got.has_more) == (["pl-notes", "pl-plan"], 5, True)

                if mode == "legacy":
                    await agent.set_logging_level("info")
                logged = await agent.call_tool("Conformance__log", {"level": "warning"})
                assert not logged.is_error, logged
                await agent.list_tools(cache_mode="bypass")  # one more round trip: the notifications are in
                # The call's own message, on its stream before its result, in both eras; the
                # app-wide one reaches only a handshake-era session that set its level.
                assert ("warning", "Conformance", {"call": "log"}) in heard
                assert (("warning", "Conformance.conformance", "app-wide message") in heard) == (mode == "legacy")

                answered = await agent.call_tool("Conformance__ask", {})
                assert not answered.is_error, answered
                assert answered.structured_content == {"action": "accept", "content": {"overwrite": True}}
                assert len(asked) == 1 and isinstance(asked[0], types.ElicitRequestFormParams)
                assert asked[0].message == "Overwrite report.txt?"
        finally:
            app.terminate()
            with trio.fail_after(10):
                await app.wait()
