"""toolbridge codegen: the ``tools`` admin command and the CLI against a real daemon."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import trio

from broker import cli
from broker.codegen import CodegenTool
from broker.cli.codegen_command import (
    CodegenError,
    fetch_tools_async,
    select_tools,
)
from broker.daemon.admin import admin_tools
from broker.daemon.run import DaemonInfo
from broker.cli.daemon_client import DaemonUnavailable
from rawapp import CLICK_TOOL, ECHO_TOOL, RawApp

NOTES_TOOL: dict[str, Any] = {
    "name": "class",
    "title": "Keyword tool",
    "description": "A tool named like a keyword",
    "inputSchema": {"type": "object", "properties": {"import": {"type": "string"}}, "required": ["import"]},
    "outputSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
    "annotations": {"readOnlyHint": True},
}


def home_of(daemon: DaemonInfo) -> Path:
    return Path(daemon.core.settings.home)


async def register(daemon: DaemonInfo) -> None:
    watch = await RawApp.connect(daemon.port)
    assert (await watch.register(daemon.token, "WatchTower", tools=[CLICK_TOOL, ECHO_TOOL]))["type"] == "registered"
    notes = await RawApp.connect(daemon.port)
    assert (await notes.register(daemon.token, "Notes App", tools=[NOTES_TOOL]))["type"] == "registered"


async def main_in_thread(*argv: str) -> int:
    return await trio.to_thread.run_sync(cli.main, list(argv))


async def test_admin_tools_lists_every_tool(daemon: DaemonInfo) -> None:
    assert daemon.core.admin_handlers["tools"] is admin_tools
    await register(daemon)
    rows = await fetch_tools_async(home_of(daemon))
    assert [row["name"] for row in rows] == ["Notes_App__class", "WatchTower__ClickElement", "WatchTower__Echo"]
    notes = rows[0]
    assert notes == {
        "name": "Notes_App__class",
        "app": "Notes App",
        "label": "Notes_App",
        "tool": "class",
        "description": "A tool named like a keyword",
        "title": "Keyword tool",
        "inputSchema": NOTES_TOOL["inputSchema"],
        "outputSchema": NOTES_TOOL["outputSchema"],
        "annotations": {"readOnlyHint": True},
        "exampleRequests": None,  # the tool's typical requests (none here; see test_cli_commands)
    }
    assert rows[1]["outputSchema"] is None and rows[1]["title"] is None


async def test_codegen_writes_python_and_typescript(daemon: DaemonInfo, tmp_path: Path) -> None:
    await register(daemon)
    home = str(home_of(daemon))
    py_file = tmp_path / "tools.py"
    assert await main_in_thread("codegen", "--home", home, "--lang", "python", "-o", str(py_file)) == 0
    source = py_file.read_text()
    ast.parse(source)
    assert "'WatchTower__ClickElement'" in source and "'Notes_App__class'" in source
    assert "async def class_(self, arguments: NotesAppClassArgs, /) -> NotesAppClassResult:" in source

    ts_file = tmp_path / "tools.d.ts"
    args = ("codegen", "--home", home, "--lang", "typescript", "--app", "WatchTower", "-o", str(ts_file))
    assert await main_in_thread(*args) == 0
    declarations = ts_file.read_text()
    assert "clickElement(args: WatchTowerClickElementArgs): Promise<unknown>;" in declarations
    assert "Notes_App" not in declarations  # --app kept only WatchTower


async def test_codegen_to_stdout_by_app_name(daemon: DaemonInfo, capsys: pytest.CaptureFixture[str]) -> None:
    await register(daemon)
    code = await main_in_thread("codegen", "--home", str(home_of(daemon)), "--lang", "python", "--app", "Notes App")
    assert code == 0
    out = capsys.readouterr().out
    out = out[out.index('"""Typed bindings'):]  # the daemon's log lines share stdout in this test
    ast.parse(out)
    assert "class NotesAppTools:" in out and "    Notes_App: NotesAppTools" in out
    assert "WatchTower" not in out


async def test_codegen_unknown_app_fails_with_the_connected_ones(
    daemon: DaemonInfo, capsys: pytest.CaptureFixture[str]
) -> None:
    await register(daemon)
    code = await main_in_thread("codegen", "--home", str(home_of(daemon)), "--lang", "python", "--app", "Nope")
    assert code == 1
    err = capsys.readouterr().err
    assert "no connected app 'Nope'" in err and "WatchTower" in err


async def test_unknown_admin_command_is_a_clear_error(daemon: DaemonInfo) -> None:
    from broker.cli.daemon_client import admin_request

    with pytest.raises(DaemonUnavailable, match="unknown admin command 'nonsense'"):
        await admin_request(home_of(daemon), "nonsense")


async def test_codegen_without_a_daemon(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = await main_in_thread("codegen", "--home", str(tmp_path / "nothing"), "--lang", "typescript")
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("toolbridge: ") and len(err.strip().splitlines()) == 1


def test_select_tools() -> None:
    from app_client.wire import ToolSpec

    tools = [
        CodegenTool("A__x", "A", "x", ToolSpec("x"), "Alpha"),
        CodegenTool("A_2__x", "A_2", "x", ToolSpec("x"), "Alpha"),
        CodegenTool("B__y", "B", "y", ToolSpec("y"), "Beta"),
    ]
    assert select_tools(tools, None) == tools
    assert [t.agent_name for t in select_tools(tools, ["A_2"])] == ["A_2__x"]
    assert [t.agent_name for t in select_tools(tools, ["Alpha"])] == ["A__x", "A_2__x"]
    with pytest.raises(CodegenError, match="connected: A, A_2, B"):
        select_tools(tools, ["Gamma"])
