"""The Blender add-on, for real: Debian's Blender under Xvfb, a real daemon, the MCP SDK as the agent.

One Blender serves most tests (a module fixture: Blender's start is slow and CPU-heavy): the
add-on is installed with ``toolbridge integrate blender`` into a private Blender user folder
(``BLENDER_USER_SCRIPTS`` / ``BLENDER_USER_CONFIG``), Blender starts with its full GUI on a
private Xvfb display (Mesa's llvmpipe gives it OpenGL) — the GUI, because ``bpy.app.timers``
run only in Blender's event loop, which ``blender --background`` does not run — and the add-on
finds the daemon through ``TOOLBRIDGE_HOME``. The agent is the official MCP SDK over
``toolbridge stdio``. The tests run in file order: the last one of the shared Blender kills it.
``test_code_execution_is_opt_in_and_quitting_says_goodbye`` starts a second Blender.

Set TOOLBRIDGE_SAVE_SCREENSHOTS=1 to refresh integrations/blender/screenshot.png (README).
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

from broker.cli.integrate_blender import APP_CLIENT_DEPENDENCIES, platform_tags, program_env
from programkit import (XVFB, ProgramWorld, agent, call_cancelled_on_leaving, data, integrated, still_running,
                        toolbridge, wait_for_tool)

ROOT = Path(__file__).resolve().parent.parent
BLENDER = shutil.which("blender")
SCREENSHOT = ROOT / "integrations" / "blender" / "screenshot.png"

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="drives Debian's Blender on a virtual X display")

#: Run by Blender at start (as a user would set these up): no splash screen, the 3D view's
#: sidebar open on the toolbridge tab; and, when asked, the code tool turned on in the
#: add-on's preferences.
STARTUP = """
import os, bpy

bpy.context.preferences.view.show_splash = False  # read before the splash would open

def set_up():
    if os.environ.get("TB_TEST_ALLOW_CODE"):
        bpy.context.preferences.addons["toolbridge_blender"].preferences.allow_code_execution = True
    for window in bpy.context.window_manager.windows:
        for area in window.screen.areas:
            if area.type == "VIEW_3D":
                area.spaces[0].show_region_ui = True
    return None

bpy.app.timers.register(set_up, first_interval=0.5)
"""


class Setup(ProgramWorld):
    """The shared world (``programkit.ProgramWorld``) with Blender's user folders and Blender."""

    def __init__(self, base: Path) -> None:
        super().__init__(base, "blender", {"BLENDER_USER_SCRIPTS": str(base / "scripts"),
                                           "BLENDER_USER_CONFIG": str(base / "config")})

    @property
    def blender(self) -> subprocess.Popen[bytes] | None:
        return self.process

    def start_blender(self, **extra_env: str) -> subprocess.Popen[bytes]:
        script = self.base / "startup.py"
        script.write_text(STARTUP)
        with self.log.open("ab") as log:
            log.write(f"display {self.display}, Xvfb running: {self.xvfb is not None and self.xvfb.poll() is None}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                [BLENDER or "blender", "-p", "0", "0", "1280", "800", "--python", str(script)],
                env={**self.env, "DISPLAY": self.display, **extra_env}, stdout=log, stderr=subprocess.STDOUT)
        return self.process


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    if BLENDER is None or XVFB is None:
        pytest.fail("Blender and Xvfb are needed: `apt-get install -y blender python3-numpy xvfb` "
                    "(`python3 dev.py test` installs them)")
    setup = Setup(tmp_path_factory.mktemp("blender"))
    with integrated(setup, "installed, enabled"):
        setup.start_blender()
        yield setup


async def test_tools_describe_themselves_and_code_execution_is_off(world: Setup) -> None:
    async with agent(world.home) as client:
        tools = await wait_for_tool(client, "Blender__scene_summary", alive=still_running("Blender", world.blender))
        assert tools["Blender__scene_summary"].annotations.read_only_hint is True
        assert "required" not in tools["Blender__scene_summary"].input_schema or \
            not tools["Blender__scene_summary"].input_schema["required"]
        assert tools["Blender__list_objects"].annotations.read_only_hint is True
        assert tools["Blender__delete_object"].annotations.destructive_hint is True
        assert tools["Blender__export_scene"].annotations.destructive_hint is True
        assert "cube" in json.dumps(tools["Blender__create_primitive"].input_schema)
        assert not any("python" in name.lower() for name in tools)  # off unless the user turns it on


