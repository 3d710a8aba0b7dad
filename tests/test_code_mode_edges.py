"""Code mode at the sandbox's edges (issue 27): native code, disk, daemon memory, odd bridge lines.

Most tests here run :func:`broker.codemode.run_program` directly with real Deno and a
``call_tool`` of the test's own, so a program can hand control back to the test while its
sandbox is alive: the test then looks at the sandbox process from outside (``/proc`` on
Linux: the libraries it mapped, the files in its folder) where no program could fake it.
The end-to-end tests use the daemon, the relay and the MCP SDK as ``test_code_mode`` does.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import trio
import trio.testing

from app_client.wire import ToolResult
from broker.codemode import Limits, run_program
from broker.codemode.bridge import BridgeReader, BridgeViolation, CallMessage
from broker.codemode.sandbox import _Run
from broker.core.calllog import CALL_LOG_FILE
from broker.core.outcome import CallOutcome, OutcomeKind
from test_code_mode import _has_deno, assert_still_serving, code_agent, error_of, run

pytestmark = pytest.mark.skipif(not _has_deno(), reason="needs Deno: pip install 'toolbridge[code]'")

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="looks at the sandbox through /proc")

#: Libraries of a GPU stack: the Vulkan loader and its drivers, GL/EGL, Mesa, DRI, LLVM (lavapipe).
_GPU_LIBRARY: re.Pattern[str] = re.compile(r"vulkan|libGL|libEGL|libgbm|mesa|dri|_lvp|llvm", re.IGNORECASE)


def _sandbox_pid() -> int:
    """The one Deno process this test process started (its child), read from ``/proc``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name_end = stat.rfind(")")
        parent = int(stat[name_end + 2:].split()[1])
        if parent == os.getpid() and "deno" in stat[:name_end]:
            found.append(int(entry))
    assert len(found) == 1, found
    return found[0]


