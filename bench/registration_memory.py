"""Registration memory: two apps at the per-app limits come, are listed over HTTP, and go.

Usage: ``python bench/registration_memory.py [--tools 1000] [--schema-kb 256] [--json]``
(``--tools 200 --schema-kb 32`` for a quick run).

The daemon is a real process (``bench/bench_daemon.py``: temporary home, port 0, HTTP on,
reconnect grace 0.5 s, no heartbeat timeout: the raw apps answer no pings). Two raw protocol connections each register ``--tools`` tools whose
inputSchemas are about ``--schema-kb`` KiB (flat objects of string properties with
``minLength``, so each needs the full metaschema check); an HTTP agent session lists every
tool (all pages); then both apps disconnect, the grace period runs out, and the daemon's
memory is read again. Daemon RSS (Linux ``/proc``) is read after a ``gc.collect()`` in the
daemon, and again after glibc's ``malloc_trim(0)`` (freed heap pages stay in RSS otherwise, so
"after" without trimming measures glibc's caching as much as the daemon). A registration the
daemon refuses (e.g. a daemon-wide budget) is reported with its error code.
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import time
from typing import Any

import _harness as h


def schema(size: int) -> dict[str, Any]:
    count = max(1, size // 60)
    return {"type": "object", "properties": {
        f"field_{i:05d}": {"type": "string", "minLength": 1, "description": "x" * 8} for i in range(count)}}


def register(port: int, token: str, name: str, tools: int, size: int, timeout: float) -> tuple[socket.socket, str]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    one = schema(size)
    message = {"type": "register", "appName": name, "token": token, "maxConcurrency": 4,
               "tools": [{"name": f"tool_{n:04d}", "description": f"tool {n}", "inputSchema": one} for n in range(tools)]}
    sock.sendall(json.dumps(message).encode() + b"\n")
    buffer = b""
    while b"\n" not in buffer:
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        buffer += chunk
    reply = json.loads(buffer.partition(b"\n")[0])
    return sock, "registered" if reply.get("type") == "registered" else str(reply.get("code"))


def list_all(port: int, token: str, timeout: float) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}

    def post(body: dict[str, Any]) -> tuple[Any, dict[str, Any] | None]:
        conn.request("POST", "/mcp", json.dumps(body), headers)
        response = conn.getresponse()
        data = response.read()
        if not data:
            return response, None
        if response.getheader("content-type", "").startswith("text/event-stream"):
            data = b"".join(line[5:] for line in data.splitlines() if line.startswith(b"data:"))
        return response, json.loads(data)

    response, answer = post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
    assert answer is not None
    headers["mcp-protocol-version"] = answer["result"]["protocolVersion"]
    if response.getheader("mcp-session-id"):
        headers["mcp-session-id"] = response.getheader("mcp-session-id")
    post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    listed, cursor, rid = 0, None, 1
    while True:
        _, answer = post({"jsonrpc": "2.0", "id": rid, "method": "tools/list",
                          "params": {"cursor": cursor} if cursor else {}})
        assert answer is not None, "tools/list gave no answer"
        listed += len(answer["result"]["tools"])
        cursor = answer["result"].get("nextCursor")
        rid += 1
        if not cursor:
            break
    conn.close()  # the session stays open in the daemon: as an agent that listed once and idles
    return listed


def mib(kib: int | None) -> float | None:
    return None if kib is None else round(kib / 1024, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=1000, help="tools per app (default: the per-app limit)")
    parser.add_argument("--schema-kb", type=int, default=256, help="KiB per inputSchema (default: the limit)")
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    size = args.schema_kb * 1024 - 512  # just under max_schema_bytes at the default
    with h.temp_home() as home, h.Daemon(home, http=True, env={"TOOLBRIDGE_RECONNECT_GRACE": "0.5",
                                                  # the raw apps answer no pings while the other registers
                                                  "TOOLBRIDGE_HEARTBEAT_TIMEOUT": "86400"}) as daemon:
        idle = daemon.memory()
        started = time.monotonic()
        outcomes, socks = [], []
        for name in ("AppOne", "AppTwo"):
            sock, outcome = register(daemon.port, daemon.token, name, args.tools, size, args.timeout)
            socks.append(sock)
            outcomes.append(outcome)
        registered_s = time.monotonic() - started
        tools = daemon.admin("status")["tools"]
        assert daemon.http_port is not None
        listed = list_all(int(daemon.http_port), daemon.token, args.timeout)
        loaded = daemon.memory()
        for sock in socks:
            sock.close()
        h.wait_until(lambda: daemon.admin("status")["tools"] == 0, 60, "the apps' grace to run out",
                     daemon.process, daemon.log)
        time.sleep(0.2)
        after = daemon.memory()
        trimmed = dict(daemon.admin("bench.memory", {"trim": True}))
    result = {
        "tools_per_app": args.tools, "schema_kib": args.schema_kb, "registrations": outcomes,
        "tools_registered": tools, "tools_listed": listed, "register_s": round(registered_s, 1),
        "rss_idle_mib": mib(idle["rss_kib"]), "rss_loaded_mib": mib(loaded["rss_kib"]),
        "rss_peak_mib": mib(trimmed["hwm_kib"]), "rss_after_mib": mib(after["rss_kib"]),
        "rss_after_trim_mib": mib(trimmed["rss_kib"]),
    }
    text = h.table(["measure", "value"], [[k, h.fmt(v)] for k, v in result.items()])
    h.emit(result, args.json, text)


if __name__ == "__main__":
    main()
