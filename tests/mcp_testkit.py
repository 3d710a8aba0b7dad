"""Helpers for the MCP front-door tests: a real daemon, a scripted app, real MCP clients.

The app speaks the wire protocol with plain trio sockets and ``app_client.wire`` (not the
app_client library), so these tests see exactly what crosses the wire.
"""

from __future__ import annotations

import base64
import json
import math
import os
import signal
import struct
import sys
import zlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import trio
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from app_client.wire import (
    Error,
    LineFramer,
    Ping,
    Pong,
    Register,
    Registered,
    ToolCancel,
    ToolInvocation,
    ToolProgress,
    ToolResponse,
    ToolResult,
    ToolSpec,
    decode_message,
    encode_message,
)
from broker.config import home as home_files
from broker.config.settings import Settings
from broker.daemon.run import DaemonInfo, run_daemon


#: Code that stops reading an httpx2 stream early (the SDK client, once the answer is in; these
#: tests, after the event they wait for) abandons httpx2's nested async generators, which trio
#: reports as ResourceWarnings when they are collected. Harmless; not what is under test.
HTTPX_STREAM_WARNINGS = [
    "ignore:Async generator 'httpx2.:ResourceWarning",
    "ignore:Async generator 'httpcore2.:ResourceWarning",
]


def png_bytes() -> bytes:
    """A real 2x2 PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    rows = b"".join(b"\x00" + bytes([200, 10 * y, 30]) * 2 for y in range(2))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


PNG_B64 = base64.b64encode(png_bytes()).decode()

OBJECT = {"type": "object"}
DEMO_TOOLS = [
    # x-mcp-header: 2026-07-28 HTTP clients mirror "text" into an Mcp-Param-Text header.
    ToolSpec("echo", "Echo the arguments back",
             {"type": "object", "properties": {"text": {"type": "string", "x-mcp-header": "Text"}}}),
    ToolSpec("text", "Return plain text", OBJECT, title="Plain text", annotations={"readOnlyHint": True}),
    ToolSpec("fail", "Always fails", OBJECT),
    ToolSpec("image", "Return a PNG", OBJECT),
    ToolSpec("slow", "Runs until cancelled", OBJECT),
    ToolSpec("progress", "Reports progress, then answers", OBJECT),
    ToolSpec("hang", "Never answers (tiny timeout)", OBJECT, timeout_ms=300),
]


class ScriptedApp:
    """A desktop app over a raw socket whose tools behave by name (see ``_answer``)."""

    def __init__(self, port: int, token: str, app_name: str = "Demo", tools: list[ToolSpec] | None = None) -> None:
        self.port = port
        self.token = token
        self.app_name = app_name
        self.tools = DEMO_TOOLS if tools is None else tools
        self.invocations: list[ToolInvocation] = []
        self.cancels: list[ToolCancel] = []
        #: The daemon's non-fatal errors (an answer to a call it had already ended: a race a test may make).
        self.errors: list[Error] = []
        self.registered: Registered | None = None
        self._changed = trio.Event()
        self._stream: trio.SocketStream | None = None
        self._send_lock = trio.Lock()
        self._scope = trio.CancelScope()
        self._closed = trio.Event()

    async def start(self, nursery: trio.Nursery) -> ScriptedApp:
        await nursery.start(self._run)
        return self

    async def until(self, predicate: Callable[[], bool], timeout: float = 10) -> None:
        with trio.fail_after(timeout):
            while not predicate():
                await self._changed.wait()

    def _touch(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def send(self, message: Any) -> None:
        assert self._stream is not None
        async with self._send_lock:
            await self._stream.send_all(encode_message(message))

    async def _run(self, *, task_status: trio.TaskStatus[None]) -> None:
        try:
            with self._scope:
                await self._serve(task_status)
        finally:
            self._closed.set()

    async def _serve(self, task_status: trio.TaskStatus[None]) -> None:
        self._stream = await trio.open_tcp_stream("127.0.0.1", self.port)
        framer = LineFramer()
        await self.send(self._register())
        started = False
        async with self._stream, trio.open_nursery() as nursery:
            while True:
                line = framer.next_line()
                if line is None:
                    data = await self._stream.receive_some(65536)
                    if not data:
                        return
                    framer.receive_data(data)
                    continue
                message = decode_message(line)
                if isinstance(message, Registered):
                    self.registered = message
                    if not started:
                        started = True
                        task_status.started()
                elif isinstance(message, Ping):
                    await self.send(Pong(id=message.id))
                elif isinstance(message, ToolInvocation):
                    self.invocations.append(message)
                    nursery.start_soon(self._answer, message)
                elif isinstance(message, ToolCancel):
                    self.cancels.append(message)
                elif isinstance(message, Error) and message.code == "unknown_correlation_id" and not message.fatal:
                    # Our answer crossed the end of its call (a cancel, a deadline, a lost link):
                    # the daemon says so and drops it (protocol.md), as a real app would hear.
                    self.errors.append(message)
                elif not await self._handle(message):
                    raise AssertionError(f"unexpected message {message!r}")
                self._touch()

    def _register(self) -> Register:
        """The first message (subclasses offer more than tools)."""
        return Register(app_name=self.app_name, token=self.token, tools=self.tools, max_concurrency=8)

    async def _handle(self, message: Any) -> bool:
        """A message the base app does not know: True if a subclass handled it."""
        return False

    async def close(self) -> None:
        """Disconnect from the daemon (like the app quitting)."""
        self._scope.cancel()
        await self._closed.wait()

    async def _answer(self, call: ToolInvocation) -> None:
        tool = call.tool
        if tool == "echo":
            result = ToolResult(data={"echo": call.parameters})
        elif tool == "text":
            result = ToolResult(data="just text")
        elif tool == "fail":
            result = ToolResult(success=False, error="the disk is full; free some space and retry")
        elif tool == "image":
            result = ToolResult(content=[{"type": "text", "text": "a screenshot"},
                                         {"type": "image", "data": PNG_B64, "mimeType": "image/png"}])
        elif tool == "progress":
            if call.progress:
                await self.send(ToolProgress(call.correlation_id, 1, 2, "step 1"))
                await self.send(ToolProgress(call.correlation_id, 2, 2, "step 2"))
            result = ToolResult(data="done")
        else:  # slow, hang: never answer
            return
        await self.send(ToolResponse(call.correlation_id, result))


@asynccontextmanager
async def running_daemon(home: Path, **settings: Any) -> AsyncIterator[DaemonInfo]:
    """The real daemon in this trio loop, on free ports (HTTP on), stopped gracefully after."""
    shutdown = trio.Event()
    options: dict[str, Any] = {"port": 0, "http_port": 0, **settings}
    async with trio.open_nursery() as nursery:
        info: DaemonInfo = await nursery.start(
            lambda task_status: run_daemon(Settings(home=home, **options), shutdown=shutdown, task_status=task_status)
        )
        try:
            yield info
        finally:
            shutdown.set()


def http_client(info: DaemonInfo, **headers: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {info.token}", **headers},
        timeout=httpx2.Timeout(30.0, read=300.0),
    )


def mcp_url(info: DaemonInfo) -> str:
    return f"http://127.0.0.1:{info.http_port}/mcp"


def relay_env(**extra: str) -> dict[str, str]:
    """What the relay subprocess needs besides what the SDK passes (HOME, PATH, ...)."""
    env = {"TOOLBRIDGE_LOG_FORMAT": "json", **extra}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


async def end_process(process: trio.Process, *, terminate: bool = True, grace: float = 10) -> None:
    """Stop a child at the end of a test: SIGTERM (unless it is to exit by itself), up to
    ``grace`` seconds to exit cleanly, then SIGKILL (reached only when a test failed)."""
    if process.returncode is None and terminate:
        process.terminate()
    with trio.move_on_after(grace):
        await process.wait()
    if process.returncode is None:  # pragma: no cover - only when a test failed
        process.kill()
        await process.wait()


async def start_daemon_task(nursery: trio.Nursery, home: Path) -> tuple[DaemonInfo, trio.CancelScope, trio.Event]:
    """A daemon that can be killed abruptly (its scope cancelled: no goodbye to anyone)."""
    scope = trio.CancelScope()
    finished = trio.Event()  # set once it has let go of the home (and its lock)

    async def run(*, task_status: trio.TaskStatus[DaemonInfo]) -> None:
        try:
            with scope:
                await run_daemon(Settings(home=home, port=0, http_port=None), task_status=task_status)
        finally:
            finished.set()

    info: DaemonInfo = await nursery.start(run)
    return info, scope, finished


async def stop_background_daemon(home: Path) -> None:
    """Clean-up: SIGTERM the daemon a relay (or `restart`) started for ``home``, and wait until
    it let go of its runtime file. Polled: that daemon is not our child (nothing to wait() on)."""
    runtime = home_files.read_runtime(home)
    if runtime is not None:
        os.kill(runtime["pid"], signal.SIGTERM)
        with trio.fail_after(10):
            while home_files.read_runtime(home) is not None:
                await trio.sleep(0.05)


async def stop_pid(pid: int) -> None:
    """Clean-up: SIGTERM a process that is not our child (a daemon a relay started) if it still
    runs, and wait until it is gone. Polled: there is nothing to wait() on."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with trio.fail_after(10):
        while alive(pid):
            await trio.sleep(0.05)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped by its new parent, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True  # no /proc here: it exists
    return stat[stat.rfind(b")") + 2:][:1] not in (b"Z", b"X")


