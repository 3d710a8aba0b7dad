"""A live daemon fed mutated lines (bit flips, cuts, type confusions of real messages), from
unregistered connections, a registered raw app, an agent link and HTTP — then it must still
serve a good app and a good agent.

Seeded randomness (``TOOLBRIDGE_FUZZ_SEED``, else random; printed).
"""

from __future__ import annotations

import json
import os
import random
from typing import Any

import httpx2
import pytest
import trio

from broker.daemon.run import DaemonInfo
from faultkit import MODERN_META, RawAgent
from mcp_testkit import HTTPX_STREAM_WARNINGS, mcp_url, running_daemon
from rawapp import ECHO_TOOL, RawApp
from test_fuzz_wire import REAL_MESSAGES

pytestmark = [pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS]

SEED = int(os.environ.get("TOOLBRIDGE_FUZZ_SEED", int.from_bytes(os.urandom(4), "big")))

MCP_MESSAGES: list[dict[str, Any]] = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": MODERN_META}},
    {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
     "params": {"name": "Demo__echo", "arguments": {"text": "hi"}, "_meta": MODERN_META}},
    {"jsonrpc": "2.0", "id": 4, "method": "server/discover", "params": {"_meta": MODERN_META}},
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}},
    {"jsonrpc": "2.0", "id": 5, "method": "ping"},
]
JUNK: list[Any] = [None, True, False, 0, -1, 2**63, 1.5e300, "", "x" * 100, [], {}, [1, [2, [3]]], {"a": {"b": None}},
                   "\u202e\U0001f600\u0000", "../../etc/passwd"]


def mutate(rng: random.Random, message: dict[str, Any]) -> bytes:
    value = json.loads(json.dumps(message))
    action = rng.choice(["flip", "truncate", "confuse", "drop", "extra", "retype", "nest", "crlf", "nul", "valid"])
    keys = [k for k in value if k not in ("type", "jsonrpc")]
    if action == "confuse" and keys:
        value[rng.choice(keys)] = rng.choice(JUNK)
    elif action == "drop" and keys:
        del value[rng.choice(keys)]
    elif action == "extra":
        value[rng.choice(["zz", "type2", "__proto__", "correlationId", "id"])] = rng.choice(JUNK)
    elif action == "retype":
        value["type" if "type" in value else "method"] = rng.choice(JUNK)
    elif action == "nest":
        depth = rng.choice([10, 500, 3000, 20000])
        return json.dumps(value)[:-1].encode() + b', "n": ' + b"[" * depth + b"]" * depth + b"}"
    line = json.dumps(value).encode()
    if action == "flip" and line:
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(line))
            line = line[:i] + bytes([line[i] ^ (1 << rng.randrange(8))]) + line[i + 1:]
    elif action == "truncate":
        line = line[: rng.randrange(len(line) + 1)]
    elif action == "crlf":
        line += b"\r"
    elif action == "nul":
        i = rng.randrange(len(line) + 1)
        line = line[:i] + b"\x00" + line[i:]
    return line.replace(b"\n", b" ")


async def drain(stream: trio.SocketStream, lines: list[bytes],
                marker: bytes = b"", seen: trio.Event | None = None) -> None:
    """Collect ``stream``'s lines; set ``seen`` at the first line holding ``marker``."""
    buffer = b""
    while True:
        try:
            chunk = await stream.receive_some(65536)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return
        if not chunk:
            return
        buffer += chunk
        while b"\n" in buffer:
            line, _, buffer = buffer.partition(b"\n")
            lines.append(line)
            if seen is not None and marker in line:
                seen.set()


async def serve_echo(app: RawApp) -> None:
    """A lenient app: answers every invocation with its arguments; ignores everything else."""
    while True:
        try:
            message = await app.recv(timeout=3600)
        except (EOFError, trio.BrokenResourceError, trio.ClosedResourceError):
            return
        if message["type"] == "ping":
            await app.send({"type": "pong", "id": message.get("id")})
        elif message["type"] == "toolInvocation":
            await app.send({"type": "toolResponse", "correlationId": message["correlationId"],
                            "result": {"data": message.get("parameters")}})


async def still_serves(info: DaemonInfo) -> None:
    """A fresh, well-behaved app and agent work as if nothing had happened."""
    good = await RawApp.connect(info.port)
    registered = await good.register(info.token, app_name="GoodApp", tools=[ECHO_TOOL])
    assert registered["type"] == "registered", registered
    async with trio.open_nursery() as nursery:
        box: list[Any] = []

        async def agent() -> None:
            box.append(await info.core.router.call_tool("GoodApp__Echo", {"text": "fine"}))

        nursery.start_soon(agent)
        invocation = await good.recv_type("toolInvocation")
        await good.send({"type": "toolResponse", "correlationId": invocation["correlationId"],
                         "result": {"data": invocation["parameters"]["text"]}})
    assert box[0].kind == "ok" and box[0].result.data == "fine"
    async with trio.open_nursery() as nursery:
        agent_link = await RawAgent.connect(nursery, info.port, info.token)
        listing = await agent_link.response(await agent_link.request("tools/list"))
        assert "GoodApp__Echo" in [t["name"] for t in listing["result"]["tools"]]
        await agent_link.aclose()
    await good.aclose()


