"""Completions and log messages (wire protocol v2, section 12) end to end: apps on app_client or a
raw socket, the real daemon, the MCP SDK as the agent over stdio and HTTP, in both eras (legacy
handshake and 2026-07-28 via auto), one-app scopes, and bad input (unknown or foreign refs, bad
levels, a log flood, huge log data, an app that never answers a completion)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import msgspec
import pytest
import structlog
import trio
from mcp import Client, MCPError

from app_client import App, ToolContext
from app_client.protocol import (
    Complete,
    CompleteResponse,
    Error,
    LogMessage,
    PromptArgument,
    PromptSpec,
    Register,
    ResourceTemplateSpec,
    ToolInvocation,
    ToolResponse,
    ToolResult,
    ToolSpec,
)
from broker.daemon.run import DaemonInfo
from mcp_testkit import HTTPX_STREAM_WARNINGS, OBJECT, ScriptedApp, connect_agent, http_client, mcp_url, running_daemon
from test_mcp_http import POST_HEADERS, error_code, modern, modern_headers, post, start_session
from test_pipeline_kinds import logged_kinds

pytestmark = [pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS] + [
    pytest.mark.filterwarnings("ignore:The logging capability is deprecated:mcp.shared.exceptions.MCPDeprecationWarning"),
]

COMBOS = [("stdio", "legacy"), ("stdio", "auto"), ("http", "legacy"), ("http", "auto")]
NOTES = "toolbridge://Desk/desk://notes/{name}"


def desk_app(info: DaemonInfo, name: str = "Desk") -> App:
    """An app_client app with completions on a prompt and a template, and tools that log."""
    app = App(name, host="127.0.0.1", port=info.port, token=info.token, logs=True, max_concurrency=4)

    def frameworks(value: str, chosen: dict[str, str]) -> list[str]:
        options = {"python": ["flask", "fastapi", "django"], "rust": ["axum", "actix"]}
        return [f for f in options.get(chosen.get("language", ""), []) if f.startswith(value)]

    @app.prompt(complete={"language": ["python", "pytorch", "rust"], "framework": frameworks})
    def code_review(language: str, framework: str = "", focus: str = "") -> str:
        """Review code."""
        return f"Review this {language} code."

    async def note_names(value: str) -> list[str]:
        return [f"{value}{n:03}" for n in range(150)]

    @app.resource_template("desk://notes/{name}", complete={"name": note_names})
    def note(name: str) -> str:
        return f"# {name}"

    @app.resource("desk://status")
    def status() -> str:
        return "all quiet"

    @app.tool
    def work(ctx: ToolContext) -> str:
        """Works, and says so (sync: from a worker thread)."""
        ctx.log("debug", "warming up", logger="work")
        ctx.log("info", "step 1", logger="work")
        ctx.log("warning", {"step": 2, "of": 2}, logger="work")
        return "done"

    @app.tool
    def shout(text: str) -> str:
        """An app-wide log message (not tied to this call)."""
        app.log("notice", text, logger="bg")
        return "shouted"

    return app


class LogSink:
    """The SDK's ``logging_callback``: what arrived, and a wait for a given data."""

    def __init__(self) -> None:
        self.got: list[tuple[str, str | None, Any]] = []
        self._changed = trio.Event()

    async def __call__(self, params: types.LoggingMessageNotificationParams) -> None:
        self.got.append((params.level, params.logger, params.data))
        self._changed.set()
        self._changed = trio.Event()

    async def until(self, data: Any) -> None:
        with trio.fail_after(10):
            while not any(entry[2] == data for entry in self.got):
                await self._changed.wait()


def bag(entries: list[tuple[str, str | None, Any]]) -> list[str]:
    """Entries as a sorted list: the SDK hands each notification to the callback in a task of
    its own, so messages that arrive together may be seen in any order."""
    return sorted(json.dumps(entry) for entry in entries)


async def settle(client: Client) -> None:
    """One more round trip: every notification received before it has reached the callback."""
    await client.list_tools(cache_mode="bypass")