async def test_scene_changes_are_read_back_through_blender(world: Setup) -> None:
    async with agent(world.home) as client:
        await wait_for_tool(client, "Blender__scene_summary")
        summary = data(await client.call_tool("Blender__scene_summary", {}))
        assert summary["objects_by_type"] == {"MESH": 1, "LIGHT": 1, "CAMERA": 1}  # the default scene

        created = data(await client.call_tool(
            "Blender__create_primitive", {"kind": "monkey", "name": "Suzanne", "location": [1, 0, 1], "size": 2}))
        assert created["name"] == "Suzanne" and created["vertices"] == 507
        data(await client.call_tool("Blender__transform_object",
                                    {"name": "Suzanne", "location": [0.5, -0.5, 1.2], "rotation_degrees": [0, 0, 30]}))
        data(await client.call_tool("Blender__set_material_color", {"name": "Suzanne", "color": [0.9, 0.05, 0.05]}))
        data(await client.call_tool("Blender__select_objects", {"names": ["Suzanne", "Cube"]}))

        read = data(await client.call_tool("Blender__get_object", {"name": "Suzanne"}))
        assert read["location"] == [0.5, -0.5, 1.2] and read["rotation_degrees"] == [0.0, 0.0, 30.0]
        assert read["color"] == [0.9, 0.05, 0.05, 1.0] and read["selected"] is True
        listed = data(await client.call_tool("Blender__list_objects", {"object_type": "mesh"}))
        assert sorted(o["name"] for o in listed) == ["Cube", "Suzanne"]
        resource = await client.read_resource("toolbridge://Blender/blender://objects/Suzanne")
        assert json.loads(resource.contents[0].text)["color"] == [0.9, 0.05, 0.05, 1.0]
        outline = await client.read_resource("toolbridge://Blender/blender://scene/outline")
        assert "Suzanne" in outline.contents[0].text
        template = types.ResourceTemplateReference(uri="toolbridge://Blender/blender://objects/{name}")
        assert (await client.complete(template, {"name": "name", "value": "su"})).completion.values == ["Suzanne"]

        missing = await client.call_tool("Blender__get_object", {"name": "Nope"})
        assert missing.is_error and "objects are: Camera, Cube, Light, Suzanne" in missing.content[0].text

        glb, stl = world.base / "scene.glb", world.base / "scene.stl"
        assert data(await client.call_tool("Blender__export_scene", {"path": str(glb)}))["bytes"] > 1000
        assert glb.read_bytes()[:4] == b"glTF"
        data(await client.call_tool("Blender__export_scene", {"path": str(stl), "selected_only": True}))
        assert stl.stat().st_size > 1000
        guarded = await client.call_tool("Blender__export_scene", {"path": f"{world.base}/../escape.stl"})
        assert guarded.is_error and "path traversal" in guarded.content[0].text  # the daemon's path guard
        camera = await client.call_tool("Blender__set_material_color", {"name": "Camera", "color": [1, 0, 0]})
        assert camera.is_error and "pick a mesh" in camera.content[0].text
        # Blender itself fails (a folder it cannot write): a short app error, no traceback, and
        # Blender goes on answering.
        unwritable = await client.call_tool("Blender__export_scene", {"path": "/proc/scene.stl"})
        assert unwritable.is_error and "Traceback" not in unwritable.content[0].text, unwritable.content

        data(await client.call_tool("Blender__create_primitive", {"kind": "cube", "name": "Doomed", "size": 0.5}))
        data(await client.call_tool("Blender__delete_object", {"name": "Doomed"}))
        assert "Doomed" not in [o["name"] for o in data(await client.call_tool("Blender__list_objects", {}))]
        undone = data(await client.call_tool("Blender__undo", {}))
        assert "Doomed" in undone["objects"]  # undo brought it back
        data(await client.call_tool("Blender__delete_object", {"name": "Doomed"}))