async def test_mutated_lines_from_every_kind_of_peer_leave_the_daemon_serving(tmp_path: Any) -> None:
    rng = random.Random(SEED)
    print(f"\nlive fuzz seed: {SEED} (set TOOLBRIDGE_FUZZ_SEED={SEED} to repeat)")
    async with running_daemon(tmp_path / "home", max_line_bytes=64 * 1024) as info, \
            trio.open_nursery() as nursery:
        demo = await RawApp.connect(info.port)
        assert (await demo.register(info.token, app_name="Demo", tools=[{**ECHO_TOOL, "name": "echo"}],
                                    maxConcurrency=8))["type"] == "registered"
        nursery.start_soon(serve_echo, demo)

        # 1. Unregistered connections: one mutated first line each (register mostly).
        for _ in range(40):
            stream = await trio.open_tcp_stream("127.0.0.1", info.port)
            message = REAL_MESSAGES[0] if rng.random() < 0.6 else rng.choice(REAL_MESSAGES)
            if message.get("token") == "t0k3n" and rng.random() < 0.5:
                message = {**message, "token": info.token}
            await stream.send_all(mutate(rng, message) + b"\n")
            replies: list[bytes] = []
            with trio.move_on_after(0.5):
                await drain(stream, replies)
            for reply in replies:
                assert json.loads(reply)["type"] in {"error", "registered", "adminResult", "agentConnected", "ping"}
            await trio.aclose_forcefully(stream)

        # 2. A registered raw app sending mutated lines while a call of its own is in flight.
        fuzzer = await RawApp.connect(info.port)
        assert (await fuzzer.register(info.token, app_name="Fuzzer", maxConcurrency=4))["type"] == "registered"
        replies = []
        outcome: list[Any] = []
        ended = trio.Event()
        async with trio.open_nursery() as inner:
            async def pending_call() -> None:
                outcome.append(await info.core.router.call_tool("Fuzzer__Echo", {"text": "real"}, timeout=120))
                ended.set()

            inner.start_soon(pending_call)
            invocation = await fuzzer.recv_type("toolInvocation")
            inner.start_soon(drain, fuzzer.stream, replies)
            app_messages = [m for m in REAL_MESSAGES if m["type"] not in ("register",)]
            blob = b"".join(mutate(rng, rng.choice(app_messages)) + b"\n" for _ in range(1500))
            await fuzzer.send(blob)
            await fuzzer.send({"type": "toolResponse", "correlationId": invocation["correlationId"],
                               "result": {"data": "real"}})
            with trio.fail_after(30):
                await ended.wait()
            inner.cancel_scope.cancel()
        # Mutations may have answered or failed the call (a mangled line naming it fails it at
        # once, by design); it ended exactly once either way, and never with an internal error.
        assert outcome[0].kind in {"ok", "app_error"}, outcome[0]
        assert all(json.loads(line)["type"] in {"error", "pong", "toolsUpdated", "ping"} for line in replies)

        # 3. An agent link fed mutated MCP lines: every reply is valid JSON-RPC.
        agent_stream = await trio.open_tcp_stream("127.0.0.1", info.port)
        await agent_stream.send_all(json.dumps({"type": "agentConnect", "token": info.token}).encode() + b"\n")
        agent_lines: list[bytes] = []
        last_answered = trio.Event()
        async with trio.open_nursery() as inner:
            inner.start_soon(drain, agent_stream, agent_lines, b'"last"', last_answered)
            blob = b"".join(mutate(rng, rng.choice(MCP_MESSAGES)) + b"\n" for _ in range(600))
            await agent_stream.send_all(blob + b'{"jsonrpc": "2.0", "id": "last", "method": "ping"}\n')
            with trio.fail_after(30):
                await last_answered.wait()
            await trio.aclose_forcefully(agent_stream)
        for line in agent_lines[1:]:
            message = json.loads(line)
            assert message.get("jsonrpc") == "2.0", message
            if "method" not in message:
                assert ("result" in message) != ("error" in message), message
                if "error" in message:
                    assert message["error"]["code"] != -32603, message  # an internal error is a bug

        # 4. HTTP: mutated bodies get a 2xx or 4xx, never a server error.
        headers = {"authorization": f"Bearer {info.token}", "accept": "application/json, text/event-stream",
                   "content-type": "application/json"}
        async with httpx2.AsyncClient(timeout=30) as http:
            for _ in range(60):
                body = mutate(rng, rng.choice(MCP_MESSAGES[2:5]))  # modern requests: each its own session
                response = await http.post(mcp_url(info), content=body, headers=headers)
                assert response.status_code < 500, (body[:200], response.status_code, response.text[:300])

        with trio.fail_after(30):
            await info.core.changed.wait_until(lambda: not len(info.core.calls) and not info.core.agent_sessions)
        await still_serves(info)
        await RawApp.close_all()
