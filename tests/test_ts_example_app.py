"""The example Node notes app (examples/node_notes_app), for real: a daemon, the app under Node,
and the MCP SDK over `toolbridge stdio` — including a tool that appears and disappears at runtime,
and the notes as resources with a prompt (wire protocol v2).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import mcp_types
import pytest
import trio
from mcp import Client, MCPError, StdioServerParameters

from broker.daemon.run import DaemonInfo
from mcp_testkit import relay_command, relay_env, running_daemon
from ts_testkit import ROOT, build, node, node_env

NOTES_APP = ROOT / "examples" / "node_notes_app" / "notes.mjs"


async def until_registered(info: DaemonInfo, name: str, present: bool = True, timeout: float = 20) -> None:
    """Wait (bounded) until the daemon's registry has (or no longer has) the agent-facing ``name``."""
    with trio.fail_after(timeout):
        while (info.core.registry.lookup(name) is not None) != present:
            await info.core.router.wait_tools_changed(info.core.registry.version)


async def tool_names(agent: Client) -> set[str]:
    return {tool.name for tool in (await agent.list_tools()).tools}


async def test_an_agent_uses_the_node_notes_app(tmp_path: Path) -> None:
    build()
    home = tmp_path / "home"
    async with running_daemon(home, http_port=None) as info:
        app = await trio.lowlevel.open_process(
            [node(), str(NOTES_APP), "--file", str(tmp_path / "notes.json")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=node_env(TOOLBRIDGE_HOME=str(home)),
        )
        try:
            await until_registered(info, "Notes__stats")
            command = relay_command(home, "--no-start")
            params = StdioServerParameters(command=command[0], args=command[1:], env=relay_env())
            async with Client(params) as agent:
                names = await tool_names(agent)
                assert "Notes__search_notes" in names and "Notes__restore_note" not in names
                created = await agent.call_tool("Notes__create_note", {"title": "Trip", "body": "see ../docs/packing.md"})
                assert not created.is_error, created
                assert created.structured_content == {"id": 3}

                seen: list[float] = []

                async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                    seen.append(progress)

                found = await agent.call_tool("Notes__search_notes", {"query": "docs"}, progress_callback=on_progress)
                assert '"title":"Trip"' in found.content[0].text.replace(" ", "")  # type: ignore[union-attr]
                assert seen == [1, 2, 3]

                stats = await agent.call_tool("Notes__stats", {})
                assert stats.structured_content == {"notes": 3, "words": 11, "inTrash": 0}

                missing = await agent.call_tool("Notes__read_note", {"id": 99})
                assert missing.is_error and "there is no note 99" in missing.content[0].text  # type: ignore[union-attr]

                assert not (await agent.call_tool("Notes__delete_note", {"id": 1})).is_error
                await until_registered(info, "Notes__restore_note")
                assert "Notes__restore_note" in await tool_names(agent)
                restored = await agent.call_tool("Notes__restore_note", {"id": 1})
                assert not restored.is_error, restored
                await until_registered(info, "Notes__restore_note", present=False)
                assert "Notes__restore_note" not in await tool_names(agent)
            assert app.stdin is not None
            await app.stdin.aclose()  # the user quits (Ctrl-D): goodbye, then exit 0
            with trio.fail_after(10):
                assert await app.wait() == 0
            await until_registered(info, "Notes__stats", present=False)
        finally:
            if app.returncode is None:
                app.kill()
                await app.wait()


@pytest.mark.filterwarnings("ignore:resources/.*subscribe is removed:mcp.shared.exceptions.MCPDeprecationWarning")
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_agent_reads_the_node_apps_notes_and_gets_its_prompt(tmp_path: Path, mode: str) -> None:
    """Wire protocol v2 from the TypeScript client: the MCP SDK (both eras, through `toolbridge
    stdio`) lists and reads the notes as resources, gets the prompt, and hears of a change."""
    build()
    home = tmp_path / "home"
    updated = trio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, mcp_types.ResourceUpdatedNotification):
            updated.set()

    async with running_daemon(home, http_port=None) as info:
        app = await trio.lowlevel.open_process(
            [node(), str(NOTES_APP)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=node_env(TOOLBRIDGE_HOME=str(home)),
        )
        try:
            await until_registered(info, "Notes__stats")
            command = relay_command(home, "--no-start")
            params = StdioServerParameters(command=command[0], args=command[1:], env=relay_env())
            async with Client(params, mode=mode, message_handler=on_message) as agent:
                listed = {str(r.uri): r for r in (await agent.list_resources()).resources}
                assert list(listed) == ["toolbridge://Notes/notes://index"]
                assert listed["toolbridge://Notes/notes://index"].mime_type == "text/markdown"
                templates = (await agent.list_resource_templates()).resource_templates
                assert [t.uri_template for t in templates] == ["toolbridge://Notes/notes://note/{id}"]
                index = (await agent.read_resource("toolbridge://Notes/notes://index")).contents[0]
                assert isinstance(index, mcp_types.TextResourceContents)
                assert index.text == "- 1: Groceries\n- 2: Ideas"
                note = (await agent.read_resource("toolbridge://Notes/notes://note/1")).contents[0]
                assert isinstance(note, mcp_types.TextResourceContents) and note.text == "# Groceries\n\nmilk, eggs, coffee"
                with pytest.raises(MCPError, match="there is no note 9"):
                    await agent.read_resource("toolbridge://Notes/notes://note/9")

                [summarize] = (await agent.list_prompts()).prompts
                assert summarize.name == "Notes__summarize"
                assert [(a.name, bool(a.required)) for a in summarize.arguments or []] == [("id", True), ("style", False)]
                got = await agent.get_prompt("Notes__summarize", {"id": "2", "style": "one line"})
                assert got.description == 'Summarize "Ideas"'
                embedded, ask = (m.content for m in got.messages)
                assert isinstance(embedded, mcp_types.EmbeddedResource)
                assert str(embedded.resource.uri) == "toolbridge://Notes/notes://note/2"
                assert isinstance(ask, mcp_types.TextContent) and ask.text == "Summarize the note above (one line)."

                uri = "toolbridge://Notes/notes://note/1"
                if mode == "legacy":
                    await agent.session.subscribe_resource(uri)
                    assert not (await agent.call_tool("Notes__append_to_note", {"id": 1, "text": "bread"})).is_error
                    with trio.fail_after(10):
                        await updated.wait()
                else:
                    async with agent.listen(resource_subscriptions=[uri]) as subscription:
                        assert not (await agent.call_tool("Notes__append_to_note", {"id": 1, "text": "bread"})).is_error
                        with trio.fail_after(10):
                            async for event in subscription:
                                assert getattr(event, "uri", None) == uri
                                break
                again = (await agent.read_resource(uri)).contents[0]
                assert isinstance(again, mcp_types.TextResourceContents) and again.text.endswith("bread")
            assert app.stdin is not None
            await app.stdin.aclose()
            with trio.fail_after(10):
                assert await app.wait() == 0
        finally:
            if app.returncode is None:
                app.kill()
                await app.wait()
