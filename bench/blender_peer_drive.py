"""The timed half of bench/blender_peer.py: one Blender, both bridges, the same agent.

One Debian Blender runs under Xvfb with BOTH add-ons enabled: toolbridge's (installed with
``toolbridge integrate blender`` into a private Blender user folder, talking to a private daemon)
and blender-mcp's ``addon.py`` (enabled from a start-up script, its socket server moved to a
free port). The agent on each side is the official MCP SDK over stdio: ``toolbridge stdio`` on
ours, blender-mcp's own FastMCP server on the peer's (run from the peer's checkout with
``--peer-pythonpath`` ahead of it: the peer needs the ``mcp<2`` SDK, ours is 2.x; its telemetry
is turned off with ``DISABLE_TELEMETRY``, its Poly Haven / Hyper3D / Sketchfab stay off, as
they are by default).

The five tasks go through each bridge's own tools; where the peer has no tool for a task
(create an object, set a material) it is done the peer's way, through its
``execute_blender_code``. Rounds alternate the bridges call by call, so both see the same load.
Then the behaviours: a scene query while a long render runs, cancelling that render, and killing
the process between the agent and Blender (our daemon; the peer's MCP server).

Nothing here is a test: timings are printed, not asserted. The fixed pauses below (let a long
call get going) are a benchmark's, not a test's.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import trio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from broker.cli.integrate_blender import program_env

REPO = Path(__file__).resolve().parent.parent
Call = tuple[str, dict[str, Any]]

#: Blender's start-up script: no splash; blender-mcp's add-on enabled and its server moved to
#: the port the driver chose (it binds 9876 by default, which another Blender may hold).
STARTUP = """
import os, sys, bpy
bpy.context.preferences.view.show_splash = False
sys.path[:0] = [p for p in os.environ["BENCH_PEER_PATH"].split(os.pathsep) if p]

def enable_peer():
    bpy.ops.preferences.addon_enable(module="blender_mcp_peer")
    server = bpy.types.blendermcp_server
    server.stop()
    server.port = int(os.environ["BENCH_PEER_PORT"])
    server.start()
    return None

bpy.app.timers.register(enable_peer, first_interval=0.5)
"""

#: The peer's MCP server, started as its users start it (``blender_mcp.server:main``), but
#: writing its pid first so that the restart case can kill it.
PEER_MAIN = "import os,sys; open(sys.argv[1],'w').write(str(os.getpid())); from blender_mcp.server import main; main()"

#: The long call on the peer's side: one full-HD render on Blender's main thread, through its
#: code tool (it has no render tool); ``repeat`` renders make the peer's long call last a while.
PEER_RENDER = """
import bpy, time
scene = bpy.context.scene
scene.render.engine = "BLENDER_WORKBENCH"
scene.render.resolution_x, scene.render.resolution_y, scene.render.resolution_percentage = 1920, 1080, 100
bpy.app.driver_namespace["bench_renders"] = 0
for _ in range({repeat}):
    bpy.ops.render.render()
    bpy.app.driver_namespace["bench_renders"] += 1