@asynccontextmanager
async def desk(tmp_path: Path, **settings: Any) -> AsyncIterator[tuple[DaemonInfo, App]]:
    home = tmp_path / "home"
    async with running_daemon(home, **settings) as info:
        app = desk_app(info)
        async with app.connected(timeout=10):
            yield info, app


# --- completions ----------------------------------------------------------------------------


@pytest.mark.parametrize(("transport", "mode"), COMBOS)
async def test_completions_of_prompt_arguments_and_template_variables(tmp_path: Path, transport: str,
                                                                      mode: str) -> None:
    async with desk(tmp_path) as (info, app):
        assert app.registration is not None and app.registration.protocol_version == 2
        async with connect_agent(transport, mode, info, tmp_path / "home") as client:
            capabilities = client.server_capabilities
            assert capabilities.completions is not None and capabilities.logging is not None
            review = types.PromptReference(name="Desk__code_review")
            got = (await client.complete(review, {"name": "language", "value": "py"})).completion
            assert (got.values, got.total, got.has_more) == (["python", "pytorch"], 2, False)
            # The arguments already chosen reach the app's function (context.arguments).
            got = (await client.complete(review, {"name": "framework", "value": "f"}, {"language": "python"})).completion
            assert got.values == ["flask", "fastapi"]
            # An argument the app offers no completion for: nothing to suggest (not an error).
            assert (await client.complete(review, {"name": "focus", "value": "b"})).completion.values == []
            # A template's variable: 150 suggestions, of which MCP allows 100 in one answer.
            notes = types.ResourceTemplateReference(uri=NOTES)
            got = (await client.complete(notes, {"name": "name", "value": "plan-"})).completion
            assert (len(got.values), got.values[0], got.total, got.has_more) == (100, "plan-000", 150, True)


@pytest.mark.parametrize(("transport", "mode"), [("http", "legacy"), ("stdio", "auto")])
async def test_bad_completion_refs_are_refused_before_the_app(tmp_path: Path, transport: str, mode: str) -> None:
    async with desk(tmp_path, call_log_flush_interval=0.05) as (info, app):
        async with connect_agent(transport, mode, info, tmp_path / "home") as client:
            review = types.PromptReference(name="Desk__code_review")
            refused: list[tuple[Any, dict[str, str], str]] = [
                (types.PromptReference(name="Other__code_review"), {"name": "language", "value": ""}, "unknown prompt"),
                (types.PromptReference(name="code_review"), {"name": "language", "value": ""}, "unknown prompt"),
                (review, {"name": "nope", "value": ""}, "has no argument 'nope'"),
                (review, {"name": "language", "value": "x" * 5000}, "at most 4096"),
                (types.ResourceTemplateReference(uri="desk://notes/{name}"), {"name": "name", "value": ""},
                 "start with toolbridge://"),
                (types.ResourceTemplateReference(uri="toolbridge://Other/desk://notes/{name}"),
                 {"name": "name", "value": ""}, "no resource template"),
                (types.ResourceTemplateReference(uri="toolbridge://Desk/desk://status"), {"name": "name", "value": ""},
                 "not a resource template"),
                (types.ResourceTemplateReference(uri=NOTES), {"name": "name", "value": "../../etc"}, "'..'"),
                (types.ResourceTemplateReference(uri=NOTES), {"name": "title", "value": ""}, "has no argument"),
            ]
            for ref, argument, words in refused:
                with pytest.raises(MCPError) as caught:
                    await client.complete(ref, argument)
                assert caught.value.error.code == -32602, (ref, argument)
                assert words in caught.value.error.message, (words, caught.value.error.message)
            # The session (and the app) go on.
            assert (await client.complete(review, {"name": "language", "value": "r"})).completion.values == ["rust"]
        rows = await logged_kinds(tmp_path / "home", len(refused) + 1)
        assert {tool for tool, *_ in rows} == {"completion"}
        assert [kind for _tool, kind, *_ in rows] == [
            "unknown_tool", "unknown_tool", "invalid_arguments", "invalid_arguments", "unknown_tool",
            "unknown_tool", "unknown_tool", "guard_rejected", "invalid_arguments", "ok"]


