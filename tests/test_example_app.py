"""The example Tk notes app, for real: Xvfb, the daemon, the app, and the MCP SDK over stdio.

The relay (`toolbridge stdio`) starts the daemon itself, as it does for a user whose agent
launches it first; the app is a separate process on a virtual X display.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from mcp import Client, StdioServerParameters

from mcp_testkit import relay_command, relay_env

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="the example app test drives a virtual X display (Linux CI)"
)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


async def test_drive_the_notes_app_through_stdio(tmp_path: Path, display: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("port = 0\nhttp_port = 0\n")  # never the user's default ports
    params = StdioServerParameters(command=relay_command(home)[0], args=relay_command(home)[1:], env=relay_env())
    app_process: trio.Process | None = None
    try:
        async with Client(params) as agent:
            # The relay started the daemon; now the app can find it through the home directory.
            app_process = await trio.lowlevel.open_process(
                [sys.executable, str(ROOT / "examples" / "notes_app.py"), "--home", str(home)],
                env={**os.environ, "DISPLAY": display},
            )
            with trio.fail_after(30):
                # Polled: the app is another process; the agent sees it register only by listing.
                while True:
                    names = {tool.name for tool in (await agent.list_tools()).tools}
                    if "Notes__screenshot" in names:
                        break
                    await trio.sleep(0.1)
            assert {"Notes__list_widgets", "Notes__click_button", "Notes__type_text", "Notes__read_text"} <= names

            typed = await agent.call_tool("Notes__type_text", {"field": "title", "text": "Groceries"})
            assert not typed.is_error and typed.content[0].text == "Groceries"
            await agent.call_tool("Notes__type_text", {"field": "body", "text": "eggs\nmilk"})
            read = await agent.call_tool("Notes__read_text", {"field": "body"})
            assert read.content[0].text == "eggs\nmilk"

            saved = await agent.call_tool("Notes__click_button", {"name": "save"})
            assert saved.content[0].text == "Saved 1 note(s); last: Groceries"
            widgets = await agent.call_tool("Notes__list_widgets", {})
            listed = json.loads(widgets.content[0].text)  # a list: sent as JSON text
            assert {"name": "status", "kind": "label", "text": "Saved 1 note(s); last: Groceries"} in listed
            assert {"name": "title", "kind": "field", "text": "Groceries"} in listed

            missing = await agent.call_tool("Notes__click_button", {"name": "explode"})
            assert missing.is_error and "buttons are: save, clear" in missing.content[0].text

            shot = await agent.call_tool("Notes__screenshot", {})
            assert not shot.is_error
            image = next(block for block in shot.content if block.type == "image")
            assert image.mime_type == "image/png"
            assert png_size(base64.b64decode(image.data)) == (480, 320)
    finally:
        if app_process is not None:
            app_process.kill()
            await app_process.wait()
        await _stop_daemon(home)


async def _stop_daemon(home: Path) -> None:
    """The relay started a daemon in the background: stop it like a user would."""
    import signal

    try:
        pid = json.loads((home / "runtime.json").read_text())["pid"]
    except (OSError, ValueError, KeyError):
        return
    os.kill(pid, signal.SIGTERM)
    with trio.move_on_after(10):
        # Polled: the daemon is another process, not our child (no wait()); it removes the file last.
        while (home / "runtime.json").exists():
            await trio.sleep(0.05)
