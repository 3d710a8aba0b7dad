"""Resources and prompts through uplinks (protocol v2 over federation), with real daemons.

``top`` (MCP over HTTP) has ``mid`` uplinked into it and ``desk`` uplinked into ``mid``; an
app_client app ``Notes`` registers with ``desk``. An agent at the top (the MCP SDK, both eras)
sees its resources as ``toolbridge://mid/toolbridge://desk/toolbridge://Notes/<uri>`` and its
prompt as ``mid__desk__Notes__review``, reads them, gets the prompt, and hears of updates and
of a resource added at runtime.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import MCPError

from app_client import App, ToolError
from fedkit import Daemon, start_daemon
from mcp_testkit import HTTPX_STREAM_WARNINGS, PNG_B64
from test_federation import agent

pytestmark = [pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS]

PREFIX = "toolbridge://mid/toolbridge://desk/toolbridge://Notes/"


def notes_app(desk: Daemon) -> App:
    app = App("Notes", host="127.0.0.1", port=desk.port, token=desk.token)

    @app.resource("notes://readme", mime_type="text/plain", description="Read me")
    async def readme() -> str:
        return "hello from Notes"

    @app.resource("notes://logo.png", mime_type="image/png")
    async def logo() -> bytes:
        return base64.b64decode(PNG_B64)

    @app.resource_template("notes://pages/{name}", mime_type="text/markdown")
    async def page(name: str) -> str:
        if name == "secret":
            raise ToolError("that page is private")
        return f"# {name}"

    @app.prompt
    async def review(path: str, focus: str = "bugs") -> list[dict[str, Any]]:
        """Review a file."""
        return [f"Review {path} for {focus}.",  # type: ignore[list-item]
                {"role": "assistant", "content": {"type": "resource", "resource": {
                    "uri": "notes://readme", "mimeType": "text/plain", "text": "hello"}}}]

    return app


@asynccontextmanager
async def brokers(tmp_path: Path) -> AsyncIterator[tuple[Daemon, Daemon, Daemon]]:
    async with trio.open_nursery() as nursery:
        top = await start_daemon(nursery, tmp_path / "top", http_port=0)
        mid = await start_daemon(nursery, tmp_path / "mid", uplink=top.address, uplink_name="mid", uplink_token=top.token)
        desk = await start_daemon(nursery, tmp_path / "desk", uplink=mid.address, uplink_name="desk",
                                  uplink_token=mid.token)
        try:
            yield top, mid, desk
        finally:
            for daemon in (desk, mid, top):
                daemon.shutdown.set()


async def until_offered(top: Daemon, uri: str, present: bool = True) -> None:
    directory = top.core.registry.resources
    with trio.fail_after(20):
        while any(e["uri"] == uri for e in directory.list_resources()) != present:
            await directory.wait_changed(directory.version)


@pytest.mark.filterwarnings("ignore:resources/.*subscribe is removed:mcp.shared.exceptions.MCPDeprecationWarning")
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_resources_and_prompts_cross_two_uplinks(tmp_path: Path, mode: str) -> None:
    got_update = trio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification) and str(message.params.uri) == PREFIX + "notes://readme":
            got_update.set()

    async with brokers(tmp_path) as (top, mid, desk):
        app = notes_app(desk)
        async with app.connected(timeout=20):
            await until_offered(top, PREFIX + "notes://readme")
            async with agent(top, mode, message_handler=on_message) as client:
                listed = {str(r.uri): r for r in (await client.list_resources()).resources}
                assert set(listed) == {PREFIX + "notes://readme", PREFIX + "notes://logo.png"}
                assert listed[PREFIX + "notes://readme"].description == "Read me"
                templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
                assert templates == [PREFIX + "notes://pages/{name}"]

                text = (await client.read_resource(PREFIX + "notes://readme")).contents[0]
                assert isinstance(text, types.TextResourceContents)
                assert (text.text, str(text.uri), text.mime_type) == ("hello from Notes", PREFIX + "notes://readme", "text/plain")
                blob = (await client.read_resource(PREFIX + "notes://logo.png")).contents[0]
                assert isinstance(blob, types.BlobResourceContents) and blob.blob == PNG_B64
                page = (await client.read_resource(PREFIX + "notes://pages/plan%20b")).contents[0]
                assert isinstance(page, types.TextResourceContents)
                assert (page.text, str(page.uri)) == ("# plan b", PREFIX + "notes://pages/plan%20b")
                with pytest.raises(MCPError, match="that page is private"):
                    await client.read_resource(PREFIX + "notes://pages/secret")
                with pytest.raises(MCPError, match="offers no resource"):
                    await client.read_resource("toolbridge://mid/toolbridge://desk/toolbridge://Notes/notes://other")

                [review] = (await client.list_prompts()).prompts
                assert (review.name, review.description) == ("mid__desk__Notes__review", "Review a file.")
                assert [(a.name, bool(a.required)) for a in review.arguments or []] == [("path", True), ("focus", False)]
                got = await client.get_prompt("mid__desk__Notes__review", {"path": "a.py"})
                assert got.description == "Review a file."
                first, second = (m.content for m in got.messages)
                assert isinstance(first, types.TextContent) and first.text == "Review a.py for bugs."
                assert isinstance(second, types.EmbeddedResource)
                assert str(second.resource.uri) == PREFIX + "notes://readme"
                with pytest.raises(MCPError, match="missing path"):
                    await client.get_prompt("mid__desk__Notes__review", {})

                if mode == "legacy":
                    await client.session.subscribe_resource(PREFIX + "notes://readme")
                    app.resource_updated("notes://readme")
                    with trio.fail_after(20):
                        await got_update.wait()
                else:
                    async with client.listen(resource_subscriptions=[PREFIX + "notes://readme"]) as subscription:
                        app.resource_updated("notes://readme")
                        with trio.fail_after(20):
                            async for event in subscription:
                                assert getattr(event, "uri", None) == PREFIX + "notes://readme"
                                break

                # A resource added at runtime goes up both hops (setResources at each).
                app.add_resource(lambda: "fresh", "notes://fresh", name="fresh")
                await until_offered(top, PREFIX + "notes://fresh")
                fresh = (await client.read_resource(PREFIX + "notes://fresh")).contents[0]
                assert isinstance(fresh, types.TextResourceContents) and fresh.text == "fresh"
        await until_offered(top, PREFIX + "notes://readme", present=False)  # the app left: gone above too
