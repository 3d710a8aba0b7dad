"""Resources (wire protocol v2) end to end: a raw-socket app, the real daemon, the MCP SDK as
the agent over stdio and HTTP, in both eras (legacy handshake and 2026-07-28 via auto)."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import msgspec
import pytest
import trio
import trio.testing
from mcp import Client, MCPError

from app_client.wire import (
    Register,
)
from app_client.protocol import PromptGet, PromptResponse, PromptSpec, ResourceRead, ResourceResponse, ResourceSpec, ResourceTemplateSpec, ResourceUpdated
from broker.daemon.run import DaemonInfo
from broker.mcp.updates import UPDATE_WINDOW
from mcp_testkit import HTTPX_STREAM_WARNINGS, PNG_B64, ScriptedApp, connect_agent, running_daemon

pytestmark = [pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS]

COMBOS = [("stdio", "legacy"), ("stdio", "auto"), ("http", "legacy"), ("http", "auto")]
README = "toolbridge://Notes/notes://readme"
LOGO = "toolbridge://Notes/img://logo.png"


class ResourceApp(ScriptedApp):
    """An app over a raw socket that offers resources (protocol v2, unless ``version`` says 1)."""

    def __init__(self, port: int, token: str, name: str = "Notes", version: int = 2) -> None:
        super().__init__(port, token, name, tools=[])
        self.name, self.version = name, version
        self.reads: list[ResourceRead] = []

    def _register(self) -> Register:
        return Register(
            app_name=self.name, token=self.token, protocol_version=self.version,
            resources=[ResourceSpec("notes://readme", "readme", mime_type="text/plain", description="Read me"),
                       ResourceSpec("img://logo.png", "logo", mime_type="image/png")],
            resource_templates=[ResourceTemplateSpec("file:///docs/{name}", "doc", mime_type="text/plain")],
            prompts=[PromptSpec("hello")],
        )

    async def _handle(self, message: Any) -> bool:
        if not isinstance(message, ResourceRead):
            return False
        self.reads.append(message)
        await self._answer_read(message)
        return True

    async def _answer_read(self, read: ResourceRead) -> None:
        uri = read.uri
        if uri == "notes://readme":
            contents = [{"uri": uri, "mimeType": "text/plain", "text": "hello from Notes"}]
        elif uri == "img://logo.png":
            contents = [{"uri": uri, "mimeType": "image/png", "blob": PNG_B64}]
        elif uri.startswith("file:///docs/") and not uri.endswith("missing"):
            if uri.endswith("slow"):
                return  # never answered: the agent cancels
            contents = [{"uri": uri, "text": f"doc {uri.rsplit('/', 1)[1]}"}]
        else:
            await self.send(ResourceResponse(read.correlation_id, error=f"no such resource {uri}"))
            return
        await self.send(ResourceResponse(read.correlation_id, contents=contents))


@asynccontextmanager
async def setup(tmp_path: Path, transport: str, mode: str, **kwargs: Any
                ) -> AsyncIterator[tuple[DaemonInfo, ResourceApp, Client]]:
    home = tmp_path / "home"
    async with running_daemon(home) as info, trio.open_nursery() as nursery:
        app = await ResourceApp(info.port, info.token).start(nursery)
        async with connect_agent(transport, mode, info, home, **kwargs) as client:
            yield info, app, client
        await app.close()


@pytest.mark.parametrize(("transport", "mode"), COMBOS)
async def test_list_templates_and_read_text_and_blob(tmp_path: Path, transport: str, mode: str) -> None:
    async with setup(tmp_path, transport, mode) as (info, app, client):
        assert app.registered is not None and app.registered.protocol_version == 2
        listed = (await client.list_resources()).resources
        assert [(str(r.uri), r.name, r.mime_type) for r in listed] == [
            (LOGO, "logo", "image/png"), (README, "readme", "text/plain")]
        templates = (await client.list_resource_templates()).resource_templates
        assert [(t.uri_template, t.name) for t in templates] == [("toolbridge://Notes/file:///docs/{name}", "doc")]

        text = (await client.read_resource(README)).contents
        assert len(text) == 1 and isinstance(text[0], types.TextResourceContents)
        assert (text[0].text, str(text[0].uri)) == ("hello from Notes", README)
        blob = (await client.read_resource(LOGO)).contents
        assert isinstance(blob[0], types.BlobResourceContents)
        assert base64.b64decode(blob[0].blob) == base64.b64decode(PNG_B64)
        doc = (await client.read_resource("toolbridge://Notes/file:///docs/plan.md")).contents
        assert isinstance(doc[0], types.TextResourceContents) and doc[0].text == "doc plan.md"
        # The app saw its own URIs, never the agent-facing ones.
        assert [r.uri for r in app.reads] == ["notes://readme", "img://logo.png", "file:///docs/plan.md"]


@pytest.mark.parametrize(("transport", "mode"), COMBOS)
async def test_unknown_foreign_and_traversal_uris_are_refused(tmp_path: Path, transport: str, mode: str) -> None:
    async with setup(tmp_path, transport, mode) as (info, app, client):
        refused = {
            "toolbridge://Notes/notes://other": "offers no resource",
            "toolbridge://Other/notes://readme": "no connected app 'Other'",
            "notes://readme": "start with toolbridge://",
            "file:///etc/passwd": "start with toolbridge://",
            "toolbridge://Notes/file:///docs/..": "'..'",
            "toolbridge://Notes/file:///docs/%2e%2e": "'..'",
            "toolbridge://Notes/file:///docs/../../etc/passwd": "offers no resource",
        }
        for uri, why in refused.items():
            with pytest.raises(MCPError) as caught:
                await client.read_resource(uri)
            assert why in caught.value.error.message, (uri, caught.value.error.message)
        assert app.reads == []  # none of them reached the app
        # The app's own refusal reaches the agent; the session goes on.
        with pytest.raises(MCPError, match="no such resource file:///docs/missing"):
            await client.read_resource("toolbridge://Notes/file:///docs/missing")
        assert (await client.read_resource(README)).contents


@pytest.mark.filterwarnings("ignore:resources/.*subscribe is removed:mcp.shared.exceptions.MCPDeprecationWarning")
@pytest.mark.parametrize(("transport", "mode"), COMBOS)
async def test_updated_after_subscribe(tmp_path: Path, transport: str, mode: str) -> None:
    updated: list[str] = []
    got = trio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.append(str(message.params.uri))
            got.set()

    async with setup(tmp_path, transport, mode, message_handler=on_message) as (info, app, client):
        if mode == "legacy":
            await client.session.subscribe_resource(README)
            await app.send(ResourceUpdated("img://logo.png"))  # not subscribed: not sent
            await app.send(ResourceUpdated("notes://readme"))
            with trio.fail_after(10):
                await got.wait()
            assert updated == [README]
            await client.session.unsubscribe_resource(README)
        else:
            async with client.listen(resource_subscriptions=[README]) as subscription:
                assert subscription.honored.resource_subscriptions == [README]
                await app.send(ResourceUpdated("img://logo.png"))
                await app.send(ResourceUpdated("notes://readme"))
                with trio.fail_after(10):
                    async for event in subscription:
                        assert getattr(event, "uri", None) == README
                        break


@pytest.mark.filterwarnings("ignore:resources/.*subscribe is removed:mcp.shared.exceptions.MCPDeprecationWarning")
@pytest.mark.parametrize(("transport", "mode"), [("http", "legacy"), ("http", "auto")])
async def test_a_flood_of_updates_is_folded_per_uri_and_the_last_one_always_arrives(
        tmp_path: Path, transport: str, mode: str, mock_clock: trio.testing.MockClock) -> None:
    """Regression (issue 27, item 14): every ``resourceUpdated`` was passed on, so an app's
    flood reached subscribed agents by the tens of thousands. Now each agent hears of a URI at
    most once per window: the first at once, the rest folded into one at the window's end.
    The clock only moves when the test moves it, so "at once" and "at the window's end" are
    exact."""
    seen: list[str] = []
    arrived = trio.Event()

    def note(uri: str) -> None:
        nonlocal arrived
        seen.append(uri)
        arrived.set()
        arrived = trio.Event()

    async def until(uri: str, count: int) -> None:
        while seen.count(uri) < count:
            await arrived.wait()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification) and mode == "legacy":
            note(str(message.params.uri))  # (2026-07-28: the listen stream's events, below)

    async with setup(tmp_path, transport, mode, message_handler=on_message) as (info, app, client):
        async with trio.open_nursery() as nursery:
            if mode == "legacy":
                await client.session.subscribe_resource(README)
                await client.session.subscribe_resource(LOGO)
            else:
                await nursery.start(_listen, client, [README, LOGO], note)
            for _ in range(30):  # within one window: the clock stands still
                await app.send(ResourceUpdated("notes://readme"))
            await app.send(ResourceUpdated("img://logo.png"))  # after them on the same link
            await until(LOGO, 1)
            assert seen.count(README) == 1  # the first at once; the other 29 are folded
            mock_clock.jump(UPDATE_WINDOW)
            await until(README, 2)  # the last one, at the window's end: nothing lost that matters
            await app.send(ResourceUpdated("img://logo.png"))  # its window is over: at once
            await until(LOGO, 2)
            assert seen == [README, LOGO, README, LOGO]
            nursery.cancel_scope.cancel()  # ends the listen stream (2026-07-28)


async def _listen(client: Client, uris: list[str], note: Any, *, task_status: trio.TaskStatus[Any]) -> None:
    """A ``subscriptions/listen`` stream for ``uris``; each update goes to ``note``."""
    async with client.listen(resource_subscriptions=uris) as subscription:
        task_status.started()
        async for event in subscription:
            uri = getattr(event, "uri", None)
            if uri is not None:
                note(str(uri))


@pytest.mark.parametrize(("transport", "mode"), COMBOS)
async def test_list_changed_when_an_app_comes_and_goes(tmp_path: Path, transport: str, mode: str) -> None:
    changes = 0
    changed = trio.Event()

    async def on_message(message: Any) -> None:
        nonlocal changes, changed
        if isinstance(message, types.ResourceListChangedNotification):
            changes += 1
            changed.set()

    async with setup(tmp_path, transport, mode, message_handler=on_message) as (info, app, client):
        async with trio.open_nursery() as nursery:
            if mode == "legacy":
                other = await ResourceApp(info.port, info.token, "Other").start(nursery)
                with trio.fail_after(10):
                    await changed.wait()
                uris = {str(r.uri) for r in (await client.list_resources()).resources}
                assert "toolbridge://Other/notes://readme" in uris
                changed = trio.Event()
                await app.close()
                with trio.fail_after(10):
                    await changed.wait()
            else:
                async with client.listen(resources_list_changed=True) as subscription:
                    assert subscription.honored.resources_list_changed is True
                    other = await ResourceApp(info.port, info.token, "Other").start(nursery)
                    with trio.fail_after(10):
                        async for _event in subscription:
                            break
                uris = {str(r.uri) for r in (await client.list_resources()).resources}
                assert "toolbridge://Other/notes://readme" in uris
            await other.close()


@pytest.mark.parametrize(("transport", "mode"), [("stdio", "legacy"), ("http", "auto")])
async def test_cancelled_read_tells_the_app(tmp_path: Path, transport: str, mode: str) -> None:
    async with setup(tmp_path, transport, mode) as (info, app, client):
        with trio.move_on_after(0.5):
            await client.read_resource("toolbridge://Notes/file:///docs/slow")
        await app.until(lambda: len(app.cancels) == 1)
        assert app.cancels[0].correlation_id == app.reads[0].correlation_id
        assert (await client.read_resource(README)).contents  # the session goes on


async def test_v1_app_is_unaffected(tmp_path: Path) -> None:
    """A v1 app's resource fields are ignored and it never sees a v2 message."""
    home = tmp_path / "home"
    async with running_daemon(home) as info, trio.open_nursery() as nursery:
        app = await ResourceApp(info.port, info.token, version=1).start(nursery)
        assert app.registered is not None and app.registered.protocol_version == 1
        async with connect_agent("http", "legacy", info, home) as client:
            assert (await client.list_resources()).resources == []
            assert (await client.list_prompts()).prompts == []
            with pytest.raises(MCPError, match="no connected app 'Notes'"):
                await client.read_resource(README)
        assert app.reads == []
        await app.close()


