"""A load generator speaking MCP JSON-RPC lines: handshake, then pipelined ``tools/call``.

Theory of operation
-------------------
:class:`LineChannel` wraps a pair of trio byte streams (a subprocess's stdin/stdout, or a TCP
connection to the daemon after ``agentConnect``) and hands back batches of complete lines.
:class:`RpcClient` does one request at a time (for the handshake and checks);
:func:`pipelined` keeps up to ``concurrency`` ``tools/call`` requests in flight: it sends the
first window in one write, and for every batch of responses it reads it sends the same number
of new requests in one write. Latency is from the write that carried a request to the read
that returned its response. Responses are decoded only as far as the envelope (``id``,
``error``; the ``result`` stays raw bytes and is only searched for ``"isError":true``).

:func:`run_stdio_load` is one complete measurement against a stdio MCP server command:
start it, ``initialize`` (handshake era, protocol 2025-11-25), wait for the tool to be
listed, check one call's answer, warm up, measure, close stdin, wait for the process to end.

Every loop is bounded: by the number of calls, by ``max_seconds`` for issuing new calls,
and by a per-read timeout.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import trio

from _harness import cpu_seconds, latency_summary

READ_SIZE = 1 << 18
READ_TIMEOUT = 60.0
PROTOCOL_VERSION = "2025-11-25"


class Reply(msgspec.Struct):
    id: int | str | None = None
    method: str | None = None
    error: Any = None
    result: msgspec.Raw = msgspec.Raw()


_decode_reply = msgspec.json.Decoder(Reply).decode
_encode = msgspec.json.Encoder().encode


class LineChannel:
    def __init__(self, receive: trio.abc.ReceiveStream, send: trio.abc.SendStream, max_line: int = 64 << 20) -> None:
        self._receive = receive
        self._send = send
        self._buffer = bytearray()
        self._scanned = 0  # no newline in _buffer[:_scanned]
        self._max_line = max_line
        self.bytes_received = 0

    async def send(self, data: bytes) -> None:
        await self._send.send_all(data)

    def unread(self, lines: list[bytes]) -> None:
        """Put lines back: the next :meth:`lines` returns them first."""
        self._buffer[0:0] = b"".join(line + b"\n" for line in lines)
        self._scanned = 0

    async def lines(self, timeout: float = READ_TIMEOUT) -> list[bytes]:
        """At least one complete line (without newlines). Raises EOFError at end of stream."""
        with trio.fail_after(timeout):
            while True:
                end = self._buffer.rfind(b"\n", self._scanned)
                if end >= 0:
                    lines = [line for line in bytes(self._buffer[:end]).split(b"\n") if line.strip()]
                    del self._buffer[: end + 1]
                    self._scanned = 0
                    if lines:
                        return lines
                    continue
                self._scanned = len(self._buffer)
                if len(self._buffer) > self._max_line:
                    raise RuntimeError("a line from the server is over the load generator's limit")
                data = await self._receive.receive_some(READ_SIZE)
                if not data:
                    raise EOFError("the server closed its output")
                self.bytes_received += len(data)
                self._buffer += data


class RpcClient:
    """Sequential JSON-RPC requests (handshake, tools/list, checks) over a line channel."""

    def __init__(self, channel: LineChannel, first_id: int = 1_000_000_000) -> None:
        self.channel = channel
        self._next_id = first_id

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.channel.send(_encode(message) + b"\n")

    async def request(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = READ_TIMEOUT, result_type: Any = Any
    ) -> Any:
        """The ``result``, decoded as ``result_type``. Raises RuntimeError for a JSON-RPC error."""
        self._next_id += 1
        rid = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        await self.channel.send(_encode(message) + b"\n")
        deadline = trio.current_time() + timeout
        while True:
            for line in await self.channel.lines(max(0.001, deadline - trio.current_time())):
                reply = _decode_reply(line)
                if reply.id == rid and reply.method is None:
                    if reply.error is not None:
                        raise RuntimeError(f"{method} failed: {reply.error}")
                    return msgspec.json.decode(reply.result, type=result_type)

    async def initialize(self) -> Any:
        result = await self.request("initialize", {
            "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "toolbridge-bench", "version": "1"},
        })
        await self.notify("notifications/initialized")
        return result

    async def list_all_tools(self, timeout: float = READ_TIMEOUT) -> tuple[list[dict[str, Any]], int]:
        """Every tool, following ``nextCursor``; and the number of pages."""
        tools: list[dict[str, Any]] = []
        cursor = None
        pages = 0
        while pages < 10_000:
            result = await self.request("tools/list", {"cursor": cursor} if cursor else None, timeout)
            pages += 1
            tools.extend(result["tools"])
            cursor = result.get("nextCursor")
            if not cursor:
                break
        return tools, pages

    async def wait_for_tool(self, name: str, timeout: float = 30.0) -> None:
        with trio.fail_after(timeout):
            while True:
                tools, _ = await self.list_all_tools()
                if any(t["name"] == name for t in tools):
                    return
                await trio.sleep(0.05)


def call_template(tool: str, arguments: dict[str, Any]) -> Callable[[int], bytes]:
    """A fast ``id -> request line`` for ``tools/call`` of ``tool`` with fixed arguments."""
    marker = 987654321987
    line = _encode({"jsonrpc": "2.0", "id": marker, "method": "tools/call",
                    "params": {"name": tool, "arguments": arguments}}) + b"\n"
    prefix, _, suffix = line.partition(str(marker).encode())
    return lambda rid: prefix + str(rid).encode() + suffix


async def pipelined(
    channel: LineChannel,
    make_line: Callable[[int], bytes],
    *,
    calls: int,
    concurrency: int,
    max_seconds: float,
    first_id: int = 1,
    read_timeout: float = READ_TIMEOUT,
) -> dict[str, Any]:
    """Keep ``concurrency`` calls in flight until ``calls`` were made (or ``max_seconds`` passed)."""
    perf = time.perf_counter_ns
    sent: dict[int, int] = {}
    latencies: list[int] = []
    errors = tool_errors = 0
    next_id = first_id
    issued = 0
    start = perf()
    deadline = start + int(max_seconds * 1e9)

    def batch(count: int) -> bytes:
        nonlocal next_id, issued
        now = perf()
        parts = []
        for _ in range(count):
            sent[next_id] = now
            parts.append(make_line(next_id))
            next_id += 1
        issued += count
        return b"".join(parts)

    await channel.send(batch(min(concurrency, calls)))
    while sent:
        lines = await channel.lines(read_timeout)
        now = perf()
        answered = 0
        for line in lines:
            reply = _decode_reply(line)
            if reply.method is not None:
                continue  # a notification
            started = sent.pop(reply.id, None)  # type: ignore[arg-type]
            if started is None:
                continue
            answered += 1
            latencies.append(now - started)
            if reply.error is not None:
                errors += 1
            elif b'"isError":true' in line:
                tool_errors += 1
        more = min(answered, calls - issued) if now < deadline else 0
        if more > 0:
            await channel.send(batch(more))
    elapsed = (perf() - start) / 1e9
    done = len(latencies)
    return {
        "calls": done,
        "errors": errors,
        "tool_errors": tool_errors,
        "seconds": elapsed,
        "calls_per_s": done / elapsed if elapsed > 0 else math.nan,
        **latency_summary(latencies),
    }


async def open_stdio(argv: list[str], *, env: dict[str, str] | None = None, stderr: Path | None = None,
                     cwd: Path | None = None) -> tuple[trio.Process, LineChannel]:
    import subprocess

    err = open(stderr, "ab") if stderr is not None else subprocess.DEVNULL
    try:
        process = await trio.lowlevel.open_process(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env, cwd=cwd
        )
    finally:
        if stderr is not None:
            err.close()  # type: ignore[union-attr]
    assert process.stdin is not None and process.stdout is not None
    return process, LineChannel(process.stdout, process.stdin)


async def close_stdio(process: trio.Process, timeout: float = 10.0) -> None:
    """Close the server's stdin (EOF), wait for it to exit, kill it if it does not."""
    assert process.stdin is not None
    with trio.move_on_after(1):
        await process.stdin.aclose()
    with trio.move_on_after(timeout):
        await process.wait()
        return
    process.kill()
    with trio.move_on_after(5):
        await process.wait()