async def test_render_reports_progress_and_is_not_blank(world: Setup) -> None:
    from PIL import Image

    async with agent(world.home) as client:
        await wait_for_tool(client, "Blender__render_image")
        seen: list[tuple[float, float | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total))

        result = await client.call_tool("Blender__render_image", {"width": 320, "height": 240},
                                        progress_callback=on_progress)
        assert not result.is_error, result.content
        picture = Image.open(io.BytesIO(base64.b64decode(result.content[0].data))).convert("RGB")
        assert picture.size == (320, 240)
        red = sum(1 for r, g, b in picture.get_flattened_data() if r > 120 and g < 60 and b < 60)
        assert red > 320 * 240 // 50, "the red monkey is not in the render"
        assert len(set(picture.get_flattened_data())) > 50  # shaded, not one flat colour
        assert seen and seen[-1] == (240, 240)  # rows rendered, of 240
        assert [done for done, _ in seen] == sorted(done for done, _ in seen) and seen[0][0] == 40

        shot = await client.call_tool("Blender__screenshot_window", {})
        assert not shot.is_error
        window = Image.open(io.BytesIO(base64.b64decode(shot.content[0].data))).convert("RGB")
        assert window.size == (1280, 800)
        if os.environ.get("TOOLBRIDGE_SAVE_SCREENSHOTS"):
            window.resize((800, 500)).quantize(colors=128).save(SCREENSHOT, optimize=True)  # small for the repo


async def test_cancelling_a_render_stops_it_between_strips(world: Setup) -> None:
    async with agent(world.home) as client:
        await wait_for_tool(client, "Blender__render_image")
        async with call_cancelled_on_leaving(client, "Blender__render_image", {"width": 1920, "height": 1080}):
            pass  # cancelled after its first strip
        # The add-on puts the render settings back in a step after the cancel: asked until then.
        summary = await summary_after_render(client)
        last = summary["last_render"]
        assert last["cancelled"] is True and last["rows_done"] < last["rows"] == 1080


async def test_during_a_render_questions_are_answered_and_changes_refused(world: Setup) -> None:
    from PIL import Image

    async with agent(world.home) as client:
        await wait_for_tool(client, "Blender__render_image")
        first_strip = trio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            first_strip.set()

        answers: dict[str, Any] = {}

        async def ask(tool: str, arguments: dict[str, Any]) -> None:
            answers[tool] = await client.call_tool(tool, arguments, progress_callback=on_progress)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, "Blender__render_image", {"width": 1920, "height": 1080})
            await first_strip.wait()
            # Both asked while the second strip renders: answered before the next strip, not
            # after the whole render (the add-on takes a few calls at once).
            async with trio.open_nursery() as questions:
                questions.start_soon(ask, "Blender__scene_summary", {})
                questions.start_soon(ask, "Blender__create_primitive", {"kind": "cube", "name": "DuringRender"})
            assert "Blender__render_image" not in answers
            during = data(answers["Blender__scene_summary"])["rendering"]
            assert during is not None and 0 < during["rows_done"] < during["rows"] == 1080, during
            refused = answers["Blender__create_primitive"]
            assert refused.is_error and "is rendering an image" in refused.content[0].text, refused.content
        rendered = answers["Blender__render_image"]
        assert not rendered.is_error, rendered.content
        # Over 1 MiB the daemon sends the image as a link (result_link_bytes) the agent reads.
        [link] = [block for block in rendered.content if isinstance(block, types.ResourceLink)]
        [contents] = (await client.read_resource(link.uri)).contents
        assert isinstance(contents, types.BlobResourceContents) and contents.mime_type == "image/png"
        picture = Image.open(io.BytesIO(base64.b64decode(contents.blob))).convert("RGB")
        assert picture.size == (1920, 1080) and len(set(picture.get_flattened_data())) > 50
        summary = await summary_after_render(client)
        assert summary["last_render"]["cancelled"] is False and summary["last_render"]["rows_done"] == 1080
        assert "DuringRender" not in [o["name"] for o in data(await client.call_tool("Blender__list_objects", {}))]


async def summary_after_render(client: Any) -> dict[str, Any]:
    """The scene summary once no render is in progress (polled: Blender is another process)."""
    with trio.fail_after(60):
        while (summary := data(await client.call_tool("Blender__scene_summary", {})))["rendering"] is not None:
            await trio.sleep(0.1)
    return summary


async def test_restarting_the_daemon_brings_the_addon_back(world: Setup) -> None:
    runtime = json.loads((world.home / "runtime.json").read_text())
    os.kill(runtime["pid"], signal.SIGKILL)  # a crash: no goodbye to anyone
    async with agent(world.home) as client:  # the relay starts a new daemon
        new_runtime = json.loads((world.home / "runtime.json").read_text())
        assert new_runtime["pid"] != runtime["pid"]
        await wait_for_tool(client, "Blender__scene_summary")  # the add-on reconnected by itself
        assert "Suzanne" in [o["name"] for o in data(await client.call_tool("Blender__list_objects", {}))]


