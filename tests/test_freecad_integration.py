"""The FreeCAD add-on, for real: Debian's FreeCAD under Xvfb, a real daemon, the MCP SDK as the agent.

The add-on is installed with ``toolbridge integrate freecad`` into a private FreeCAD user
folder (``XDG_DATA_HOME`` / ``XDG_CONFIG_HOME``); FreeCAD starts with its full GUI on a private
Xvfb display and the add-on finds the daemon through ``TOOLBRIDGE_HOME``. The agent is the
official MCP SDK over ``toolbridge stdio``. The tests run in file order and share one FreeCAD
(its start is slow) until ``test_quitting_freecad_says_goodbye_without_a_traceback`` quits it;
``test_killing_freecad_mid_call_gives_app_disconnected`` starts the second and last one.

Set TOOLBRIDGE_SAVE_SCREENSHOTS=1 to refresh integrations/freecad/screenshot.png (README).
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import types

from programkit import (XVFB, ProgramWorld, agent, call_cancelled_on_leaving, data, integrated, still_running,
                        toolbridge, wait_for_tool)

ROOT = Path(__file__).resolve().parent.parent
FREECAD = shutil.which("freecad")
SCREENSHOT = ROOT / "integrations" / "freecad" / "screenshot.png"

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="drives Debian's FreeCAD on a virtual X display")

#: Run by FreeCAD at start (a user's macro, standing in for the user): when the test creates
#: the file named by TB_TEST_QUIT_FILE, close the documents without saving and close the main
#: window, as the user quitting FreeCAD would.
STARTUP = """
import os
import FreeCAD, FreeCADGui
from PySide2 import QtCore

quit_file = os.environ["TB_TEST_QUIT_FILE"]

def poll():
    if os.path.exists(quit_file):
        timer.stop()
        for name in list(FreeCAD.listDocuments()):
            FreeCAD.closeDocument(name)
        FreeCADGui.getMainWindow().close()