async def run_stdio_load(
    argv: list[str],
    *,
    tool: str,
    arguments: dict[str, Any],
    expect_text: str | None,
    calls: int,
    concurrency: int,
    warmup: int,
    max_seconds: float,
    env: dict[str, str] | None = None,
    stderr: Path | None = None,
    cwd: Path | None = None,
    watch_pids: dict[str, int] | None = None,
) -> dict[str, Any]:
    """One measurement against the stdio MCP server ``argv`` (see the module docstring).

    The result includes ``cpu_us_per_call`` of the server process, of this load generator,
    and of every process in ``watch_pids`` (name -> pid) over the measured phase (Linux).
    """
    process, channel = await open_stdio(argv, env=env, stderr=stderr, cwd=cwd)
    try:
        rpc = RpcClient(channel)
        await rpc.initialize()
        await rpc.wait_for_tool(tool)
        result = await rpc.request("tools/call", {"name": tool, "arguments": arguments})
        if result.get("isError"):
            raise RuntimeError(f"{tool} failed: {result}")
        if expect_text is not None and result["content"][0].get("text") != expect_text:
            raise RuntimeError(f"{tool} answered {result} instead of {expect_text!r}")
        make_line = call_template(tool, arguments)
        if warmup:
            await pipelined(channel, make_line, calls=warmup, concurrency=concurrency,
                            max_seconds=max_seconds, first_id=1)
        pids = {"server": process.pid, **(watch_pids or {})}
        before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        own = cpu_seconds()
        result = await pipelined(channel, make_line, calls=calls, concurrency=concurrency,
                                 max_seconds=max_seconds, first_id=warmup + 1)
        done = max(1, result["calls"])
        cpu = {name: (cpu_seconds(pid) - before[name]) / done * 1e6 for name, pid in pids.items()}
        cpu["load_generator"] = (cpu_seconds() - own) / done * 1e6
        result["cpu_us_per_call"] = cpu
        return result
    finally:
        await close_stdio(process)
