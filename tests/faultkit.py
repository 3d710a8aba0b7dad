"""Helpers for the fault, security and fuzz tests: real processes and raw peers.

* :class:`ProcessApp` — ``tests/faultapp.py`` (an app built on app_client) as a subprocess;
  its stdout events are collected so a test can wait for them; :meth:`ProcessApp.kill` is
  SIGKILL on POSIX.
* :class:`DaemonProcess` — ``python -m broker serve`` as a subprocess on a given home and port.
* :class:`RawAgent` — an MCP agent over the app port's ``agentConnect`` link (what
  ``toolbridge stdio`` relays): one JSON-RPC message per line, 2026-07-28 requests (no
  handshake needed).

Every wait is bounded; nothing sleeps a fixed time where an event can be awaited instead.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

from rawapp import JsonLines

TESTS = Path(__file__).resolve().parent
FAULT_APP = TESTS / "faultapp.py"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "faultkit", "version": "1"},
}


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLBRIDGE_")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def rss_bytes(pid: int | str = "self") -> int | None:
    """Resident set size of a process (Linux ``/proc``); None elsewhere."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return None


class ProcessApp:
    """``tests/faultapp.py`` in a subprocess; ``events`` are its stdout lines, split."""

    def __init__(self, home: Path, name: str, *, instance_id: str | None = None, backoff_cap: float = 0.5,
                 log_dir: Path | None = None) -> None:
        self.home = home
        self.name = name
        self.instance_id = instance_id
        self.backoff_cap = backoff_cap
        self.log_dir = log_dir or home
        self.events: list[list[str]] = []
        self.process: trio.Process | None = None
        self._changed = trio.Event()
        self._reader_done = trio.Event()

    async def start(self, nursery: trio.Nursery, *, wait_registered: bool = True, timeout: float = 30) -> ProcessApp:
        command = [sys.executable, str(FAULT_APP), "--home", str(self.home), "--name", self.name,
                   "--backoff-cap", str(self.backoff_cap)]
        if self.instance_id is not None:
            command += ["--instance-id", self.instance_id]
        self.events = []
        self._reader_done = trio.Event()
        stderr = open(self.log_dir / f"app-{self.name}.log", "ab")  # noqa: SIM115 - handed to the child
        try:
            self.process = await trio.lowlevel.open_process(
                command, stdout=subprocess.PIPE, stderr=stderr, env=child_env()
            )
        finally:
            stderr.close()
        nursery.start_soon(self._read, self.process)
        if wait_registered:
            await self.wait_for("registered", timeout=timeout)
        return self

    async def _read(self, process: trio.Process) -> None:
        assert process.stdout is not None
        buffer = b""
        try:
            async with process.stdout:
                while True:
                    chunk = await process.stdout.receive_some(65536)
                    if not chunk:
                        return
                    buffer += chunk
                    while b"\n" in buffer:
                        line, _, buffer = buffer.partition(b"\n")
                        self.events.append(line.decode().split())
                        self._changed.set()
                        self._changed = trio.Event()
        finally:
            self._reader_done.set()
            self._changed.set()

    def seen(self, *words: str) -> list[list[str]]:
        return [e for e in self.events if e[: len(words)] == list(words)]

    async def wait_for(self, *words: str, count: int = 1, timeout: float = 30) -> list[list[str]]:
        """Wait until ``count`` events start with ``words``; return them."""
        with trio.fail_after(timeout):
            while len(self.seen(*words)) < count:
                if self._reader_done.is_set():
                    raise AssertionError(f"{self.name} exited; events: {self.events}")
                await self._changed.wait()
        return self.seen(*words)

    def kill(self) -> None:
        """SIGKILL: no goodbye, the kernel closes the socket."""
        assert self.process is not None
        self.process.kill()

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            with trio.move_on_after(10):
                await self.process.wait()
        if self.process is not None:
            with trio.move_on_after(5):
                await self._reader_done.wait()


