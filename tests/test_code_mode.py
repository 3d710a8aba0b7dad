"""Code mode end to end: real daemon, real Deno sandboxes, two app_client apps, the MCP SDK as the agent.

The agent connects with ``toolbridge stdio --code`` (a relay subprocess), finds tools with
``search_tools`` (TypeScript declarations) and runs TypeScript with ``run_code``. The security
tests each try one way out of the sandbox (or one way to hurt the daemon through it) and then
check that the daemon still runs programs and calls tools.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from app_client import App, ToolContext, ToolError
from app_client.results import image, text
from broker.codemode import SandboxUnavailable, find_deno
from broker.codemode.sandbox import DATA_HEADROOM_MB
from broker.core.calllog import CALL_LOG_FILE
from broker.config import home as home_files
from broker.daemon.run import DaemonInfo
from mcp_testkit import HTTPX_STREAM_WARNINGS, http_client, png_bytes, relay_command, relay_env, running_daemon



def _has_deno() -> bool:
    try:
        find_deno()
    except SandboxUnavailable:
        return False
    return True


pytestmark = [
    pytest.mark.skipif(not _has_deno(), reason="needs Deno: pip install 'toolbridge[code]'"),
    *(pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS),
]


class Apps:
    """Two real apps on app_client: Notes and Calc, and what their handlers saw."""

    def __init__(self, info: DaemonInfo) -> None:
        options = {"host": info.host, "port": info.port, "token": info.token, "max_concurrency": 4}
        self.notes = App("Notes", **options)
        self.calc = App("Calc", **options)
        self.waiting = trio.Event()
        self.wait_cancelled = trio.Event()
        self.note_reads = 0

        @self.notes.tool
        async def list_notes() -> dict[str, list[int]]:
            """List the ids of all notes."""
            return {"ids": [1, 2, 3, 4, 5]}

        @self.notes.tool
        async def get_note(id: int) -> dict[str, Any]:
            """Read one note: its id, title and word count."""
            self.note_reads += 1
            return {"id": id, "title": f"note {id}", "words": id * 10}

        @self.notes.tool
        async def screenshot() -> Any:
            """Take a screenshot of the notes window."""
            return [text("the window"), image(png_bytes())]

        @self.notes.tool
        async def wait_forever(ctx: ToolContext) -> None:
            """Wait until cancelled."""
            self.waiting.set()
            try:
                await trio.sleep_forever()
            finally:
                self.wait_cancelled.set()

        @self.calc.tool
        async def add(a: float, b: float) -> float:
            """Add two numbers."""
            return a + b

        @self.calc.tool
        async def divide(a: float, b: float) -> float:
            """Divide a by b."""
            if b == 0:
                raise ToolError("cannot divide by zero")
            return a / b


@asynccontextmanager
async def code_agent(
    tmp_path: Path, *, transport: str = "stdio", mode: str = "legacy", **settings: Any
) -> AsyncIterator[tuple[DaemonInfo, Apps, Client]]:
    """A daemon, the two apps, and the SDK in code mode (``toolbridge stdio --code`` or ``/mcp/code``)."""
    home = tmp_path / "home"
    async with running_daemon(home, **settings) as info:
        apps = Apps(info)
        async with apps.notes.connected(timeout=10), apps.calc.connected(timeout=10):
            if transport == "http":
                url = f"http://127.0.0.1:{info.http_port}/mcp/code"
                async with http_client(info) as http:
                    async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
                        yield info, apps, client
                return
            command = relay_command(home, "--no-start", "--code")
            params = StdioServerParameters(command=command[0], args=command[1:], env=relay_env())
            async with Client(params, mode=mode) as client:
                yield info, apps, client


async def run(client: Client, code: str, **extra: Any) -> tuple[types.CallToolResult, dict[str, Any]]:
    result = await client.call_tool("run_code", {"code": code, **extra})
    assert result.structured_content is not None
    assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
    return result, result.structured_content


async def assert_still_serving(client: Client, info: DaemonInfo) -> None:
    """The daemon runs a new program and its tool calls after whatever the last one did."""
    with trio.fail_after(20):
        result, out = await run(client, "return await apps.Calc.add({a: 1, b: 2});")
    assert not result.is_error, out
    assert out["result"] == 3
    assert len(info.core.calls) == 0  # nothing left in the correlation map


def error_of(result: types.CallToolResult, out: dict[str, Any]) -> dict[str, Any]:
    assert result.is_error, out
    assert out["ok"] is False
    return out["error"]  # type: ignore[no-any-return]


# --- the agent's view -----------------------------------------------------------------------


async def test_agent_searches_then_runs_a_typescript_program_over_two_apps(tmp_path: Path) -> None:
    async with code_agent(tmp_path) as (info, apps, client):
        assert client.instructions is not None and "run_code" in client.instructions
        listed = await client.list_tools()
        assert sorted(tool.name for tool in listed.tools) == ["run_code", "search_tools"]

        found = await client.call_tool("search_tools", {"query": "read one note word count", "limit": 3})
        assert not found.is_error
        hit = found.structured_content["tools"][0]  # type: ignore[index]
        assert hit["name"] == "Notes__get_note"
        assert "apps.Notes.getNote(args: NotesGetNoteArgs): Promise<unknown>;" in hit["typescript"]
        assert "id: number;" in hit["typescript"]
        assert hit["typescript"] in found.content[0].text  # type: ignore[union-attr]

        program = """
            interface Note { id: number; title: string; words: number }
            // The program can search too: the hit's name calls the tool.
            const [lister] = await searchTools("list the ids of all notes", 1);
            const { ids } = (await callTool(lister.name, {})) as { ids: number[] };
            let total: number = 0;
            const titles: string[] = [];
            for (const id of ids) {
              const note = (await apps.Notes.getNote({ id })) as Note;
              total += note.words;
              titles.push(note.title);
            }
            let caught = "";
            try {
              await apps.Calc.divide({ a: total, b: 0 });
            } catch (e) {
              if (e instanceof ToolError) caught = `${e.name}/${e.kind}: ${e.message}`;
            }
            const doubled = await apps.Calc.add({ a: total, b: total });
            const shot = await apps.Notes.screenshot();
            console.log("image:", shot[1]);
            return { total, doubled, caught, first: titles[0], image: shot[1] };
        """
        result, out = await run(client, program)
        assert not result.is_error, out
        assert out["ok"] is True
        value = out["result"]
        assert value["total"] == 150 and value["doubled"] == 300 and value["first"] == "note 1"
        assert value["caught"] == "ToolError/app_error: cannot divide by zero"
        # The image came back as an object, was returned as an MCP image block, and the
        # console shows a summary rather than base64.
        assert value["image"] == {"type": "image", "mimeType": "image/png", "content": 1}
        images = [block for block in result.content if isinstance(block, types.ImageContent)]
        assert len(images) == 1 and images[0].mime_type == "image/png"
        assert "ToolImage(image/png" in out["console"] and len(out["console"]) < 200
        tools = [call["tool"] for call in out["calls"]]
        assert tools == ["search_tools", "Notes__list_notes", *["Notes__get_note"] * 5, "Calc__divide", "Calc__add", "Notes__screenshot"]
        assert [call["outcome"] for call in out["calls"]].count("app_error") == 1
        assert apps.note_reads == 5

        # The call log: one run_code row, and every inner call's row points at its run.
        core = info.core
        assert core.call_log is not None
        await core.call_log.wait_written(10)  # the search is not an app call: no row
        with sqlite3.connect(info.core.settings.home / CALL_LOG_FILE) as db:
            rows = db.execute("SELECT tool, session, result, error_kind FROM calls ORDER BY id").fetchall()
        run_rows = [row for row in rows if row[0] == "run_code"]
        assert len(run_rows) == 1
        run_id = json.loads(run_rows[0][2])["data"]["run"]
        assert run_id == out["run"] and run_id.startswith(run_rows[0][1] + "/run-")
        inner = [row for row in rows if row[1] == run_id]
        assert [row[0] for row in inner] == tools[1:]
        await assert_still_serving(client, info)


async def test_typescript_errors_and_thrown_values_are_reported(tmp_path: Path) -> None:
    async with code_agent(tmp_path) as (info, apps, client):
        result, out = await run(client, "const x: number = 1;\nthrow new RangeError('too far ' + x);")
        error = error_of(result, out)
        assert (error["kind"], error["name"], error["message"]) == ("error", "RangeError", "too far 1")
        result, out = await run(client, "return apps.Calc.add({a: 'one', b: 2});")
        assert error_of(result, out)["name"] == "ToolInvalidArguments"
        result, out = await run(client, "let x = ;")
        assert error_of(result, out)["kind"] == "error"
        await assert_still_serving(client, info)


async def test_cancelling_run_code_kills_the_sandbox_and_cancels_its_calls(tmp_path: Path) -> None:
    async with code_agent(tmp_path) as (info, apps, client):
        scope = trio.CancelScope()

        async def call() -> None:
            with scope:
                await client.call_tool("run_code", {"code": "await apps.Notes.waitForever(); return 1;"})
                raise AssertionError("the run should not have finished")  # pragma: no cover

        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
                await apps.waiting.wait()
                scope.cancel()
            await apps.wait_cancelled.wait()  # the app was told: toolCancel reached the handler
        await assert_still_serving(client, info)


# --- security: the sandbox refuses, the daemon keeps serving -----------------------------------


async def test_program_cannot_read_files_or_the_token(tmp_path: Path) -> None:
    async with code_agent(tmp_path) as (info, apps, client):
        token_file = str(info.core.settings.home / home_files.TOKEN_FILE)
        program = f"""
            const attempts: Record<string, () => Promise<unknown>> = {{
              read: async () => Deno.readTextFileSync("/etc/passwd"),
              token: async () => await Deno.readTextFile({json.dumps(token_file)}),
              stat: async () => Deno.statSync("/etc/passwd"),
              importFile: async () => await import("file:///etc/passwd"),
              importAbsolute: async () => await import("/etc/passwd"),
              importToken: async () => await import({json.dumps("file://" + token_file)}, {{ with: {{ type: "json" }} }}),
              importRelative: async () => await import("../../../../etc/passwd"),
              importLocalhost: async () => await import("file://localhost/etc/passwd"),
              importUpperCase: async () => await import("FILE:///etc/passwd"),
              importNoSlashes: async () => await import("file:/etc/passwd"),
              importFromEval: async () => await eval('import("file:///etc/passwd")'),
              importInDataModule: async () => await import("data:text/javascript,export * from 'file:///etc/passwd'"),
              nodeFs: async () => (await import("node:fs")).readFileSync("/etc/passwd", "utf8"),
              fetchFile: async () => await (await fetch("file:///etc/passwd")).text(),
              listDir: async () => [...Deno.readDirSync("/")].length,
              write: async () => Deno.writeTextFileSync("/tmp/toolbridge-code-was-here", "x"),
            }};
            const out: Record<string, string> = {{}};
            for (const [name, attempt] of Object.entries(attempts)) {{
              try {{ out[name] = "READ " + String(await attempt()); }} catch (e) {{ out[name] = (e as Error).name; }}
            }}
            return out;
        """
        result, out = await run(client, program)
        assert not result.is_error, out
        assert all(not value.startswith("READ") for value in out["result"].values()), out["result"]
        assert out["result"]["read"] == out["result"]["token"] == "NotCapable"
        whole = json.dumps(out)
        assert "root:" not in whole and info.token not in whole
        await assert_still_serving(client, info)


async def test_program_cannot_read_the_environment(tmp_path: Path) -> None:
    async with code_agent(tmp_path) as (info, apps, client):
        program = """
            const out: string[] = [];
            for (const attempt of [() => Deno.env.get("HOME"), () => Deno.env.toObject(), () => Deno.hostname(), () => Deno.osUptime()]) {
              try { out.push("GOT " + JSON.stringify(attempt())); } catch (e) { out.push((e as Error).name); }
            }
            return out;
        """
        result, out = await run(client, program)
        assert out["result"] == ["NotCapable"] * 4
        await assert_still_serving(client, info)


async def test_program_cannot_open_network_connections(tmp_path: Path) -> None:
    async with code_agent(tmp_path) as (info, apps, client):
        program = f"""
            const out: Record<string, string> = {{}};
            const attempts: Record<string, () => Promise<unknown>> = {{
              httpDaemon: () => fetch("http://127.0.0.1:{info.http_port}/mcp", {{ method: "POST", body: "{{}}" }}),
              tcpAppPort: () => Deno.connect({{ hostname: "127.0.0.1", port: {info.port} }}),
              internet: () => fetch("https://example.com/"),
              websocket: async () => new WebSocket("ws://127.0.0.1:{info.http_port}/"),
              listen: async () => Deno.listen({{ port: 0 }}),
              udp: async () => Deno.listenDatagram({{ port: 0, transport: "udp" }}),
              resolve: () => Deno.resolveDns("example.com", "A"),
            }};
            for (const [name, attempt] of Object.entries(attempts)) {{
              try {{ await attempt(); out[name] = "OPEN"; }} catch (e) {{ out[name] = (e as Error).name; }}
            }}
            return out;
        """
        result, out = await run(client, program)
        assert not result.is_error, out
        assert "OPEN" not in out["result"].values(), out["result"]
        assert out["result"]["httpDaemon"] == out["result"]["tcpAppPort"] == "NotCapable"
        await assert_still_serving(client, info)


async def test_program_cannot_spawn_processes(tmp_path: Path) -> None:
    async with code_agent(tmp_path) as (info, apps, client):
        program = """
            // By absolute path (the sandbox has no PATH, so "sh" alone is not even found): its own binary.
            const out: string[] = [];
            for (const command of [Deno.execPath(), "/bin/sh"]) {
              try { await new Deno.Command(command, { args: ["--version"] }).output(); out.push("SPAWNED"); }
              catch (e) { out.push((e as Error).name); }
            }
            return out;
        """
        result, out = await run(client, program)
        assert out["result"] == ["NotCapable", "NotCapable"]
        await assert_still_serving(client, info)


async def test_program_cannot_use_ffi(tmp_path: Path) -> None:
    async with code_agent(tmp_path) as (info, apps, client):
        program = """
            const out: string[] = [];
            // deno-lint-ignore no-explicit-any
            const d = Deno as any;
            for (const attempt of [() => d.dlopen("libc.so.6", {}), () => d.dlopen("kernel32.dll", {})]) {
              try { attempt(); out.push("LOADED"); } catch (e) { out.push((e as Error).name); }
            }
            return out;
        """
        result, out = await run(client, program)
        assert "LOADED" not in out["result"], out
        await assert_still_serving(client, info)


async def test_deno_exit_ends_only_the_run(tmp_path: Path) -> None:
    async with code_agent(tmp_path) as (info, apps, client):
        result, out = await run(client, "console.log('bye'); Deno.exit(0);")
        error = error_of(result, out)
        assert error["kind"] == "exited" and "Deno.exit()" in error["message"]
        await assert_still_serving(client, info)


async def test_huge_output_is_bounded(tmp_path: Path) -> None:
    async with code_agent(tmp_path, code_max_output_bytes=10_000) as (info, apps, client):
        program = """
            const line = "x".repeat(1000);
            for (let i = 0; i < 20000; i++) console.log(line);              // 20 MB through console
            const raw = new TextEncoder().encode(JSON.stringify({ t: "log", text: line }) + "\\n");
            for (let i = 0; i < 5000; i++) Deno.stdout.writeSync(raw);       // 5 MB straight to the bridge
            const junk = new TextEncoder().encode("y".repeat(1 << 20));
            for (let i = 0; i < 8; i++) Deno.stderr.writeSync(junk);         // 8 MB of stderr
            return "done";
        """
        result, out = await run(client, program)
        assert not result.is_error, out
        assert out["result"] == "done"
        assert out["consoleTruncated"] is True
        assert len(out["console"].encode()) <= 10_000
        # One line longer than the bridge's limit ends the run instead of filling memory.
        result, out = await run(client, 'Deno.stdout.writeSync(new TextEncoder().encode("z".repeat(6 << 20))); return 1;')
        assert error_of(result, out)["kind"] == "bridge"
        await assert_still_serving(client, info)


async def test_infinite_loop_is_killed_within_the_timeout(tmp_path: Path) -> None:
    async with code_agent(tmp_path, code_timeout=1.5) as (info, apps, client):
        started = trio.current_time()
        result, out = await run(client, "while (true) {}")
        elapsed = trio.current_time() - started
        error = error_of(result, out)
        assert error["kind"] == "timeout"
        assert elapsed < 1.5 + 1.0  # the liveness promise: killed within the timeout + 1 s
        # timeoutMs lowers the limit (never raises it).
        started = trio.current_time()
        result, out = await run(client, "while (true) {}", timeoutMs=300)
        assert error_of(result, out)["kind"] == "timeout"
        assert trio.current_time() - started < 0.3 + 1.0
        await assert_still_serving(client, info)


async def test_memory_bomb_is_killed_at_the_heap_limit(tmp_path: Path) -> None:
    async with code_agent(tmp_path, code_max_heap_mb=64) as (info, apps, client):
        result, out = await run(client, "const a: number[][] = []; while (true) a.push(new Array(1e6).fill(1.5));")
        error = error_of(result, out)
        assert error["kind"] == "memory" and "64 MiB" in error["message"]
        await assert_still_serving(client, info)



@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the data limit (prlimit) is Linux's")
async def test_memory_outside_the_heap_is_capped(tmp_path: Path) -> None:
    """ArrayBuffers live outside the V8 heap: the process's data limit stops them."""
    async with code_agent(tmp_path, code_max_heap_mb=64) as (info, apps, client):
        result, out = await run(client, """
            const kept: Uint8Array[] = [];
            try {
              for (let i = 0; i < 100; i++) { const b = new Uint8Array(50 << 20); b.fill(1); kept.push(b); }
            } catch (e) { return [kept.length, (e as Error).name]; }
            return [kept.length, "no limit"];
        """)
        count, name = out["result"]
        assert name == "RangeError" and count * 50 < 64 + DATA_HEADROOM_MB
        await assert_still_serving(client, info)