async def test_killing_blender_mid_call_gives_app_disconnected(world: Setup) -> None:
    async with agent(world.home) as client:
        await wait_for_tool(client, "Blender__render_image")
        first_strip = trio.Event()
        outcome: list[Any] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            first_strip.set()

        async def render() -> None:
            outcome.append(await client.call_tool("Blender__render_image", {"width": 1920, "height": 1080},
                                                  progress_callback=on_progress))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(render)
            await first_strip.wait()
            assert world.blender is not None
            world.blender.kill()
        result = outcome[0]
        assert result.is_error and (result.meta or {}).get("toolbridge/errorKind") == "app_disconnected"
        world.blender.wait()


async def test_code_execution_is_opt_in_and_quitting_says_goodbye(world: Setup) -> None:
    """A second Blender, whose user turned the code tool on: it is clearly named and marked;
    quitting Blender (here through that tool) says goodbye and prints no traceback."""
    assert world.blender is not None and world.blender.poll() is not None  # the shared one is gone
    start = world.log.stat().st_size
    blender = world.start_blender(TB_TEST_ALLOW_CODE="1")
    async with agent(world.home) as client:
        # Named Blender, or Blender_2 while the killed Blender's names are still reserved (its
        # reconnect grace): found by the suffix.
        with trio.fail_after(120):
            while not (names := [t.name for t in (await client.list_tools()).tools
                                 if t.name.endswith("__run_python_UNSAFE")]):
                await trio.sleep(0.2)  # polled: Blender is another process
        code_tool = next(t for t in (await client.list_tools()).tools if t.name == names[0])
        assert code_tool.annotations.destructive_hint is True and "UNSAFE" in (code_tool.description or "")
        ran = await client.call_tool(code_tool.name, {"code": "result = len(bpy.data.objects)"})
        assert data(ran) == 3
        await client.call_tool(code_tool.name, {"code": "bpy.ops.wm.quit_blender()"})
        assert await trio.to_thread.run_sync(blender.wait) == 0
        await wait_for_tool(client, code_tool.name, present=False)  # goodbye: its tools are gone
    output = world.log.read_bytes()[start:].decode(errors="replace")
    assert "Traceback" not in output, output
    assert "Blender quit" in output


def test_integrate_remove_undoes_the_install(world: Setup) -> None:
    removed = toolbridge("integrate", "blender", "--remove", env=world.env)
    assert removed.returncode == 0 and "removed the toolbridge add-on" in removed.stdout, removed
    assert not (world.base / "scripts" / "addons" / "toolbridge_blender").exists()
    assert "not installed" in toolbridge("integrate", "--list", env=world.env).stdout
    again = toolbridge("integrate", "blender", "--remove", env=world.env)
    assert again.returncode == 0 and "was not installed" in again.stdout


def test_wheels_for_another_blender_python_are_chosen_by_its_platform() -> None:
    assert "manylinux_2_17_x86_64" in platform_tags("linux-x86_64")
    assert "manylinux2014_aarch64" in platform_tags("linux-aarch64")
    assert "macosx_11_0_arm64" in platform_tags("macosx-11.0-arm64")
    assert platform_tags("win-amd64") == ["win_amd64"]


def test_vendored_dependencies_are_app_clients() -> None:
    """`integrate` vendors exactly what app_client needs: pyproject's dependencies that
    app_client imports (a dependency added to one list and not the other fails here)."""
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {spec.split(">")[0].split("=")[0].strip() for spec in APP_CLIENT_DEPENDENCIES}
    assert set(APP_CLIENT_DEPENDENCIES) <= set(declared)
    import ast

    imported = set()
    for source in (ROOT / "app_client").rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = {name for name in imported if name not in sys.stdlib_module_names and name != "app_client"}
    assert third_party == names


def test_programs_start_with_the_systems_python_ahead_of_ours(tmp_path: Path) -> None:
    # Debian's Blender takes the first python3.X on PATH for its own: a venv's or pyenv's made its
    # Python load another build's _ssl and the add-on never started (`python3 dev.py test` puts
    # the venv first). The real run above starts Blender that way; this pins the rule itself.
    ours = tmp_path / "venv" / "bin"
    ours.mkdir(parents=True)
    (ours / "python3.11").symlink_to(sys.executable)
    env = program_env({"PATH": os.pathsep.join([str(ours), "/usr/bin", "/bin"]), "PYTHONHOME": "/x", "A": "b"})
    assert env["PATH"].split(os.pathsep) == ["/usr/bin", "/bin", str(ours)]
    assert "PYTHONHOME" not in env and env["A"] == "b"
