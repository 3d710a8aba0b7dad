"""Scenario 2 — relay over Streamable HTTP: the daemon's /mcp against the SDK's Streamable HTTP server.

Usage: ``python bench/relay_http.py --calls 10000 --concurrency 1,32 --repeats 3 [--json]``

Targets, side by side in each repeat: (a) the daemon's ``/mcp`` (bearer token from the home's
``token`` file) relaying to the ``app_client`` echo app, (b) the same to the raw-socket echo
app, (b2) the same as (b) in the 2026-07-28 era (no session: every POST carries its
``_meta`` and the ``MCP-Protocol-Version`` / ``Mcp-Method`` / ``Mcp-Name`` headers, and runs in
a session of its own), and (d) ``sdk_server.py http``: the SDK's ``MCPServer`` with its
Streamable HTTP app under uvicorn, defaults (stateful sessions, SSE responses);
``--sdk-json-response`` adds (d2), the same server with ``json_response=True``. ``--targets``
picks a subset (names as in :data:`TARGETS`).

The load for the handshake era is a session (``initialize`` without a session id, the
``Mcp-Session-Id`` it returns on every later request, ``notifications/initialized``), then
``tools/call`` POSTs over ``--concurrency`` HTTP/1.1 keep-alive connections, one request in
flight on each. Each run also reports ``cpu_us_per_call``: the CPU time (``/proc``, Linux) the
server process (the daemon, or the SDK's server), the app and this load generator used over
the measured phase, divided by the calls; on a loaded machine that is steadier than calls/s. The client is a small raw HTTP/1.1 client on trio (Content-Length and
chunked bodies; ``application/json`` or ``text/event-stream`` responses), so that the load
generator costs little next to the servers.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import time
from typing import Any

import msgspec
import trio

import _harness as h

_encode = msgspec.json.Encoder().encode
PROTOCOL_VERSION = "2025-11-25"
MODERN_VERSION = "2026-07-28"
MODERN_META = {"io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
               "io.modelcontextprotocol/clientCapabilities": {}}


class HttpConnection:
    def __init__(self, port: int, headers: dict[str, str]) -> None:
        self.port = port
        self.headers = headers
        self.stream: trio.SocketStream | None = None
        self._buffer = bytearray()

    async def _connect(self) -> trio.SocketStream:
        if self.stream is None:
            self.stream = await trio.open_tcp_stream("127.0.0.1", self.port)
            self._buffer.clear()
        return self.stream

    async def _fill(self) -> None:
        assert self.stream is not None
        data = await self.stream.receive_some(1 << 18)
        if not data:
            raise EOFError("the server closed the connection")
        self._buffer += data

    async def _read_until(self, marker: bytes) -> bytes:
        while True:
            at = self._buffer.find(marker)
            if at >= 0:
                found = bytes(self._buffer[:at])
                del self._buffer[: at + len(marker)]
                return found
            await self._fill()

    async def _read_exactly(self, n: int) -> bytes:
        while len(self._buffer) < n:
            await self._fill()
        found = bytes(self._buffer[:n])
        del self._buffer[:n]
        return found

    async def post(self, body: bytes, extra: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        stream = await self._connect()
        headers = {**self.headers, **(extra or {}), "Content-Length": str(len(body))}
        head = "POST /mcp HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        await stream.send_all(head.encode() + body)
        status_line, *lines = (await self._read_until(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(status_line.split()[1])
        response_headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            response_headers[name.strip().lower()] = value.strip()
        if "content-length" in response_headers:
            data = await self._read_exactly(int(response_headers["content-length"]))
        elif response_headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int((await self._read_until(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await self._read_until(b"\r\n")
                    break
                parts.append(await self._read_exactly(size))
                await self._read_exactly(2)
            data = b"".join(parts)
        else:  # delimited by the connection closing
            try:
                while True:
                    await self._fill()
            except EOFError:
                pass
            data = bytes(self._buffer)
            await self.aclose()
        if response_headers.get("connection", "").lower() == "close":
            await self.aclose()
        return status, response_headers, data

    async def aclose(self) -> None:
        if self.stream is not None:
            await self.stream.aclose()
            self.stream = None


def rpc_message(status: int, headers: dict[str, str], body: bytes, rid: Any) -> dict[str, Any]:
    """The JSON-RPC response with id ``rid`` from a JSON or SSE body."""
    if headers.get("content-type", "").startswith("text/event-stream"):
        for line in body.split(b"\n"):
            if line.startswith(b"data:") and line[5:].strip():
                message = msgspec.json.decode(line[5:])
                if message.get("id") == rid and "method" not in message:
                    return message
        raise RuntimeError(f"no response for {rid} in the SSE body ({status}): {body[:300]!r}")
    if not body:
        raise RuntimeError(f"empty body with status {status}")
    return msgspec.json.decode(body)


async def open_session(port: int, headers: dict[str, str]) -> dict[str, str]:
    """``initialize`` + ``notifications/initialized``; the headers every later request needs."""
    conn = HttpConnection(port, headers)
    try:
        body = _encode({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "toolbridge-bench", "version": "1"}}})
        status, got, data = await conn.post(body)
        message = rpc_message(status, got, data, 0)
        if status != 200 or "result" not in message:
            raise RuntimeError(f"initialize failed ({status}): {data[:300]!r}")
        session = {"mcp-protocol-version": message["result"]["protocolVersion"]}
        if "mcp-session-id" in got:
            session["mcp-session-id"] = got["mcp-session-id"]
        status, _, data = await conn.post(
            _encode({"jsonrpc": "2.0", "method": "notifications/initialized"}), session)
        if status >= 300:
            raise RuntimeError(f"notifications/initialized failed ({status}): {data[:300]!r}")
        return session
    finally:
        await conn.aclose()


async def http_load(port: int, headers: dict[str, str], tool: str, *, calls: int, concurrency: int,
                    warmup: int, max_seconds: float, modern: bool = False,
                    watch_pids: dict[str, int] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": {"text": "hello"}}
    if modern:  # 2026-07-28: no session; the headers mirror the body
        session = {"mcp-protocol-version": MODERN_VERSION, "mcp-method": "tools/call", "mcp-name": tool}
        params["_meta"] = MODERN_META
    else:
        session = await open_session(port, headers)
    conns = [HttpConnection(port, {**headers, **session}) for _ in range(concurrency)]
    prefix = b'{"jsonrpc":"2.0","id":'
    suffix = b',"method":"tools/call","params":' + _encode(params) + b"}"
    counter = iter(range(1, 10**12))

    async def phase(total: int) -> dict[str, Any]:
        latencies: list[int] = []
        state = {"issued": 0, "errors": 0}
        deadline = time.perf_counter() + max_seconds

        async def worker(conn: HttpConnection) -> None:
            while state["issued"] < total and time.perf_counter() < deadline:
                state["issued"] += 1
                rid = next(counter)
                started = time.perf_counter_ns()
                status, got, data = await conn.post(prefix + str(rid).encode() + suffix)
                message = rpc_message(status, got, data, rid)
                latencies.append(time.perf_counter_ns() - started)
                if "error" in message or message.get("result", {}).get("isError"):
                    state["errors"] += 1

        start = time.perf_counter()
        with trio.fail_after(max_seconds + 60):
            async with trio.open_nursery() as nursery:
                for conn in conns:
                    nursery.start_soon(worker, conn)
        elapsed = time.perf_counter() - start
        return {"calls": len(latencies), "errors": state["errors"], "seconds": elapsed,
                "calls_per_s": len(latencies) / elapsed if elapsed else math.nan,
                **h.latency_summary(latencies)}

    try:
        first = HttpConnection(port, {**headers, **session})
        status, got, data = await first.post(prefix + b"0" + suffix)
        await first.aclose()
        check = rpc_message(status, got, data, 0)
        if check.get("result", {}).get("content", [{}])[0].get("text") != "hello":
            raise RuntimeError(f"{tool} answered {check}")
        if warmup:
            await phase(warmup)
        pids = watch_pids or {}
        before = {name: h.cpu_seconds(pid) for name, pid in pids.items()}
        own = h.cpu_seconds()
        result = await phase(calls)
        done = max(1, result["calls"])
        cpu = {name: (h.cpu_seconds(pid) - before[name]) / done * 1e6 for name, pid in pids.items()}
        cpu["load_generator"] = (h.cpu_seconds() - own) / done * 1e6
        result["cpu_us_per_call"] = cpu
        return result
    finally:
        for conn in conns:
            await conn.aclose()


TARGETS = {
    "app_client": "(a) toolbridge /mcp + app_client app",
    "raw_app": "(b) toolbridge /mcp + raw-socket app",
    "raw_app_modern": "(b2) toolbridge /mcp + raw-socket app, 2026-07-28 (stateless)",
    "sdk": "(d) SDK MCPServer Streamable HTTP (uvicorn, SSE)",
    "sdk_json": "(d2) SDK MCPServer Streamable HTTP (uvicorn, json_response)",
}


def start_sdk(home: Any, json_response: bool, stack: Any) -> tuple[int, int]:
    """Start ``sdk_server.py http``; its port and pid."""
    argv = [h.PYTHON, str(h.BENCH_DIR / "sdk_server.py"), "http"] + (["--json-response"] if json_response else [])
    process = stack.enter_context(h.started(argv, log=home / "sdk.log", stdout=subprocess.PIPE))
    line = process.stdout.readline().decode()
    if not line.startswith("PORT "):
        raise RuntimeError(f"the SDK server did not start: {line!r} {(home / 'sdk.log').read_text()[-1000:]}")
    return int(line.split()[1]), process.pid


MINE = ("app_client", "raw_app", "raw_app_modern")
SDKS = ("sdk", "sdk_json")


def main() -> None:
    import contextlib

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10000)
    parser.add_argument("--concurrency", default="1,32")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--max-seconds", type=float, default=20.0)
    parser.add_argument("--sdk-json-response", action="store_true", help="add (d2), the SDK in JSON mode")
    parser.add_argument("--targets", default="app_client,raw_app,raw_app_modern,sdk",
                        help=f"a subset of {', '.join(TARGETS)}")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    levels = h.parse_list(args.concurrency)
    targets = [t for t in h.parse_list(args.targets, str) if t in TARGETS]
    if args.sdk_json_response and "sdk_json" not in targets:
        targets.append("sdk_json")
    runs: dict[str, list[dict[str, Any]]] = {f"{t}@{c}": [] for t in targets for c in levels}
    with h.temp_home() as home, contextlib.ExitStack() as stack:
        daemon = stack.enter_context(h.Daemon(home / "home", http=True))
        app_a = stack.enter_context(h.started([h.PYTHON, str(h.BENCH_DIR / "echo_app.py"), "--home",
                                               str(daemon.home)], log=home / "echo_app.log"))
        app_b = stack.enter_context(h.started([h.PYTHON, str(h.BENCH_DIR / "raw_echo_app.py"), "--home",
                                               str(daemon.home)], log=home / "raw_app.log"))
        daemon.wait_tools(2)
        assert daemon.http_port is not None
        ports: dict[str, int] = {}
        sdk_pids: dict[str, int] = {}
        for name in SDKS:
            if name in targets:
                ports[name], sdk_pids[name] = start_sdk(home, name == "sdk_json", stack)
        base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}

        def endpoint(name: str) -> tuple[int, dict[str, str], str, dict[str, int]]:
            if name in MINE:
                tool = "BenchApp__echo" if name == "app_client" else "RawApp__echo"
                app = app_a.pid if name == "app_client" else app_b.pid
                return daemon.http_port, {"Host": f"127.0.0.1:{daemon.http_port}", **base,  # type: ignore[return-value]
                                          "Authorization": f"Bearer {daemon.token}"}, tool, \
                    {"server": daemon.pid, "app": app}
            return ports[name], {"Host": f"127.0.0.1:{ports[name]}", **base}, "echo", {"server": sdk_pids[name]}

        async def measure() -> None:
            for _ in range(args.repeats):
                for level in levels:
                    for name in targets:
                        port, headers, tool, pids = endpoint(name)
                        runs[f"{name}@{level}"].append(await http_load(
                            port, headers, tool, calls=args.calls, concurrency=level, warmup=args.warmup,
                            max_seconds=args.max_seconds, modern=name == "raw_app_modern", watch_pids=pids))

        trio.run(measure)
    keys = ("calls_per_s", "p50_ms", "p99_ms", "calls", "errors")
    summary: dict[str, dict[str, Any]] = {k: h.median_of_runs(v, keys) for k, v in runs.items()}
    for key, values in runs.items():
        names = values[0].get("cpu_us_per_call", {}) if values else {}
        summary[key]["cpu_us_per_call"] = {n: h.median([r["cpu_us_per_call"][n] for r in values]) for n in names}
    ratios = {}
    for mine in (t for t in targets if t in MINE):
        for other in (t for t in targets if t in SDKS):
            for c in levels:
                pairs = list(zip(runs[f"{mine}@{c}"], runs[f"{other}@{c}"]))
                ratios[f"{mine}/{other}@{c}"] = {
                    "throughput_ratio": h.median([a["calls_per_s"] / b["calls_per_s"] for a, b in pairs]),
                    "p50_ratio": h.median([a["p50_ms"] / b["p50_ms"] for a, b in pairs]),
                }
    result = {"scenario": "relay_http", "machine": h.machine(), "params": vars(args), "summary": summary,
              "ratios": ratios, "runs": runs}

    def cpu_text(cpu: dict[str, float]) -> str:
        return " ".join(f"{k.replace('load_generator', 'load')} {h.fmt(v)}" for k, v in cpu.items())

    rows = [[TARGETS[k.split("@")[0]], k.split("@")[1], s["calls_per_s"], s["p50_ms"], s["p99_ms"], int(s["calls"]),
             cpu_text(s["cpu_us_per_call"])] for k, s in summary.items()]
    text = "\n".join([
        f"relay over Streamable HTTP — {h.machine()['cores']} cores, medians of {args.repeats} runs", "",
        h.table(["target", "concurrency", "calls/s", "p50 ms", "p99 ms", "calls/run", "CPU µs per call"], rows), "",
        h.table(["toolbridge / SDK @ concurrency", "throughput ratio", "p50 ratio"],
                [[k, v["throughput_ratio"], v["p50_ratio"]] for k, v in ratios.items()]),
    ])
    h.emit(result, args.json, text)


if __name__ == "__main__":
    main()