async def test_flood_of_tool_calls_is_bounded(tmp_path: Path) -> None:
    async with code_agent(tmp_path, code_max_tool_calls=20) as (info, apps, client):
        program = """
            const calls = [];
            for (let i = 0; i < 100000; i++) calls.push(apps.Notes.getNote({ id: i }).catch(() => 0));
            await Promise.all(calls);
            return "all done";
        """
        result, out = await run(client, program)
        error = error_of(result, out)
        assert error["kind"] == "limit" and "20 tool calls" in error["message"]
        assert len(out["calls"]) <= 20 and apps.note_reads <= 20
        await assert_still_serving(client, info)


async def test_program_can_only_call_app_tools(tmp_path: Path) -> None:
    """Inside the sandbox only app tools exist (and searchTools): not run_code (no nested
    sandboxes), not call_tool, not a name no app offers; each is ToolNotFound, never an app call."""
    async with code_agent(tmp_path) as (info, apps, client):
        program = """
            const out: string[] = [];
            for (const name of ["run_code", "call_tool", "Nobody__nothing", "Notes__"]) {
              try { await callTool(name, { code: "return 1" }); out.push("CALLED"); }
              catch (e) { out.push((e as Error).name); }
            }
            try { await apps.Mail.send({ to: "x" }); } catch (e) { out.push((e as Error).name); }
            try { await callTool("Calc__add", [1, 2] as unknown as object); } catch (e) { out.push((e as Error).name); }
            return out;
        """
        result, out = await run(client, program)
        assert not result.is_error, out
        assert out["result"] == ["ToolNotFound"] * 5 + ["ToolInvalidArguments"]
        await assert_still_serving(client, info)