# --- the same through app_client's decorators ------------------------------------------------


@pytest.mark.filterwarnings("ignore:resources/.*subscribe is removed:mcp.shared.exceptions.MCPDeprecationWarning")
@pytest.mark.parametrize(("transport", "mode"), [("stdio", "legacy"), ("http", "auto")])
async def test_app_client_resources_end_to_end(tmp_path: Path, transport: str, mode: str) -> None:
    from app_client import App

    home = tmp_path / "home"
    got = trio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            got.set()

    async with running_daemon(home) as info:
        app = App("Desk", host="127.0.0.1", port=info.port, token=info.token)

        @app.resource("desk://status", mime_type="text/plain", description="The desk's status")
        def status() -> str:  # sync: runs in a worker thread
            return "all quiet"

        @app.resource("desk://logo.png", mime_type="image/png")
        async def logo() -> bytes:
            return base64.b64decode(PNG_B64)

        @app.resource_template("desk://notes/{name}", mime_type="text/markdown")
        async def note(name: str) -> str:
            if name == "secret":
                raise PermissionError("that note is private")
            return f"# {name}"

        async with app.connected(timeout=10):
            assert app.registration is not None and app.registration.protocol_version == 2
            async with connect_agent(transport, mode, info, home, message_handler=on_message) as client:
                uris = [str(r.uri) for r in (await client.list_resources()).resources]
                assert uris == ["toolbridge://Desk/desk://logo.png", "toolbridge://Desk/desk://status"]
                text = (await client.read_resource("toolbridge://Desk/desk://status")).contents[0]
                assert isinstance(text, types.TextResourceContents) and text.text == "all quiet"
                assert text.mime_type == "text/plain"
                blob = (await client.read_resource("toolbridge://Desk/desk://logo.png")).contents[0]
                assert isinstance(blob, types.BlobResourceContents) and blob.blob == PNG_B64
                md = (await client.read_resource("toolbridge://Desk/desk://notes/plan%20b")).contents[0]
                assert isinstance(md, types.TextResourceContents) and md.text == "# plan b"
                with pytest.raises(MCPError, match="that note is private"):
                    await client.read_resource("toolbridge://Desk/desk://notes/secret")
                # At runtime: a new resource is offered at once (setResources), and withdrawn.
                directory = info.core.registry.resources
                seen = directory.version
                app.add_resource(lambda: "fresh", "desk://fresh", name="fresh")
                with trio.fail_after(10):
                    await directory.wait_changed(seen)
                fresh = (await client.read_resource("toolbridge://Desk/desk://fresh")).contents[0]
                assert isinstance(fresh, types.TextResourceContents) and fresh.text == "fresh"
                seen = directory.version
                app.remove_resource("desk://fresh")
                with trio.fail_after(10):
                    await directory.wait_changed(seen)
                assert len((await client.list_resources()).resources) == 2
                if mode == "legacy":
                    await client.session.subscribe_resource("toolbridge://Desk/desk://status")
                    app.resource_updated("desk://status")
                    with trio.fail_after(10):
                        await got.wait()
                else:
                    async with client.listen(resource_subscriptions=["toolbridge://Desk/desk://status"]) as sub:
                        app.resource_updated("desk://status")
                        with trio.fail_after(10):
                            async for event in sub:
                                assert getattr(event, "uri", None) == "toolbridge://Desk/desk://status"
                                break