print("rendered")
"""


@dataclass
class Bridge:
    """One side: how to start its agent, and each task as a tool call."""

    name: str
    scene: Call
    viewport: Call
    failing: Call
    long_call: Call
    create: Callable[[int], Call]
    material: Callable[[int], Call]
    open_agent: Callable[[], Any]

    def task(self, task: str, index: int) -> Call:
        if task == "create object":
            return self.create(index)
        if task == "set material":
            return self.material(index)
        return {"scene info": self.scene, "viewport image": self.viewport, "failing call": self.failing}[task]


@dataclass
class World:
    base: Path
    peer: Path
    peer_pythonpath: str
    blender_modules: str
    home: Path = field(init=False)
    env: dict[str, str] = field(init=False)
    peer_port: int = 0
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    display_pipe: int = -1
    log: TextIO | None = None

    def __post_init__(self) -> None:
        self.home = self.base / "home"
        self.home.mkdir(parents=True)
        (self.home / "config.toml").write_text("port = 0\nhttp_port = 0\n")
        self.env = {**program_env(), "TOOLBRIDGE_HOME": str(self.home),
                    "BLENDER_USER_SCRIPTS": str(self.base / "scripts"),
                    "BLENDER_USER_CONFIG": str(self.base / "config")}

    def toolbridge(self, *args: str) -> None:
        env = {**self.env, "PYTHONPATH": str(REPO)}
        subprocess.run([sys.executable, "-m", "broker", *args], check=True, capture_output=True, env=env, cwd=REPO)

    def start(self) -> None:
        self.log = (self.base / "processes.log").open("w")
        self.toolbridge("integrate", "blender")
        self.toolbridge("restart", "--home", str(self.home))
        peer_addon = self.base / "peer_addon"
        peer_addon.mkdir()
        shutil.copy(self.peer / "addon.py", peer_addon / "blender_mcp_peer.py")
        with socket.socket() as probe:  # a free port for the peer's socket server
            probe.bind(("127.0.0.1", 0))
            self.peer_port = probe.getsockname()[1]
        read_end, write_end = os.pipe()
        xvfb = subprocess.Popen(["Xvfb", "-displayfd", str(write_end), "-screen", "0", "1280x800x24",
                                 "-nolisten", "tcp", "-noreset"], pass_fds=(write_end,), stderr=subprocess.DEVNULL)
        os.close(write_end)
        self.processes.append(xvfb)
        self.display_pipe = read_end
        display = ":" + os.read(read_end, 64).decode().strip()
        script = self.base / "startup.py"
        script.write_text(STARTUP)
        self.processes.append(subprocess.Popen(
            ["blender", "-p", "0", "0", "1280", "800", "--python", str(script)],
            env={**self.env, "DISPLAY": display, "BENCH_PEER_PORT": str(self.peer_port),
                 "BENCH_PEER_PATH": os.pathsep.join([str(peer_addon), self.blender_modules])},
            stdout=self.log, stderr=subprocess.STDOUT))

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        if self.display_pipe >= 0:
            os.close(self.display_pipe)
        subprocess.run([sys.executable, "-m", "broker", "stop", "--home", str(self.home)], capture_output=True,
                       env={**self.env, "PYTHONPATH": str(REPO)}, cwd=REPO)
        if self.log is not None:
            self.log.close()

    def daemon_pid(self) -> int:
        return int(json.loads((self.home / "runtime.json").read_text())["pid"])

    def peer_pid(self) -> int:
        return int((self.base / "peer.pid").read_text())

    @asynccontextmanager
    async def toolbridge_agent(self) -> AsyncIterator[Client]:
        params = StdioServerParameters(command=sys.executable, args=["-m", "broker", "stdio", "--home", str(self.home)],
                                       env={"PYTHONPATH": str(REPO), "TOOLBRIDGE_HOME": str(self.home)}, cwd=str(REPO))
        async with Client(stdio_client(params, errlog=self.log or sys.stderr)) as client:
            yield client

    @asynccontextmanager
    async def peer_agent(self) -> AsyncIterator[Client]:
        params = StdioServerParameters(
            command=sys.executable, args=["-c", PEER_MAIN, str(self.base / "peer.pid")],
            env={"PYTHONPATH": os.pathsep.join([self.peer_pythonpath, str(self.peer / "src")]),
                 "BLENDER_PORT": str(self.peer_port), "DISABLE_TELEMETRY": "true", "HOME": str(self.base)})
        async with Client(stdio_client(params, errlog=self.log or sys.stderr)) as client:
            yield client


def bridges(world: World, peer_repeat: int) -> tuple[Bridge, Bridge]:
    ours = Bridge(
        "toolbridge", scene=("Blender__scene_summary", {}), viewport=("Blender__screenshot_window", {}),
        failing=("Blender__get_object", {"name": "Nope"}),
        long_call=("Blender__render_image", {"width": 1920, "height": 1080}),
        create=lambda i: ("Blender__create_primitive", {"kind": "cube", "name": f"tb{i}", "size": 0.3,
                                                         "location": [i * 0.1, 2, 0]}),
        material=lambda i: ("Blender__set_material_color", {"name": f"tb{i}", "color": [0.8, 0.1, 0.1]}),
        open_agent=world.toolbridge_agent)
    peer = Bridge(
        "blender-mcp", scene=("get_scene_info", {"user_prompt": ""}), viewport=("get_viewport_screenshot", {}),
        failing=("get_object_info", {"object_name": "Nope"}),
        long_call=("execute_blender_code", {"code": PEER_RENDER.format(repeat=peer_repeat)}),
        create=lambda i: ("execute_blender_code", {"code": (
            f"bpy.ops.mesh.primitive_cube_add(size=0.3, location=({i * 0.1}, -2, 0))\n"
            f"bpy.context.active_object.name = 'peer{i}'")}),
        material=lambda i: ("execute_blender_code", {"code": (
            f"obj = bpy.data.objects['peer{i}']\n"
            f"mat = bpy.data.materials.new('peer{i}')\nmat.use_nodes = True\n"
            "mat.node_tree.nodes['Principled BSDF'].inputs['Base Color'].default_value = (0.8, 0.1, 0.1, 1)\n"
            "mat.diffuse_color = (0.8, 0.1, 0.1, 1)\nobj.data.materials.append(mat)")}),
        open_agent=world.peer_agent)
    return ours, peer


def outcome(result: Any) -> str:
    """What the agent sees, in short: error flag, and text or image size."""
    block = result.content[0] if result.content else None
    if block is None:
        shown = "(no content)"
    elif getattr(block, "type", "") == "image":
        shown = f"image {len(block.data) * 3 // 4} bytes"
    else:
        shown = " ".join(str(getattr(block, "text", block)).split())[:160]
    return ("ERROR " if result.is_error else "") + shown


async def wait_for(client: Client, call: Call, limit: float = 120) -> float:
    """Seconds until ``call`` succeeds (polled: Blender and the bridges are other processes)."""
    start = time.perf_counter()
    with trio.fail_after(limit):
        while True:
            try:
                result = await client.call_tool(*call)
                if not result.is_error and "Error" not in outcome(result)[:40]:
                    return time.perf_counter() - start
            except Exception:  # noqa: BLE001 - not there yet, whatever the reason
                pass
            await trio.sleep(0.05)


async def timed(client: Client, call: Call) -> tuple[float, str]:
    start = time.perf_counter()
    result = await client.call_tool(*call)
    return time.perf_counter() - start, outcome(result)


async def latency(pair: tuple[Bridge, Bridge], clients: dict[str, Client], rounds: int,
                  tasks: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Each task ``rounds`` times on both bridges, alternating call by call."""
    found: dict[str, dict[str, Any]] = {b.name: {t: {"seconds": [], "seen": ""} for t in tasks} for b in pair}
    for index in range(rounds):
        for task in tasks:
            for bridge in pair:
                seconds, seen = await timed(clients[bridge.name], bridge.task(task, index))
                found[bridge.name][task]["seconds"].append(seconds)
                found[bridge.name][task]["seen"] = seen
    return found