@pytest.mark.parametrize(
    "forged",
    [
        '{"t":"reply","id":1,"ok":true,"value":"forged"}',  # a reply is not a sandbox message
        '{"t":"call","id":7,"tool":"Calc__add","args":{"a":1,"b":1}}\\n{"t":"call","id":7,"tool":"Calc__add","args":{}}',
        '{"t":"call","id":-1,"tool":"Calc__add","args":{}}',
        '{"t":"done","ok":true,"value":1}\\n{"t":"call","id":99,"tool":"Calc__add","args":{}}',
        '{"t":"log","text":"hi","extra":1}',
        "not json at all",
    ],
)
async def test_forged_bridge_messages_end_the_run(tmp_path: Path, forged: str) -> None:
    async with code_agent(tmp_path) as (info, apps, client):
        program = f"""
            Deno.stdout.writeSync(new TextEncoder().encode({json.dumps(forged)}.replaceAll("\\\\n", "\\n") + "\\n"));
            await new Promise((resolve) => setTimeout(resolve, 5000));
            return "not reached";
        """
        result, out = await run(client, program)
        if forged.startswith('{"t":"done"'):
            # A result written by hand is the program's result (it could return anything anyway);
            # the run ends there: the call written after it is never run.
            assert out["result"] == 1 and out["calls"] == []
        else:
            assert error_of(result, out)["kind"] == "bridge", out
        await assert_still_serving(client, info)