class SilentCompleter(ScriptedApp):
    """A raw app that registers completions (or not) and never answers a ``complete``."""

    def __init__(self, port: int, token: str, name: str, completions: bool) -> None:
        super().__init__(port, token, name, tools=[])
        self.completions = completions
        self.requests: list[Complete] = []

    def _register(self) -> Register:
        return Register(app_name=self.app_name, token=self.token, protocol_version=2, completions=self.completions,
                        prompts=[PromptSpec("greet", arguments=[PromptArgument("who", required=True)])],
                        resource_templates=[ResourceTemplateSpec("mail://{folder}", "folder")])

    async def _handle(self, message: Any) -> bool:
        if isinstance(message, Complete):
            self.requests.append(message)
            return True
        return False


async def test_an_app_that_never_answers_a_completion_and_one_without_completions(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with running_daemon(home, call_log_flush_interval=0.05) as info, trio.open_nursery() as nursery:
        silent = await SilentCompleter(info.port, info.token, "Silent", completions=True).start(nursery)
        plain = await SilentCompleter(info.port, info.token, "Plain", completions=False).start(nursery)
        async with connect_agent("http", "legacy", info, home) as client:
            params = types.CompleteRequestParams(
                ref=types.PromptReference(name="Silent__greet"), argument=types.CompletionArgument(name="who", value="a"),
                context=types.CompletionContext(arguments={"who": "ignored", "undeclared": "dropped"}),
                _meta={"toolbridge/timeoutMs": 200})  # type: ignore[call-arg]
            with pytest.raises(MCPError, match="timed out after 0.2 s"):
                await client.session.send_request(types.CompleteRequest(params=params), types.CompleteResult)
            await silent.until(lambda: len(silent.cancels) == 1)
            request = silent.requests[0]
            assert (request.prompt, request.argument, request.value, request.arguments) == ("greet", "who", "a", {})
            assert (silent.cancels[0].correlation_id, silent.cancels[0].reason) == (request.correlation_id, "timeout")
            # An agent that gives up (notifications/cancelled) cancels the request at the app too.
            with trio.move_on_after(0.5):
                await client.complete(types.PromptReference(name="Silent__greet"), {"name": "who", "value": "b"})
            await silent.until(lambda: len(silent.cancels) == 2)
            assert (silent.cancels[1].correlation_id, silent.cancels[1].reason) == (
                silent.requests[1].correlation_id, "cancelled")
            # An app that registered no completions is answered empty without being asked.
            for ref in (types.PromptReference(name="Plain__greet"),
                        types.ResourceTemplateReference(uri="toolbridge://Plain/mail://{folder}")):
                argument = {"name": "who" if isinstance(ref, types.PromptReference) else "folder", "value": "x"}
                empty = (await client.complete(ref, argument)).completion
                assert (empty.values, empty.has_more) == ([], False)
            assert plain.requests == []
        rows = await logged_kinds(home, 4)
        assert [(tool, kind) for tool, kind, *_ in rows] == [("completion", "timeout"), ("completion", "cancelled"),
                                                             ("completion", "ok"), ("completion", "ok")]
        await silent.close()
        await plain.close()


class OverlongCompleter(SilentCompleter):
    """Answers with more than MCP allows: 150 values, or one value of 2000 characters."""

    async def _handle(self, message: Any) -> bool:
        if not isinstance(message, Complete):
            return False
        values = [f"v{n}" for n in range(150)] if message.value == "many" else ["x" * 2000]
        await self.send(CompleteResponse(message.correlation_id, values=values))
        return True


async def test_the_broker_bounds_an_apps_completion_answer(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with running_daemon(home) as info, trio.open_nursery() as nursery:
        app = await OverlongCompleter(info.port, info.token, "Wordy", completions=True).start(nursery)
        async with connect_agent("http", "auto", info, home) as client:
            ref = types.PromptReference(name="Wordy__greet")
            many = (await client.complete(ref, {"name": "who", "value": "many"})).completion
            assert (len(many.values), many.values[-1], many.has_more, many.total) == (100, "v99", True, None)
            with pytest.raises(MCPError, match="a value over 1024 characters"):
                await client.complete(ref, {"name": "who", "value": "long"})
        await app.close()


# --- one-app scopes -------------------------------------------------------------------------


@pytest.mark.parametrize(("transport", "mode"), [("http", "legacy"), ("stdio", "legacy")])
async def test_a_scope_completes_and_hears_only_its_own_app(tmp_path: Path, transport: str, mode: str) -> None:
    home = tmp_path / "home"
    sink = LogSink()
    async with running_daemon(home) as info:
        other = desk_app(info, "Other")
        async with desk_app(info).connected(timeout=10) as app, other.connected(timeout=10):
            async with connect_agent(transport, mode, info, home, app="Desk", logging_callback=sink) as client:
                assert client.server_capabilities.completions is not None
                # The app's own names: its prompt without a prefix, its own URI template.
                own = (await client.complete(types.PromptReference(name="code_review"),
                                             {"name": "language", "value": "ru"})).completion
                assert own.values == ["rust"]
                notes = (await client.complete(types.ResourceTemplateReference(uri="desk://notes/{name}"),
                                               {"name": "name", "value": "a"})).completion
                assert notes.values[0] == "a000"
                # Another app's prompt or template, by any name, is not there.
                for ref in (types.PromptReference(name="Desk__code_review"),
                            types.PromptReference(name="Other__code_review"),
                            types.ResourceTemplateReference(uri="toolbridge://Other/desk://notes/{name}")):
                    with pytest.raises(MCPError) as caught:
                        await client.complete(ref, {"name": "language", "value": ""})
                    assert caught.value.error.code == -32602
                await client.set_logging_level("debug")
                other.log("error", "from Other")  # not this scope's app: never heard here
                app.log("info", "from Desk", logger="bg")
                await sink.until("from Desk")
                app.log("info", "sentinel")
                await sink.until("sentinel")
                await settle(client)
                # Within its scope an app's logger keeps its own name (no label prefix).
                assert bag(sink.got) == bag([("info", "bg", "from Desk"), ("info", None, "sentinel")])


class RestartingDesk(ScriptedApp):
    """A raw app "Desk" (it quits without goodbye, as a crash does) whose completions answer
    with its ``tag`` and which can send app-wide log messages."""

    def __init__(self, port: int, token: str, tag: str) -> None:
        super().__init__(port, token, "Desk", tools=[])
        self.tag = tag

    def _register(self) -> Register:
        return Register(app_name="Desk", token=self.token, protocol_version=2, completions=True,
                        prompts=[PromptSpec("greet", arguments=[PromptArgument("who")])],
                        resource_templates=[ResourceTemplateSpec("mail://{folder}", "folder")])

    async def _handle(self, message: Any) -> bool:
        if isinstance(message, Complete):
            await self.send(CompleteResponse(message.correlation_id, values=[f"{self.tag}-{message.value}"]))
            return True
        return False

    async def log(self, data: str) -> None:
        await self.send(LogMessage(level="info", data=msgspec.Raw(json.dumps(data).encode())))


async def test_a_scope_completes_and_logs_through_a_restarted_copy_of_its_app(tmp_path: Path) -> None:
    """A new process of the app (Desk_2 while Desk waits out its grace) serves the scope Desk's
    completions, and its app-wide log messages reach the scope (issue 17 review)."""
    home = tmp_path / "home"
    sink = LogSink()
    async with running_daemon(home, reconnect_grace=30) as info, trio.open_nursery() as nursery:
        async with connect_agent("http", "legacy", info, home, app="Desk", logging_callback=sink) as client:
            await client.set_logging_level("info")
            old = await RestartingDesk(info.port, info.token, "old").start(nursery)
            await old.log("from old")
            await sink.until("from old")
            await old.close()  # no goodbye: its instance waits out the grace
            new = await RestartingDesk(info.port, info.token, "new").start(nursery)
            assert new.registered is not None and new.registered.app_label == "Desk_2"
            assert any(i.label == "Desk" and i.link is None for i in info.core.registry.instances())
            prompt = (await client.complete(types.PromptReference(name="greet"), {"name": "who", "value": "a"}))
            assert prompt.completion.values == ["new-a"]
            folder = (await client.complete(types.ResourceTemplateReference(uri="mail://{folder}"),
                                            {"name": "folder", "value": "in"}))
            assert folder.completion.values == ["new-in"]
            await new.log("from new")
            await sink.until("from new")
            await new.close()


# --- log messages ---------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_legacy_log_messages_follow_set_level(tmp_path: Path, transport: str) -> None:
    sink = LogSink()
    async with desk(tmp_path) as (info, app):
        async with connect_agent(transport, "legacy", info, tmp_path / "home", logging_callback=sink) as client:
            app.log("error", "before any setLevel")  # nobody asked yet: never sent
            assert (await client.call_tool("Desk__shout", {"text": "also before"})).content  # a barrier
            await client.set_logging_level("info")
            result = await client.call_tool("Desk__work")
            assert not result.is_error
            await sink.until({"step": 2, "of": 2})
            await client.call_tool("Desk__shout", {"text": "hello"})
            await sink.until("hello")
            app.log("debug", "below the level")
            app.log("info", "sentinel")
            await sink.until("sentinel")
            await settle(client)
            assert bag(sink.got) == bag([
                ("info", "Desk.work", "step 1"), ("warning", "Desk.work", {"step": 2, "of": 2}),
                ("notice", "Desk.bg", "hello"), ("info", "Desk", "sentinel")])
            # Lowering the level lets debug through; raising it holds back info.
            await client.set_logging_level("debug")
            app.log("debug", "now heard")
            await sink.until("now heard")
            await client.set_logging_level("error")
            app.log("info", "held back")
            app.log("error", "last")
            await sink.until("last")
            await settle(client)
            assert len(sink.got) == 6 and not any(entry[2] == "held back" for entry in sink.got)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_modern_log_messages_only_for_the_request_that_asked(tmp_path: Path, transport: str) -> None:
    """2026-07-28: only a request carrying io.modelcontextprotocol/logLevel gets messages, only
    those of its own call, on its own stream (never app-wide ones, never without the key)."""
    asked, silent = LogSink(), LogSink()
    home = tmp_path / "home"
    async with desk(tmp_path) as (info, app):
        async with connect_agent(transport, "auto", info, home, logging_callback=asked, log_level="info") as client, \
                connect_agent(transport, "auto", info, home, logging_callback=silent) as other:
            assert not (await client.call_tool("Desk__work")).is_error
            await asked.until({"step": 2, "of": 2})
            await settle(client)
            assert bag(asked.got) == bag([("info", "Desk.work", "step 1"),
                                          ("warning", "Desk.work", {"step": 2, "of": 2})])
            # An app-wide message (here sent from inside a call) reaches no 2026-07-28 request.
            await client.call_tool("Desk__shout", {"text": "app-wide"})
            assert not (await other.call_tool("Desk__work")).is_error
            debug = await client.call_tool("Desk__work", meta={"io.modelcontextprotocol/logLevel": "debug"})
            assert not debug.is_error
            await asked.until("warming up")
            await settle(client)
            await settle(other)
            assert len(asked.got) == 5 and not any(entry[2] == "app-wide" for entry in asked.got)
            assert silent.got == []


async def test_log_level_errors_per_era(tmp_path: Path) -> None:
    """Raw HTTP: an invalid level is -32602 in both eras; 2026-07-28 has no logging/setLevel."""
    async with running_daemon(tmp_path / "home") as info, http_client(info) as http:
        url = mcp_url(info)
        session = await start_session(http, url)
        legacy = {**POST_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        bad = await post(http, url, {"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel",
                                     "params": {"level": "verbose"}}, legacy)
        assert error_code(bad) == -32602 and "debug, info, notice" in bad.json()["error"]["message"]
        good = await post(http, url, {"jsonrpc": "2.0", "id": 3, "method": "logging/setLevel",
                                      "params": {"level": "warning"}}, legacy)
        assert good.json()["result"] == {}
        listing = modern(4, "tools/list")
        listing["params"]["_meta"] = {**listing["params"]["_meta"], "io.modelcontextprotocol/logLevel": "verbose"}
        refused = await post(http, url, listing, modern_headers("tools/list"))
        assert (refused.status_code, error_code(refused)) == (400, -32602)
        removed = await post(http, url, modern(5, "logging/setLevel", {"level": "info"}),
                             modern_headers("logging/setLevel"))
        assert (removed.status_code, error_code(removed)) == (404, -32601), removed.text


class NoisyApp(ScriptedApp):
    """A raw app for the log's bad input: floods, huge data, a bad level, a broken log mid-call."""

    def __init__(self, port: int, token: str) -> None:
        super().__init__(port, token, "Noisy", tools=[ToolSpec("step", "answers after a broken log", OBJECT)])
        self.errors: list[Error] = []

    def _register(self) -> Register:
        return Register(app_name=self.app_name, token=self.token, tools=self.tools, protocol_version=2)

    async def _handle(self, message: Any) -> bool:
        if isinstance(message, Error):
            self.errors.append(message)
            return True
        return False

    async def _answer(self, call: ToolInvocation) -> None:
        # A log with a level MCP does not have, naming this call: refused, the call goes on.
        await self.raw({"type": "log", "level": "verbose", "data": "x", "correlationId": call.correlation_id})
        await self.send(ToolResponse(call.correlation_id, ToolResult(data="stepped")))

    async def raw(self, *messages: dict[str, Any]) -> None:
        assert self._stream is not None
        async with self._send_lock:
            await self._stream.send_all(b"".join(json.dumps(m).encode() + b"\n" for m in messages))


async def test_a_log_flood_huge_data_and_bad_levels_harm_nobody(tmp_path: Path) -> None:
    home = tmp_path / "home"
    sink = LogSink()
    with structlog.testing.capture_logs() as daemon_log:
        async with running_daemon(home) as info, trio.open_nursery() as nursery:
            noisy = await NoisyApp(info.port, info.token).start(nursery)
            calm = await ScriptedApp(info.port, info.token, "Calm").start(nursery)
            # stdio: the app-wide messages and the answers share one stream, so an answer that
            # came after them is a barrier.
            async with connect_agent("stdio", "legacy", info, home, logging_callback=sink) as client:
                await client.set_logging_level("debug")
                huge = "SECRET-" + "x" * (70 * 1024)
                await noisy.raw({"type": "log", "level": "error", "data": huge})  # over 64 KiB: dropped
                await noisy.raw(*({"type": "log", "level": "info", "data": f"SECRET-{n}"} for n in range(3000)))
                # The daemon and the other app are unaffected: Calm answers at once.
                with trio.fail_after(5):
                    echoed = await client.call_tool("Calm__echo", {"text": "still here"})
                assert not echoed.is_error
                # A broken log naming a call in flight does not fail that call.
                stepped = await client.call_tool("Noisy__step")
                assert not stepped.is_error and "stepped" in str(stepped.content)
                await noisy.until(lambda: any(e.code == "invalid_message" for e in noisy.errors))
                await settle(client)
                # Bounded: the burst passed (and what the rate refilled meanwhile), the rest was
                # dropped and counted; the huge one never went out.
                hub = info.core.registry.app_logs
                forwarded = sink.got
                assert 1 <= len(forwarded) <= 1000 and hub.dropped >= 2000
                assert len(forwarded) + hub.dropped <= 3001  # (a full queue to the agent drops more)
                assert all(entry[2] != huge for entry in forwarded)
                assert {entry[1] for entry in forwarded} == {"Noisy"}
            await noisy.close()
            await calm.close()
    warnings = [entry for entry in daemon_log if entry["event"] == "app_log_dropped"]
    assert warnings and warnings[0]["reason"] == "too_large" and warnings[0]["app"] == "Noisy"
    assert "SECRET" not in repr(daemon_log)  # the data never entered the daemon's log
