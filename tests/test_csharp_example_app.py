"""The WinForms example (examples/csharp_notes_app, issue 29), for real: Xvfb, the daemon, the app
under Mono, and the MCP SDK over `toolbridge stdio`. The tools change the window through the
UI-thread option; the app's screenshot (a capture of the screen under Xvfb) shows the change.
"""

from __future__ import annotations

import base64
import struct
import sys
import zlib
from pathlib import Path

import mcp_types
import pytest
import trio
from mcp import Client, StdioServerParameters

from csharp_testkit import BIN, build, cs_env, mono
from mcp_testkit import relay_command, relay_env, running_daemon
from test_example_app import png_size
from agentkit import app_process

NOTES_APP = BIN / "NotesApp.exe"

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="the WinForms example's test drives a virtual X display (Linux CI)"
)


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB or RGBA, non-interlaced PNG into rows of RGB(A) bytes (what libgdiplus writes)."""
    width, height = png_size(data)
    depth, color, _, _, interlace = data[24:29]
    assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
    channels = 3 if color == 2 else 4
    at, idat = 8, b""
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        if kind == b"IDAT":
            idat += data[at + 8:at + 8 + length]
        at += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up, corner = previous[x], previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + left) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + up) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[x] = (line[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, rows


def rgb(rows: list[bytes], channels: int, x: int, y: int) -> tuple[int, int, int]:
    pixel = rows[y][x * channels:x * channels + 3]
    return pixel[0], pixel[1], pixel[2]


async def test_an_agent_changes_the_winforms_window_and_the_screenshot_shows_it(tmp_path: Path, display: str) -> None:
    build()
    home = tmp_path / "home"
    async with running_daemon(home, http_port=None):
        env = cs_env(TOOLBRIDGE_HOME=str(home), DISPLAY=display)
        async with app_process([mono(), str(NOTES_APP)], env) as (app, stdout, _):
            await stdout.wait_for("connected Notes\n")
            command = relay_command(home, "--no-start")
            async with Client(StdioServerParameters(command=command[0], args=command[1:], env=relay_env())) as agent:
                names = {tool.name for tool in (await agent.list_tools()).tools}
                assert {"Notes__type_text", "Notes__read_text", "Notes__set_color", "Notes__save", "Notes__screenshot"} <= names

                before = await agent.call_tool("Notes__screenshot", {})
                image = next(block for block in before.content if isinstance(block, mcp_types.ImageContent))
                width, height, rows = png_pixels(base64.b64decode(image.data))
                channels = len(rows[0]) // width
                assert (width, height) == (480, 200)
                assert rgb(rows, channels, 390, 85) == (255, 255, 255)  # the swatch starts white

                typed = await agent.call_tool("Notes__type_text", {"field": "title", "text": "Groceries"})
                assert typed.content[0].text == "Groceries"  # type: ignore[union-attr]
                await agent.call_tool("Notes__type_text", {"field": "body", "text": "eggs\nmilk"})
                read = await agent.call_tool("Notes__read_text", {"field": "body"})
                assert read.content[0].text == "eggs\nmilk"  # type: ignore[union-attr]
                wrong = await agent.call_tool("Notes__type_text", {"field": "footer", "text": "x"})
                assert wrong.is_error  # the enum's values are in the schema: the daemon refuses it

                painted = await agent.call_tool("Notes__set_color", {"color": "#ff0000"})
                assert not painted.is_error, painted
                bad = await agent.call_tool("Notes__set_color", {"color": "not a colour"})
                assert bad.is_error and "is not a color" in bad.content[0].text  # type: ignore[union-attr]

                seen: list[float] = []

                async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                    seen.append(progress)

                saved = await agent.call_tool("Notes__save", {}, progress_callback=on_progress)
                assert saved.content[0].text == "Saved 1 note(s); last: Groceries"  # type: ignore[union-attr]
                assert seen == [1, 2, 3]

                after = await agent.call_tool("Notes__screenshot", {})
                image = next(block for block in after.content if isinstance(block, mcp_types.ImageContent))
                width, height, rows = png_pixels(base64.b64decode(image.data))
                assert rgb(rows, channels, 390, 85) == (255, 0, 0)  # the swatch is red on the screen now
                title_row = [rgb(rows, channels, x, 20) for x in range(12, 120)]
                assert any(pixel != (255, 255, 255) for pixel in title_row)  # the title's text is drawn

                note = (await agent.read_resource("toolbridge://Notes/notes://current")).contents[0]
                assert isinstance(note, mcp_types.TextResourceContents) and note.text == "Groceries\n\neggs\nmilk"
                prompt = await agent.get_prompt("Notes__summarize", {"style": "bullets"})
                assert prompt.messages[0].content == mcp_types.TextContent(
                    type="text", text="Summarize the note 'Groceries' (bullets):\n\neggs\nmilk")
            app.terminate()  # SIGTERM: the window closes, goodbye, exit 0
            with trio.fail_after(15):
                assert await app.wait() == 0