# --- the pipeline: audit rows, a disconnect or a deadline during a read -----------------------


async def test_reads_are_call_log_rows(tmp_path: Path) -> None:
    from test_pipeline_kinds import logged_kinds

    home = tmp_path / "home"
    async with running_daemon(home, call_log_flush_interval=0.05) as info, trio.open_nursery() as nursery:
        app = await ResourceApp(info.port, info.token).start(nursery)
        async with connect_agent("http", "legacy", info, home) as client:
            await client.read_resource(README)
            for uri in ("toolbridge://Notes/nope://x", "toolbridge://Notes/file:///docs/%2e%2e",
                        "toolbridge://Notes/file:///docs/missing"):
                with pytest.raises(MCPError):
                    await client.read_resource(uri)
        rows = await logged_kinds(home, 4)
        assert [(tool, kind) for tool, kind, _error, _agent in rows] == [
            ("resource_read", "ok"), ("resource_read", "unknown_tool"), ("resource_read", "guard_rejected"),
            ("resource_read", "app_error")]
        await app.close()


async def test_a_read_fails_at_once_when_the_app_disconnects(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with running_daemon(home) as info, trio.open_nursery() as nursery:
        app = await ResourceApp(info.port, info.token).start(nursery)
        async with connect_agent("http", "legacy", info, home) as client:
            async with trio.open_nursery() as reads:
                async def read_slow() -> None:
                    with pytest.raises(MCPError, match="disconnected during the read"):
                        await client.read_resource("toolbridge://Notes/file:///docs/slow")

                reads.start_soon(read_slow)
                await app.until(lambda: len(app.reads) == 1)
                with trio.fail_after(5):  # at once, not at the 30 s deadline
                    await app.close()
            assert (await client.list_resources()).resources == []
        links = info.core.app_links.live
        assert all(not link.reads for link in links.values())


async def test_a_read_the_app_never_answers_times_out(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with running_daemon(home) as info, trio.open_nursery() as nursery:
        app = await ResourceApp(info.port, info.token).start(nursery)
        async with connect_agent("http", "legacy", info, home) as client:
            uri = "toolbridge://Notes/file:///docs/slow"
            with pytest.raises(MCPError, match="timed out after 0.2 s"):
                await client.read_resource(uri, meta={"toolbridge/timeoutMs": 200})  # type: ignore[typeddict-unknown-key]
            await app.until(lambda: len(app.cancels) == 1)
            assert app.cancels[0].reason == "timeout"
        await app.close()


# --- prompts ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("transport", "mode"), COMBOS)
async def test_prompts_list_and_get(tmp_path: Path, transport: str, mode: str) -> None:
    from app_client import App

    home = tmp_path / "home"
    async with running_daemon(home, call_log_flush_interval=0.05) as info:
        app = App("Desk", host="127.0.0.1", port=info.port, token=info.token)

        @app.prompt
        def review(path: str, focus: str = "bugs") -> str:
            """Review a file."""
            return f"Review {path} for {focus}."

        @app.prompt(name="show-logo", title="Show the logo")
        async def show_logo() -> list[dict[str, Any]]:
            return [{"role": "user", "content": {"type": "image", "data": PNG_B64, "mimeType": "image/png"}},
                    {"role": "assistant", "content": {"type": "resource", "resource": {
                        "uri": "desk://status", "mimeType": "text/plain", "text": "all quiet"}}}]

        @app.resource("desk://status")
        def status() -> str:
            return "all quiet"

        async with app.connected(timeout=10):
            async with connect_agent(transport, mode, info, home) as client:
                prompts = (await client.list_prompts()).prompts
                assert [(p.name, p.description) for p in prompts] == [
                    ("Desk__review", "Review a file."), ("Desk__show-logo", None)]
                assert [(a.name, bool(a.required)) for a in prompts[0].arguments or []] == [("path", True), ("focus", False)]
                got = await client.get_prompt("Desk__review", {"path": "a.py"})
                assert got.description == "Review a file."
                assert [(m.role, getattr(m.content, "text", None)) for m in got.messages] == [
                    ("user", "Review a.py for bugs.")]
                logo = await client.get_prompt("Desk__show-logo")
                assert isinstance(logo.messages[0].content, types.ImageContent)
                embedded = logo.messages[1].content
                assert isinstance(embedded, types.EmbeddedResource)
                assert str(embedded.resource.uri) == "toolbridge://Desk/desk://status"
                for name, args, words in (("Desk__review", {}, "missing path"),
                                          ("Desk__review", {"path": "a", "mode": "x"}, "unknown mode"),
                                          ("Other__review", {"path": "a"}, "unknown prompt")):
                    with pytest.raises(MCPError, match=words):
                        await client.get_prompt(name, args)
                assert (await client.list_resources()).resources  # resources and prompts side by side


@pytest.mark.parametrize(("transport", "mode"), [("stdio", "legacy"), ("http", "legacy"), ("http", "auto")])
async def test_prompts_list_changed_when_an_app_comes(tmp_path: Path, transport: str, mode: str) -> None:
    changed = trio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.PromptListChangedNotification):
            changed.set()

    async with setup(tmp_path, transport, mode, message_handler=on_message) as (info, app, client):
        assert [p.name for p in (await client.list_prompts()).prompts] == ["Notes__hello"]
        async with trio.open_nursery() as nursery:
            if mode == "legacy":
                other = await ResourceApp(info.port, info.token, "Other").start(nursery)
                with trio.fail_after(10):
                    await changed.wait()
            else:
                async with client.listen(prompts_list_changed=True) as subscription:
                    assert subscription.honored.prompts_list_changed is True
                    other = await ResourceApp(info.port, info.token, "Other").start(nursery)
                    with trio.fail_after(10):
                        async for _event in subscription:
                            break
            assert [p.name for p in (await client.list_prompts()).prompts] == ["Notes__hello", "Other__hello"]
            await other.close()


@pytest.mark.parametrize(("transport", "mode"), [("stdio", "auto"), ("http", "legacy")])
async def test_set_resources_and_prompts_at_runtime(tmp_path: Path, transport: str, mode: str) -> None:
    from app_client.protocol import SetPrompts, SetResources

    async with setup(tmp_path, transport, mode) as (info, app, client):
        directory = info.core.registry.resources
        seen = directory.version
        await app.send(SetResources(resources=[ResourceSpec("notes://new", "new")]))
        with trio.fail_after(10):
            await directory.wait_changed(seen)
        assert [str(r.uri) for r in (await client.list_resources()).resources] == ["toolbridge://Notes/notes://new"]
        assert (await client.list_resource_templates()).resource_templates == []
        with pytest.raises(MCPError, match="offers no resource"):
            await client.read_resource(README)  # no longer offered
        seen = directory.prompts_version
        await app.send(SetPrompts())
        with trio.fail_after(10):
            await directory.wait_prompts_changed(seen)
        assert (await client.list_prompts()).prompts == []
        seen = directory.version
        await app.send(SetResources())
        with trio.fail_after(10):
            await directory.wait_changed(seen)
        assert (await client.list_resources()).resources == []


# --- a read while the app reconnects (its grace period) ---------------------------------------


class ReturningApp(ResourceApp):
    """A ResourceApp with a stable instance id, so a new connection is the same instance coming back."""

    def _register(self) -> Register:
        return msgspec.structs.replace(super()._register(), instance_id="notes-1")

    async def _handle(self, message: Any) -> bool:
        if isinstance(message, PromptGet):
            await self.send(PromptResponse(message.correlation_id, messages=[
                {"role": "user", "content": {"type": "text", "text": "hello"}}]))
            return True
        return await super()._handle(message)


async def _until_waiting(info: DaemonInfo, count: int = 1) -> None:
    """Until ``count`` reads (or prompt gets) wait in the directory for an app to come back."""
    directory = info.core.registry.resources
    with trio.fail_after(10):
        while directory._back.statistics().tasks_waiting < count:
            await trio.sleep(0.01)


@pytest.mark.parametrize(("transport", "mode", "scoped"),
                         [("stdio", "legacy", False), ("http", "auto", False), ("http", "legacy", True),
                          ("stdio", "auto", True)])
async def test_a_read_waits_for_an_app_in_its_grace_period(tmp_path: Path, transport: str, mode: str,
                                                          scoped: bool) -> None:
    """A read (and a prompt get) made while the app reconnects waits and goes to the app when it
    is back, as a tool call does; before, it failed at once ("no connected app"). In the app's
    one-app scope too, by its own URI and prompt name."""
    home = tmp_path / "home"
    uri, prompt_name = ("notes://readme", "hello") if scoped else (README, "Notes__hello")
    async with running_daemon(home, reconnect_grace=30) as info, trio.open_nursery() as nursery:
        first = await ReturningApp(info.port, info.token).start(nursery)
        async with connect_agent(transport, mode, info, home, app="Notes" if scoped else None) as client:
            assert (await client.read_resource(uri)).contents
            directory = info.core.registry.resources
            seen = directory.version
            await first.close()  # no goodbye: the instance is in its grace period
            with trio.fail_after(10):
                await directory.wait_changed(seen)
            assert (await client.list_resources()).resources == []  # out of the list meanwhile
            got: list[Any] = []

            async def read() -> None:
                got.append(await client.read_resource(uri))

            async def prompt() -> None:
                got.append(await client.get_prompt(prompt_name))

            async with trio.open_nursery() as waiting:
                waiting.start_soon(read)
                waiting.start_soon(prompt)
                await _until_waiting(info, 2)
                assert got == []
                second = await ReturningApp(info.port, info.token).start(nursery)
            assert len(got) == 2
            assert second.reads and second.reads[0].uri == "notes://readme"
            await second.close()


async def test_a_read_fails_when_the_grace_period_ends_without_the_app(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with running_daemon(home, reconnect_grace=0.5) as info, trio.open_nursery() as nursery:
        app = await ReturningApp(info.port, info.token).start(nursery)
        async with connect_agent("http", "legacy", info, home) as client:
            directory = info.core.registry.resources
            seen = directory.version
            await app.close()
            with trio.fail_after(10):
                await directory.wait_changed(seen)
            with trio.fail_after(10), pytest.raises(MCPError, match="no connected app 'Notes'"):
                await client.read_resource(README)
            assert directory._away == {}
# --- what each era's answers carry -------------------------------------------------------------


class _Port:
    async def read_resource(self, uri: str, timeout: float) -> list[dict[str, Any]]:
        return [{"uri": f"toolbridge://Notes/{uri}", "text": "hello"}]

    async def get_prompt(self, name: str, arguments: dict[str, str], timeout: float) -> dict[str, Any]:
        return {"messages": []}


@pytest.mark.parametrize("modern", [False, True])
async def test_a_read_answers_as_its_era_says(tmp_path: Path, modern: bool) -> None:
    """2026-07-28: a read's result carries caching hints (SEP-2549: ttlMs, cacheScope; toolbridge
    says never cache), and an unknown resource is -32602 (SEP-2164); older eras: -32002, no hints."""
    import json

    from broker.config.settings import Settings
    from broker.daemon.broker_core import BrokerCore
    from broker.mcp.jsonrpc import parse_message
    from broker.mcp.server import McpServer
    from broker.mcp.session import open_session
    from mcp_testkit import MODERN_META, Outbox

    def rpc(payload: dict[str, Any]) -> Any:
        return parse_message(json.dumps({"jsonrpc": "2.0", **payload}))

    core = BrokerCore(Settings(home=tmp_path), "secret")
    core.registry.resources.offer("Notes", _Port(), [ResourceSpec("notes://readme", "readme")], [])
    outbox = Outbox()
    meta = {"_meta": MODERN_META} if modern else {}
    async with open_session(McpServer.of(core), transport="http", stateful=False) as session:
        if not modern:
            await session.handle(rpc({"id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}),
                                 outbox)
            await outbox.next()
        await session.handle(rpc({"id": 1, "method": "resources/read", "params": {"uri": README, **meta}}), outbox)
        result = (await outbox.next())["result"]
        assert result["contents"] == [{"uri": README, "text": "hello"}]
        assert (result.get("ttlMs"), result.get("cacheScope")) == ((0, "private") if modern else (None, None))
        unknown = "toolbridge://Notes/notes://nope"
        await session.handle(rpc({"id": 2, "method": "resources/read", "params": {"uri": unknown, **meta}}), outbox)
        error = (await outbox.next())["error"]
        assert error["code"] == (-32602 if modern else -32002) and error["data"] == {"uri": unknown}
        session.close()


async def test_modern_http_requests_leave_no_resource_listener_behind(tmp_path: Path) -> None:
    """Each 2026-07-28 HTTP request is a session of its own that listens for resourceUpdated while
    it runs: its listener goes when the request ends (it stayed until some app sent an update)."""
    from mcp_testkit import MODERN_META, http_client, mcp_url

    async with running_daemon(tmp_path / "home") as info, http_client(info) as http:
        directory = info.core.registry.resources

        async def list_resources() -> None:
            response = await http.post(
                mcp_url(info), json={"jsonrpc": "2.0", "id": 1, "method": "resources/list",
                                     "params": {"_meta": MODERN_META}},
                headers={"accept": "application/json, text/event-stream", "Mcp-Method": "resources/list",
                         "MCP-Protocol-Version": "2026-07-28"})
            assert response.status_code == 200, response.text

        await list_resources()
        before = directory.listener_count
        for _ in range(30):
            await list_resources()
        assert directory.listener_count == before