async def test_programs_running_at_once_are_bounded(tmp_path: Path) -> None:
    async with code_agent(tmp_path, code_max_concurrent_runs=1) as (info, apps, client):
        scope = trio.CancelScope()

        async def first() -> None:
            with scope:
                await client.call_tool("run_code", {"code": "await apps.Notes.waitForever();"})

        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(first)
                await apps.waiting.wait()
                second = await client.call_tool("run_code", {"code": "return 1"})
                assert second.is_error and (second.meta or {}).get("toolbridge/errorKind") == "busy"
                assert "code_max_concurrent_runs" in second.content[0].text  # type: ignore[union-attr]
                scope.cancel()
            await apps.wait_cancelled.wait()
            # The slot is free once the killed sandbox is reaped and its folder removed, a moment
            # after the app hears the cancel; the agent is told to retry, and so does this test.
            while True:
                again = await client.call_tool("run_code", {"code": "return 2"})
                if not again.is_error:
                    break
                assert (again.meta or {}).get("toolbridge/errorKind") == "busy"
                await trio.sleep(0.05)
        assert again.structured_content is not None and again.structured_content["result"] == 2
        await assert_still_serving(client, info)


def test_benchmark_smoke() -> None:
    """bench/code_mode.py at a tiny size (numbers well-formed; no timing asserted)."""
    bench = Path(__file__).resolve().parent.parent / "bench"
    completed = subprocess.run([sys.executable, str(bench / "code_mode.py"), "--items", "3", "--repeats", "1", "--json"],
                               capture_output=True, timeout=120, cwd=bench.parent)
    assert completed.returncode == 0, completed.stderr.decode(errors="replace")[-3000:]
    result = json.loads(completed.stdout.decode().strip().splitlines()[-1])
    assert result["scenario"] == "code_mode" and result["items"] == 3
    for key in ("direct_ms", "code_ms", "direct_bytes", "code_bytes", "empty_run_code_ms", "deno_empty_ms"):
        assert result[key] > 0, key


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_code_mode_over_http(tmp_path: Path, mode: str) -> None:
    """``/mcp/code``: the same two tools, in both protocol eras; cancelling works there too."""
    async with code_agent(tmp_path, transport="http", mode=mode) as (info, apps, client):
        listed = await client.list_tools()
        assert sorted(tool.name for tool in listed.tools) == ["run_code", "search_tools"]
        found = await client.call_tool("search_tools", {"query": "divide a by b", "limit": 3})
        assert "apps.Calc.divide(args: CalcDivideArgs)" in found.content[0].text  # type: ignore[union-attr]
        result, out = await run(client, """
            const note = (await apps.Notes.getNote({ id: 4 })) as { words: number };
            return await apps.Calc.divide({ a: note.words, b: 8 });
        """)
        assert not result.is_error and out["result"] == 5
        scope = trio.CancelScope()

        async def call() -> None:
            with scope:
                await client.call_tool("run_code", {"code": "await apps.Notes.waitForever();"})

        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
                await apps.waiting.wait()
                scope.cancel()
            await apps.wait_cancelled.wait()
        await assert_still_serving(client, info)