async def busy(bridge: Bridge, client: Client, *, cancel: bool) -> dict[str, Any]:
    """Start the long render; 1.5 s in, ask for the scene (or cancel the render and then ask)."""
    marks: dict[str, Any] = {}
    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        scope = trio.CancelScope()

        async def long_call() -> None:
            with scope:
                marks["long"] = outcome(await client.call_tool(*bridge.long_call))
            marks["long_ended_s"] = round(time.perf_counter() - start, 2)
            marks.setdefault("long", "cancelled on the agent's side")

        nursery.start_soon(long_call)
        await trio.sleep(1.5)
        if cancel:
            scope.cancel()
            marks["cancelled_at_s"] = round(time.perf_counter() - start, 2)
        asked = time.perf_counter()
        marks["scene"] = outcome(await client.call_tool(*bridge.scene))[:120]
        marks["scene_asked_at_s"] = round(asked - start, 2)
        marks["scene_answered_at_s"] = round(time.perf_counter() - start, 2)
    return marks


async def restart(bridge: Bridge, world: World) -> dict[str, Any]:
    """Kill the process between agent and Blender with the agent's session open; then what the
    open session sees, and how long a fresh session takes to its first good scene call."""
    marks: dict[str, Any] = {}
    async with bridge.open_agent() as client:
        await wait_for(client, bridge.scene)
        pid = world.daemon_pid() if bridge.name == "toolbridge" else world.peer_pid()
        os.kill(pid, signal.SIGKILL)
        start = time.perf_counter()
        try:
            with trio.fail_after(60):
                marks["open_session_sees"] = outcome(await client.call_tool(*bridge.scene))[:160]
        except BaseException as error:  # noqa: BLE001 - what the agent sees is the result
            marks["open_session_sees"] = f"{type(error).__name__}: {error}"[:160]
        marks["open_session_after_s"] = round(time.perf_counter() - start, 2)
        # The same session again (toolbridge's relay reconnects, starting a daemon, on the next request).
        try:
            marks["open_session_recovers_after_s"] = round(await wait_for(client, bridge.scene, limit=15), 2)
        except BaseException as error:  # noqa: BLE001
            marks["open_session_recovers_after_s"] = None
            marks["open_session_then"] = f"{type(error).__name__}: {error}"[:160]
        if marks["open_session_recovers_after_s"] is not None:
            return marks  # the open session carried on: no new session needed
    start = time.perf_counter()
    try:
        async with bridge.open_agent() as client:
            marks["fresh_session_first_good_call_s"] = round(await wait_for(client, bridge.scene), 2)
    except BaseException as error:  # noqa: BLE001
        marks["fresh_session"] = f"{type(error).__name__}: {error}"[:160]
    marks["fresh_session_total_s"] = round(time.perf_counter() - start, 2)
    return marks