timer = QtCore.QTimer()
timer.timeout.connect(poll)
timer.start(100)
"""


class Setup(ProgramWorld):
    """The shared world (``programkit.ProgramWorld``) with FreeCAD's user folders and FreeCAD."""

    def __init__(self, base: Path) -> None:
        super().__init__(base, "freecad", {"XDG_DATA_HOME": str(base / "data"), "XDG_CONFIG_HOME": str(base / "config")})
        self.quit_file = base / "quit-now"

    @property
    def freecad(self) -> subprocess.Popen[bytes] | None:
        return self.process

    def start_freecad(self) -> subprocess.Popen[bytes]:
        script = self.base / "startup.py"
        script.write_text(STARTUP)
        self.quit_file.unlink(missing_ok=True)
        with self.log.open("ab") as log:
            # QtWebEngine (FreeCAD's start page) refuses to run as root, as CI does, without this.
            self.process = subprocess.Popen(
                [FREECAD or "freecad", str(script)],
                env={**self.env, "DISPLAY": self.display, "QTWEBENGINE_DISABLE_SANDBOX": "1",
                     "TB_TEST_QUIT_FILE": str(self.quit_file)},
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        return self.process


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    if FREECAD is None or XVFB is None:
        pytest.fail("FreeCAD and Xvfb are needed: `apt-get install -y freecad xvfb` "
                    "(`python3 dev.py test` installs them)")
    setup = Setup(tmp_path_factory.mktemp("freecad"))
    with integrated(setup, "): installed;"):  # FreeCAD's line (Blender's says "installed, enabled;")
        setup.start_freecad()
        yield setup


async def test_tools_describe_themselves(world: Setup) -> None:
    async with agent(world.home) as client:
        tools = await wait_for_tool(client, "FreeCAD__document_summary", alive=still_running("FreeCAD", world.freecad))
        for read_only in ("document_summary", "list_documents", "list_objects", "get_object", "screenshot_window"):
            assert tools[f"FreeCAD__{read_only}"].annotations.read_only_hint is True, read_only
        for name in ("document_summary", "list_documents"):
            assert not tools[f"FreeCAD__{name}"].input_schema.get("required")
        for destructive in ("delete_object", "save_document", "export_shapes"):
            assert tools[f"FreeCAD__{destructive}"].annotations.destructive_hint is True, destructive
        assert tools["FreeCAD__create_solid"].annotations.read_only_hint is False
        assert "cylinder" in json.dumps(tools["FreeCAD__create_solid"].input_schema)


async def test_document_changes_are_read_back_through_freecad(world: Setup) -> None:
    async with agent(world.home) as client:
        await wait_for_tool(client, "FreeCAD__document_summary", alive=still_running("FreeCAD", world.freecad))
        missing = await client.call_tool("FreeCAD__list_objects", {})
        assert missing.is_error and "call new_document first" in missing.content[0].text
        assert data(await client.call_tool("FreeCAD__new_document", {"name": "Bracket"}))["name"] == "Bracket"

        block = data(await client.call_tool("FreeCAD__create_solid", {"kind": "box", "size": 20, "name": "Block"}))
        assert block["volume"] == 8000.0
        data(await client.call_tool("FreeCAD__create_solid", {"kind": "cylinder", "size": 8, "height": 30,
                                                               "position": [10, 10, -5], "name": "Hole"}))
        drilled = data(await client.call_tool("FreeCAD__boolean", {"operation": "cut", "base": "Block",
                                                                   "tool": "Hole", "name": "Drilled"}))
        assert drilled["inputs"] == ["Block", "Hole"] and 6994 < drilled["volume"] < 6995  # 8000 - pi*4^2*20
        data(await client.call_tool("FreeCAD__set_color", {"name": "Drilled", "color": [0.9, 0.1, 0.1]}))
        data(await client.call_tool("FreeCAD__set_placement", {"name": "Drilled", "position": [5, 0, 0],
                                                               "rotation_degrees": [0, 0, 30]}))

        read = data(await client.call_tool("FreeCAD__get_object", {"name": "Drilled"}))
        assert read["position"] == [5.0, 0.0, 0.0] and read["rotation_degrees"] == [0.0, 0.0, 30.0]
        assert read["color"] == [0.9, 0.1, 0.1] and read["valid"] is True
        assert data(await client.call_tool("FreeCAD__get_object", {"name": "Block"}))["visible"] is False
        listed = data(await client.call_tool("FreeCAD__list_objects", {"type_contains": "cut"}))
        assert [o["name"] for o in listed] == ["Drilled"]
        resource = await client.read_resource("toolbridge://FreeCAD/freecad://objects/Drilled")
        assert json.loads(resource.contents[0].text)["color"] == [0.9, 0.1, 0.1]
        outline = json.loads((await client.read_resource("toolbridge://FreeCAD/freecad://document/outline"))
                             .contents[0].text)
        assert [o["name"] for o in outline["objects"]] == ["Block", "Hole", "Drilled"]
        documents = await client.read_resource("toolbridge://FreeCAD/freecad://documents")
        assert json.loads(documents.contents[0].text)[0]["name"] == "Bracket"
        template = types.ResourceTemplateReference(uri="toolbridge://FreeCAD/freecad://objects/{name}")
        assert (await client.complete(template, {"name": "name", "value": "dr"})).completion.values == ["Drilled"]

        unknown = await client.call_tool("FreeCAD__get_object", {"name": "Nope"})
        assert unknown.is_error and "objects are: Block, Drilled, Hole" in unknown.content[0].text

        step, stl, saved = world.base / "part.step", world.base / "part.stl", world.base / "part.FCStd"
        exported = data(await client.call_tool("FreeCAD__export_shapes", {"path": str(step)}))
        assert exported["objects"] == ["Drilled"] and b"ISO-10303-21" in step.read_bytes()[:100]
        data(await client.call_tool("FreeCAD__export_shapes", {"path": str(stl), "names": ["Drilled"]}))
        assert stl.stat().st_size > 1000
        assert data(await client.call_tool("FreeCAD__save_document", {"path": str(saved)}))["bytes"] > 1000
        assert data(await client.call_tool("FreeCAD__document_summary", {}))["file"] == str(saved)
        guarded = await client.call_tool("FreeCAD__export_shapes", {"path": f"{world.base}/../escape.stl"})
        assert guarded.is_error and "path traversal" in guarded.content[0].text  # the daemon's path guard
        # FreeCAD itself fails (a folder it cannot write): a short app error, no traceback, and
        # FreeCAD goes on answering.
        unwritable = await client.call_tool("FreeCAD__save_document", {"path": "/proc/part.FCStd"})
        assert unwritable.is_error and "FreeCAD could not save /proc/part.FCStd: Failed to open file" in \
            unwritable.content[0].text, unwritable.content

        data(await client.call_tool("FreeCAD__create_solid", {"kind": "sphere", "name": "Doomed"}))
        data(await client.call_tool("FreeCAD__delete_object", {"name": "Doomed"}))
        names = [o["name"] for o in data(await client.call_tool("FreeCAD__list_objects", {}))]
        assert "Doomed" not in names
        assert "Doomed" in data(await client.call_tool("FreeCAD__undo", {}))["objects"]  # undo brought it back
        data(await client.call_tool("FreeCAD__delete_object", {"name": "Doomed"}))

        # The 3D view is drawn with OpenGL (llvmpipe) and reaches the screen a moment after
        # fit_all's repaint: a picture taken in that moment shows the view before it was fitted
        # (once in a clean-clone CI run). So: pictures until the fitted part shows, bounded.
        with trio.fail_after(30):
            while True:
                shot = await client.call_tool("FreeCAD__screenshot_window", {"fit_all": True})
                assert not shot.is_error, shot.content
                if check_screenshot(shot.content[0].data):
                    break
                await trio.sleep(0.5)


def check_screenshot(encoded: str) -> bool:
    """FreeCAD's whole window (checked), and whether the red part fills enough of its 3D view."""
    from PIL import Image

    window = Image.open(io.BytesIO(base64.b64decode(encoded))).convert("RGB")
    assert window.size == (1280, 800)
    red = sum(1 for r, g, b in window.get_flattened_data() if r > 150 and g < 60 and b < 60)
    if red <= 1280 * 800 // 50:
        return False
    if os.environ.get("TOOLBRIDGE_SAVE_SCREENSHOTS"):
        window.resize((800, 500)).quantize(colors=128).save(SCREENSHOT, optimize=True)  # small for the repo
    return True


async def test_a_long_call_leaves_freecad_responsive_and_a_cancel_undoes_it(world: Setup) -> None:
    """make_grid copies one solid per GUI-thread step: while it runs, FreeCAD answers another
    call (its Qt loop runs between steps: the window repaints too), and a cancel stops it and
    removes the copies made so far."""
    async with agent(world.home) as client:
        await wait_for_tool(client, "FreeCAD__make_grid", alive=still_running("FreeCAD", world.freecad))
        async with call_cancelled_on_leaving(client, "FreeCAD__make_grid",
                                             {"name": "Drilled", "columns": 100, "rows": 100}, progress_at_least=3):
            # Another call, answered while the grid is being made (its copies so far are there).
            meanwhile = data(await client.call_tool("FreeCAD__list_objects", {"type_contains": "Part::Feature"}))
            assert 3 <= len(meanwhile) < 100 * 100
            summary = data(await client.call_tool("FreeCAD__document_summary", {}))
            assert summary["last_grid"]["cancelled"] is False and summary["last_grid"]["done"] < 100 * 100
        # The cleanup runs on FreeCAD's GUI thread after the cancel; polled until it did.
        with trio.fail_after(60):
            while not (last := data(await client.call_tool("FreeCAD__document_summary", {}))["last_grid"])["cancelled"]:
                await trio.sleep(0.1)
        assert last["done"] < last["copies"] == 100 * 100
        assert data(await client.call_tool("FreeCAD__list_objects", {"type_contains": "Part::Feature"})) == []
        assert "Drilled_grid" not in [o["name"] for o in data(await client.call_tool("FreeCAD__list_objects", {}))]


async def test_restarting_the_daemon_brings_the_addon_back(world: Setup) -> None:
    runtime = json.loads((world.home / "runtime.json").read_text())
    os.kill(runtime["pid"], signal.SIGKILL)  # a crash: no goodbye to anyone
    async with agent(world.home) as client:  # the relay starts a new daemon
        new_runtime = json.loads((world.home / "runtime.json").read_text())
        assert new_runtime["pid"] != runtime["pid"]
        await wait_for_tool(client, "FreeCAD__document_summary", alive=still_running("FreeCAD", world.freecad))  # back by itself
        assert data(await client.call_tool("FreeCAD__document_summary", {}))["document"] == "Bracket"


async def test_quitting_freecad_says_goodbye_without_a_traceback(world: Setup) -> None:
    assert world.freecad is not None
    async with agent(world.home) as client:
        await wait_for_tool(client, "FreeCAD__document_summary", alive=still_running("FreeCAD", world.freecad))
        world.quit_file.touch()  # the user quits FreeCAD (see STARTUP)
        assert await trio.to_thread.run_sync(world.freecad.wait) == 0
        await wait_for_tool(client, "FreeCAD__document_summary", present=False)
    output = world.log.read_text(errors="replace")
    assert "connected to toolbridge" in output
    assert "Traceback" not in output, output
    events = [json.loads(line) for line in (world.home / "daemon.log").read_text().splitlines()
              if line.startswith("{") and '"app_disconnected"' in line]
    assert events[-1]["reason"] == "the app said goodbye", events[-1]


async def test_killing_freecad_mid_call_gives_app_disconnected(world: Setup) -> None:
    freecad = world.start_freecad()  # the second and last FreeCAD of this file
    async with agent(world.home) as client:
        await wait_for_tool(client, "FreeCAD__make_grid", alive=still_running("FreeCAD", freecad))
        data(await client.call_tool("FreeCAD__new_document", {}))
        data(await client.call_tool("FreeCAD__create_solid", {"kind": "box", "name": "Brick"}))
        started = trio.Event()
        outcome: list[Any] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            started.set()

        async def grid() -> None:
            outcome.append(await client.call_tool("FreeCAD__make_grid", {"name": "Brick", "columns": 100, "rows": 100},
                                                  progress_callback=on_progress))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(grid)
            await started.wait()
            freecad.kill()
        result = outcome[0]
        assert result.is_error and (result.meta or {}).get("toolbridge/errorKind") == "app_disconnected", result
        freecad.wait()


def test_integrate_remove_undoes_the_install(world: Setup) -> None:
    removed = toolbridge("integrate", "freecad", "--remove", env=world.env)
    assert removed.returncode == 0 and "removed the toolbridge add-on" in removed.stdout, removed
    assert not (world.base / "data" / "FreeCAD" / "Mod" / "toolbridge").exists()
    assert "freecad 0.20" in (listed := toolbridge("integrate", "--list", env=world.env).stdout), listed
    assert "): not installed;" in listed.split("freecad", 1)[1]
    again = toolbridge("integrate", "freecad", "--remove", env=world.env)
    assert again.returncode == 0 and "was not installed" in again.stdout