#: A 2026-07-28 request's ``_meta`` (the era's per-request protocol version and capabilities).
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


class Outbox:
    """Collects the JSON messages a session sends; ``next()`` waits for the next one."""

    def __init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[dict[str, Any]](math.inf)

    async def send(self, data: bytes, *, final: bool = False) -> None:
        self._send.send_nowait(json.loads(data))

    def send_nowait(self, data: bytes) -> bool:
        self._send.send_nowait(json.loads(data))
        return True

    def send_final_nowait(self, data: bytes) -> bool:
        return self.send_nowait(data)

    def close(self) -> None:
        pass

    async def next(self) -> dict[str, Any]:
        with trio.fail_after(5):
            return await self._receive.receive()

    def empty(self) -> bool:
        return self._receive.statistics().current_buffer_used == 0


def relay_command(home: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "broker", "stdio", "--home", str(home), *extra]


@asynccontextmanager
async def connect_agent(
    transport: str, mode: str, info: DaemonInfo, home: Path, *, discovery: bool = False, app: str | None = None,
    **kwargs: Any
) -> AsyncIterator[Client]:
    """The SDK client over HTTP (in-process daemon) or stdio (a relay subprocess), in ``mode``;
    ``app``: in that app's one-app scope (``/mcp/apps/NAME``, ``toolbridge stdio --app NAME``)."""
    if transport == "http":
        url = mcp_url(info) + ("/discovery" if discovery else "") + (f"/apps/{app}" if app is not None else "")
        async with http_client(info) as http:
            async with Client(streamable_http_client(url, http_client=http), mode=mode, **kwargs) as client:
                yield client
    else:
        command = relay_command(home, "--no-start", *(["--discovery"] if discovery else []),
                                *(["--app", app] if app is not None else []))
        params = StdioServerParameters(command=command[0], args=command[1:], env=relay_env())
        async with Client(params, mode=mode, **kwargs) as client:
            yield client


@asynccontextmanager
async def daemon_app_agent(
    tmp_path: Path, transport: str, mode: str, *, discovery: bool = False, **kwargs: Any
) -> AsyncIterator[tuple[DaemonInfo, ScriptedApp, Client]]:
    """A daemon, the scripted Demo app, and an SDK client connected to them."""
    home = tmp_path / "home"
    async with running_daemon(home) as info, trio.open_nursery() as nursery:
        app = await ScriptedApp(info.port, info.token).start(nursery)
        async with connect_agent(transport, mode, info, home, discovery=discovery, **kwargs) as client:
            yield info, app, client
        await app.close()