async def drive(world: World, rounds: int, tasks: tuple[str, ...], peer_repeat: int) -> dict[str, Any]:
    pair = bridges(world, peer_repeat)
    report: dict[str, Any] = {}
    async with pair[0].open_agent() as ours, pair[1].open_agent() as peer:
        clients = {pair[0].name: ours, pair[1].name: peer}
        report["ready_s"] = {b.name: round(await wait_for(clients[b.name], b.scene), 2) for b in pair}
        report["latency"] = await latency(pair, clients, rounds, tasks)
        # The same full-HD image once on each side: ours in cancellable strips, the peer's in one go.
        report["one_full_hd_render"] = {
            "toolbridge": await timed(ours, pair[0].long_call),
            "blender-mcp": await timed(peer, ("execute_blender_code", {"code": PEER_RENDER.format(repeat=1)}))}
        for bridge in pair:
            report.setdefault("busy", {})[bridge.name] = await busy(bridge, clients[bridge.name], cancel=False)
            report.setdefault("cancel", {})[bridge.name] = await busy(bridge, clients[bridge.name], cancel=True)
        report["peer_renders_done_after_cancel"] = outcome(await peer.call_tool("execute_blender_code", {
            "code": "print(bpy.app.driver_namespace.get('bench_renders'))"}))
        summary = await ours.call_tool("Blender__scene_summary", {})
        report["toolbridge_last_render"] = json.loads(summary.content[0].text).get("last_render")
    for bridge in pair:
        report.setdefault("restart", {})[bridge.name] = await restart(bridge, world)
    return report