class DaemonProcess:
    """``python -m broker serve`` on ``home``; ``port`` 0 picks one (then kept for restarts)."""

    def __init__(self, home: Path, port: int = 0, *extra: str) -> None:
        self.home = home
        self.port = port
        self.extra = extra
        self.process: subprocess.Popen[bytes] | None = None
        self.token = ""

    @property
    def log_path(self) -> Path:
        return self.home.parent / f"{self.home.name}-daemon.log"

    async def start(self, timeout: float = 30) -> DaemonProcess:
        self.home.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "broker", "serve", "--home", str(self.home), "--port", str(self.port),
                   "--log-format", "json", *self.extra]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                            env=child_env())
        with trio.fail_after(timeout):
            # Polled, not awaited: the daemon is another process; its runtime.json is its signal.
            while True:
                if self.process.poll() is not None:
                    raise AssertionError(f"daemon exited: {self.log_path.read_text()[-2000:]}")
                try:
                    runtime = json.loads((self.home / "runtime.json").read_text())
                except (OSError, ValueError):
                    runtime = {}
                if runtime.get("pid") == self.process.pid:
                    break
                await trio.sleep(0.02)
        self.port = int(runtime["port"])
        self.http_port = runtime.get("httpPort")
        self.token = (self.home / "token").read_text().strip()
        return self

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


class RawAgent:
    """An MCP agent on the ``agentConnect`` link: JSON-RPC lines over the app port."""

    _ids = itertools.count(1)

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.responses: dict[Any, dict[str, Any]] = {}
        self.duplicates: list[dict[str, Any]] = []
        self.notifications: list[dict[str, Any]] = []
        self._changed = trio.Event()
        self._lines = JsonLines(stream)
        self.closed = trio.Event()

    @classmethod
    async def connect(cls, nursery: trio.Nursery, port: int, token: str) -> RawAgent:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        agent = cls(stream)
        await stream.send_all(json.dumps({"type": "agentConnect", "token": token}).encode() + b"\n")
        hello = await agent._line()
        if hello.get("type") != "agentConnected":
            raise AssertionError(f"agentConnect refused: {hello}")
        nursery.start_soon(agent._read)
        return agent

    async def _line(self) -> dict[str, Any]:
        message = await self._lines.next(timeout=10)
        if message is None:
            raise EOFError("the daemon closed the agent link")
        return message

    async def _read(self) -> None:
        try:
            while True:
                try:
                    message = await self._line()
                except (EOFError, trio.BrokenResourceError, trio.ClosedResourceError):
                    return
                except trio.TooSlowError:
                    continue
                if "id" in message and "method" not in message:
                    if message["id"] in self.responses:
                        self.duplicates.append(message)
                    self.responses[message["id"]] = message
                else:
                    self.notifications.append(message)
                self._changed.set()
                self._changed = trio.Event()
        finally:
            self.closed.set()
            self._changed.set()

    async def send(self, message: dict[str, Any] | bytes) -> None:
        data = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        await self.stream.send_all(data)

    async def request(self, method: str, params: dict[str, Any] | None = None, request_id: Any = None) -> Any:
        """Send a 2026-07-28 request; return its id (see :meth:`response`)."""
        rid = request_id if request_id is not None else next(self._ids)
        await self.send({"jsonrpc": "2.0", "id": rid, "method": method,
                         "params": {**(params or {}), "_meta": MODERN_META}})
        return rid

    async def response(self, request_id: Any, timeout: float = 30) -> dict[str, Any]:
        with trio.fail_after(timeout):
            while request_id not in self.responses:
                if self.closed.is_set():
                    raise EOFError(f"the agent link closed before the answer to {request_id!r}")
                await self._changed.wait()
        return self.responses[request_id]

    async def call(self, name: str, arguments: dict[str, Any], timeout_ms: int | None = None,
                   timeout: float = 30) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        rid = next(self._ids)
        meta = dict(MODERN_META)
        if timeout_ms is not None:
            meta["toolbridge/timeoutMs"] = timeout_ms
        await self.send({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {**params, "_meta": meta}})
        return await self.response(rid, timeout)

    async def aclose(self) -> None:
        await trio.aclose_forcefully(self.stream)


def result_text(response: dict[str, Any]) -> str:
    result = response.get("result") or {}
    return "".join(block.get("text", "") for block in result.get("content", []))


def error_kind(response: dict[str, Any]) -> str | None:
    result = response.get("result") or {}
    if not result.get("isError"):
        return None
    kind: str | None = (result.get("_meta") or {}).get("toolbridge/errorKind")
    return kind