async def test_without_deno_run_code_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLBRIDGE_DENO", str(tmp_path / "no-deno-here"))
    find_deno.cache_clear()
    try:
        async with code_agent(tmp_path) as (info, apps, client):
            result = await client.call_tool("run_code", {"code": "return 1"})
            assert result.is_error and (result.meta or {}).get("toolbridge/errorKind") == "unavailable"
            assert "TOOLBRIDGE_DENO" in result.content[0].text  # type: ignore[union-attr]
            monkeypatch.delenv("TOOLBRIDGE_DENO")
            find_deno.cache_clear()
            await assert_still_serving(client, info)  # found now, without a restart
    finally:
        find_deno.cache_clear()


async def test_code_mode_keeps_no_server_alive(tmp_path: Path) -> None:
    """The per-server code-mode state must not keep its McpServer (and its caches) alive."""
    import gc
    import weakref

    from broker.mcp.code import code_mode
    from broker.mcp.server import McpServer

    async with running_daemon(tmp_path / "home") as info:
        server = McpServer.of(info.core)
        assert code_mode(server) is code_mode(server)
        ref = weakref.ref(server)
        del server
        gc.collect()
        assert ref() is None


def test_agent_config_offers_code_mode(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "broker", "agent-config", "claude-desktop", "--home", str(tmp_path / "h"), "--code"],
        capture_output=True, timeout=60, env={**relay_env(), "HOME": str(tmp_path)},
    )
    assert completed.returncode == 0, completed.stderr.decode(errors="replace")
    entry = json.loads(completed.stdout)["mcpServers"]["toolbridge"]
    assert entry["args"][-4:] == ["stdio", "--home", str((tmp_path / "h").absolute()), "--code"]