def _folder_bytes(folder: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def _worker(source: str) -> str:
    """TypeScript that runs ``source`` in a Web Worker (a fresh global scope: nothing the
    prelude removed or wrapped is missing there) and resolves to what it posts back."""
    return f"""await new Promise((resolve) => {{
        const w = new Worker("data:application/javascript," + encodeURIComponent({json.dumps(source)}), {{ type: "module" }});
        w.onmessage = (e) => {{ resolve(e.data); w.terminate(); }};
        w.onerror = (e) => {{ e.preventDefault(); resolve("worker failed: " + e.message); }};
    }})"""


def _ok(value: Any) -> CallOutcome:
    return CallOutcome(OutcomeKind.OK, result=ToolResult(data=value))


# --- item 8: WebGPU ------------------------------------------------------------------------------

_GPU_PROBE = """
    const out = {};
    try { out.adapter = String(await navigator.gpu?.requestAdapter()); } catch (e) { out.adapter = e.name; }
    try { out.device = String(await (await navigator.gpu?.requestAdapter({ forceFallbackAdapter: true }))?.requestDevice()); }
    catch (e) { out.device = e.name; }
    return out;
"""


@linux_only
async def test_webgpu_gives_no_adapter_and_loads_no_gpu_library() -> None:
    """Without any permission Deno hands out a GPU adapter (Mesa's drivers loaded into the
    sandbox, buffers outside every limit). The sandbox turns WebGPU's backends off for the
    whole process (workers included): no adapter, and no GPU library is ever mapped."""
    mapped: list[str] = []

    async def call_tool(name: str, args: Any) -> CallOutcome:
        maps = Path(f"/proc/{_sandbox_pid()}/maps").read_text()
        mapped.extend(sorted({line.split()[-1] for line in maps.splitlines() if _GPU_LIBRARY.search(line)}))
        return _ok("looked")

    probe = "(async () => {" + _GPU_PROBE + "})()"
    code = f"""
        const main = await (async () => {{ {_GPU_PROBE} }})();
        const worker = {_worker(f"self.postMessage(await {probe});")};
        await callTool("Probe__maps", {{}});
        return {{ main, worker }};
    """
    report = await run_program(code, apps={}, call_tool=call_tool, limits=Limits(timeout=60))
    assert report.error is None, report.error
    assert report.value["main"] == report.value["worker"] == {"adapter": "null", "device": "undefined"}, report.value
    assert mapped == [], mapped


# --- item 9: disk without --allow-write ----------------------------------------------------------

_STORAGE_PROBE = """
    const out = {};
    const mib = "x".repeat(1 << 20);
    try {
      const cache = await caches.open("fill");
      for (let i = 0; i < 16; i++) await cache.put(new Request("https://fill.invalid/" + i), new Response(mib));
      out.caches = "WROTE";
    } catch (e) { out.caches = e.name; }
    try {
      if (typeof localStorage === "undefined") out.localStorage = "undefined";
      else { localStorage.setItem("fill", mib); out.localStorage = "WROTE"; }
    } catch (e) { out.localStorage = e.name; }
    return out;
"""


@linux_only
async def test_storage_apis_write_nothing_to_disk() -> None:
    """The Cache API wrote without limit (297 MiB in 3.5 s) under the run's folder, and
    localStorage up to its quota, with no --allow-write: both are refused, in workers too; and
    modules the program imports are not cached on disk (60 MB for 50 imports of 200 KB)."""
    sizes: list[int] = []

    async def call_tool(name: str, args: Any) -> CallOutcome:
        folder = Path(os.readlink(f"/proc/{_sandbox_pid()}/cwd"))
        sizes.append(await trio.to_thread.run_sync(_folder_bytes, folder))
        return _ok("measured")

    probe = "(async () => {" + _STORAGE_PROBE + "})()"
    code = f"""
        const main = await (async () => {{ {_STORAGE_PROBE} }})();
        const worker = {_worker(f"self.postMessage(await {probe});")};
        // Deno caches each TypeScript module it transpiles (and its analysis) on disk: 20 of 200 KB.
        const body = "export const x: string = " + JSON.stringify("y".repeat(200000)) + ";";
        for (let i = 0; i < 20; i++) await import("data:application/typescript," + encodeURIComponent("// " + i + "\\n" + body));
        await callTool("Probe__disk", {{}});
        return {{ main, worker }};
    """
    report = await run_program(code, apps={}, call_tool=call_tool, limits=Limits(timeout=60))
    assert report.error is None, report.error
    for scope in ("main", "worker"):
        assert "WROTE" not in report.value[scope].values(), report.value
    assert sizes and sizes[0] < 2 * 1024 * 1024, sizes  # Deno's own small caches only


# --- item 10: results the program does not read ------------------------------------------------

_MIB = 1024 * 1024


async def test_unread_results_are_bounded_per_run() -> None:
    """A program starts 60 calls of 4 MiB and never reads them (its loop is busy): the daemon
    held every result (59 -> 296 MiB). Now at most ``max_unread_result_bytes`` wait per run;
    the calls past it are recorded as refused and their results dropped at once."""
    big = "r" * (4 * _MIB)

    async def call_tool(name: str, args: Any) -> CallOutcome:
        return _ok(big)

    code = """
        for (let i = 0; i < 60; i++) callTool("Big__get", {}).catch(() => 0);
        while (true) {}
    """
    limits = Limits(timeout=4, max_unread_result_bytes=10 * _MIB)
    report = await run_program(code, apps={}, call_tool=call_tool, limits=limits)
    assert report.error_kind == "timeout"
    delivered = [call for call in report.calls if call.outcome == "ok"]
    refused = [call for call in report.calls if call.outcome == "unread_limit"]
    assert len(delivered) * 4 * _MIB <= 10 * _MIB, [c.outcome for c in report.calls]
    assert len(delivered) + len(refused) == len(report.calls) and refused


async def test_a_result_over_the_unread_budget_reaches_the_program_as_a_clear_error() -> None:
    """What the program reads for a call whose result was dropped: a ToolError naming the
    setting and what to do (the replies are written to a stream nobody reads until all are in)."""
    run = _Run("", {}, lambda name, args: _answer(), Limits(max_unread_result_bytes=10 * _MIB))
    sender, receiver = trio.testing.lockstep_stream_pair()
    process = SimpleNamespace(stdin=sender)
    async with trio.open_nursery() as nursery:
        for call_id in range(1, 7):
            nursery.start_soon(run.tool_call, process, CallMessage(call_id, "Big__get", {}))
        await trio.testing.wait_all_tasks_blocked()
        assert run.unread_result_bytes <= 10 * _MIB
        replies = []
        buffer = b""
        while len(replies) < 6:
            buffer += await receiver.receive_some()
            *lines, buffer = buffer.split(b"\n")
            replies += [json.loads(line) for line in lines]
    assert run.unread_result_bytes == 0
    refused = [reply for reply in replies if not reply["ok"]]
    assert len(refused) == 4 and sum(reply["ok"] for reply in replies) == 2
    for reply in refused:
        assert reply["kind"] == "unread_limit" and reply["tool"] == "Big__get"
        assert "code_max_unread_result_bytes" in reply["message"] and "await" in reply["message"]


async def _answer() -> CallOutcome:
    return _ok("r" * (4 * _MIB))


# --- item 11: odd bridge lines, console cut by the prelude -------------------------------------


def test_a_deeply_nested_bridge_line_is_a_violation_not_a_recursion_error() -> None:
    reader = BridgeReader(4 * _MIB)
    reader.receive_data(b'{"t":"call","id":1,"tool":"A__b","args":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n")
    with pytest.raises(BridgeViolation, match="nested"):
        reader.next_message()


async def test_a_deeply_nested_bridge_line_ends_the_run_cleanly_and_is_logged(tmp_path: Path) -> None:
    """It raised RecursionError out of the run: the agent got -32603, a traceback was logged
    and the ``run_code`` row was missing. Now the run ends as a bridge violation, with its row."""
    async with code_agent(tmp_path) as (info, apps, client):
        program = """
            const deep = "[".repeat(100000) + "]".repeat(100000);
            Deno.stdout.writeSync(new TextEncoder().encode('{"t":"call","id":1,"tool":"Calc__add","args":' + deep + "}\\n"));
            await new Promise((resolve) => setTimeout(resolve, 5000));
        """
        result, out = await run(client, program)
        error = error_of(result, out)
        assert error["kind"] == "bridge" and "nested" in error["message"], error
        core = info.core
        assert core.call_log is not None
        with trio.fail_after(10):
            await core.call_log.wait_written(1)  # the run_code row (it made no call)
        with sqlite3.connect(core.settings.home / CALL_LOG_FILE) as db:
            rows = db.execute("SELECT tool, error_kind FROM calls WHERE tool = 'run_code'").fetchall()
        assert rows == [("run_code", "app_error")], rows
        await assert_still_serving(client, info)


async def test_a_run_that_fails_inside_the_daemon_still_gets_its_row(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever goes wrong while a program runs, the agent gets a tool error (not -32603) and
    the call log a ``run_code`` row."""
    import broker.mcp.code as code_module

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("something inside the daemon broke")

    async with code_agent(tmp_path) as (info, apps, client):
        monkeypatch.setattr(code_module, "run_program", broken)
        result = await client.call_tool("run_code", {"code": "return 1"})
        assert result.is_error and (result.meta or {}).get("toolbridge/errorKind") == "internal_error", result
        assert "something inside" not in result.content[0].text  # type: ignore[union-attr]
        core = info.core
        assert core.call_log is not None
        with trio.fail_after(10):
            await core.call_log.wait_written(1)  # the run_code row (it made no call)
        with sqlite3.connect(core.settings.home / CALL_LOG_FILE) as db:
            rows = db.execute("SELECT tool, error_kind FROM calls WHERE tool = 'run_code'").fetchall()
        assert rows == [("run_code", "internal_error")], rows
        monkeypatch.undo()
        await assert_still_serving(client, info)


async def test_console_truncated_is_set_when_the_prelude_cuts() -> None:
    """The prelude cuts console output at the limit itself: the daemon never saw more than
    the limit, so it did not know the output had been cut."""
    async def call_tool(name: str, args: Any) -> CallOutcome:
        raise AssertionError("no calls")

    for code in ('console.log("x".repeat(20000)); return 1;',
                 'console.log("x".repeat(9999)); console.log("more"); return 1;'):
        report = await run_program(code, apps={}, call_tool=call_tool, limits=Limits(timeout=30, max_output_bytes=10_000))
        assert report.value == 1 and report.console_truncated, (code, len(report.console))
        assert len(report.console.encode()) <= 10_000
    report = await run_program('console.log("fits"); return 1;', apps={}, call_tool=call_tool,
                               limits=Limits(timeout=30, max_output_bytes=10_000))
    assert report.console == "fits\n" and not report.console_truncated


@pytest.mark.parametrize("depth", [900, 100_000])
async def test_deeply_nested_values_from_a_program_are_clean_errors_or_results(tmp_path: Path, depth: int) -> None:
    """A program's own result, a tool call's arguments and a hand-written result line nested
    deep: each ends in a result or a clean error for the agent, and the daemon goes on."""
    async with code_agent(tmp_path) as (info, apps, client):
        deep = f'JSON.parse("[".repeat({depth}) + "]".repeat({depth}))'
        for program in (
            f"return {deep};",
            f"try {{ await apps.Calc.add({{ a: 1, b: 2, c: {deep} }}); }} catch (e) {{ return (e as Error).name; }} return 'called';",
            f'Deno.stdout.writeSync(new TextEncoder().encode(\'{{"t":"done","ok":true,"value":\' + "[".repeat({depth}) + "]".repeat({depth}) + "}}\\n")); await new Promise(() => {{}});',
        ):
            with trio.fail_after(30):  # a response the agent's SDK cannot parse is lost: it would wait for good
                result = await client.call_tool("run_code", {"code": program})
            assert result.structured_content is not None, (program, result)
            if program.startswith("return"):  # too deep for agents (ResultTooDeep), or for V8's JSON
                assert result.is_error and result.structured_content["ok"] is False, result
                if depth < 1000:
                    assert result.structured_content["error"]["name"] == "ResultTooDeep", result
        await assert_still_serving(client, info)


async def test_a_large_result_is_walked_off_the_loop(tmp_path: Path) -> None:
    """A result of 480,000 small items (under the 1 MiB of a result link) is walked for its
    depth and images in a worker thread (~0.5 s of CPU): the loop-stall watchdog sees no stall."""
    async with code_agent(tmp_path) as (info, apps, client):
        result, out = await run(client, "return new Array(480000).fill(1);")
        assert not result.is_error and len(out["result"]) == 480_000
        assert info.core.watchdog.stalls == 0, info.core.watchdog.status()
