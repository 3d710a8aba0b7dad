"""An app's own CPU per call, without the daemon: a blocking fake broker drives it directly.

Usage: ``python bench/app_cpu.py [--app app_client|raw] [--calls 30000] [--concurrency 32] [--repeats 3]``

The bench process listens on 127.0.0.1, writes a ``runtime.json`` and ``token`` into a temporary
home, and starts the app (``bench/echo_app.py`` or ``bench/raw_echo_app.py``) on it. It answers
``register`` with ``registered``, then keeps ``--concurrency`` ``echo`` invocations in flight
(one write per batch of answers received, as the daemon does) until ``--calls`` have been
answered, and prints the app's CPU per call (user + system, from ``/proc/<pid>/stat`` on Linux,
else the children's ``resource`` usage after the app ends) and calls/s. With no daemon and no
relay in the way, the app's cost shows with less noise than in ``relay_stdio.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

HERE = Path(__file__).resolve().parent
APPS = {"app_client": HERE / "echo_app.py", "raw": HERE / "raw_echo_app.py"}


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_once(app: str, calls: int, concurrency: int, text: str) -> tuple[float, float]:
    """(calls/s, app CPU µs per call) of one run against a fresh app process."""
    with tempfile.TemporaryDirectory(prefix="tb-appcpu-") as home:
        server = socket.create_server(("127.0.0.1", 0))
        port = server.getsockname()[1]
        Path(home, "token").write_text("bench-token\n")
        Path(home, "runtime.json").write_text(json.dumps({"pid": os.getpid(), "host": "127.0.0.1", "port": port}))
        proc = subprocess.Popen([sys.executable, str(APPS[app]), "--home", home])
        try:
            conn, _ = server.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            buffer = b""
            while b"\n" not in buffer:
                buffer += conn.recv(1 << 16)
            line, _, buffer = buffer.partition(b"\n")
            register = json.loads(line)
            registered = {
                "type": "registered", "appId": "Bench-1", "instanceId": register.get("instanceId") or "i",
                "appLabel": register["appName"], "toolNames": {"echo": "Bench__echo"},
                "heartbeatIntervalMs": 0, "protocolVersion": min(2, register.get("protocolVersion", 1)),
            }
            conn.sendall(json.dumps(registered).encode() + b"\n")
            argument = msgspec.json.encode({"text": text})

            def invocation(cid: int) -> bytes:
                return (b'{"type":"toolInvocation","correlationId":%d,"tool":"echo","parameters":%s,'
                        b'"timeoutMs":60000}\n' % (cid, argument))

            sent = answered = 0
            warmup = min(2000, calls // 5)
            start = cpu0 = 0.0
            conn.sendall(b"".join(invocation(sent + i) for i in range(concurrency)))
            sent = concurrency
            while answered < calls + warmup:
                data = conn.recv(1 << 18)
                if not data:
                    raise SystemExit("the app closed the connection")
                buffer += data
                done = buffer.count(b'"toolResponse"')
                if not done and b"\n" not in buffer:
                    continue
                *lines, buffer = buffer.split(b"\n")
                done = sum(1 for line in lines if b'"toolResponse"' in line)
                before = answered
                answered += done
                if before < warmup <= answered:
                    start, cpu0 = time.perf_counter(), _cpu_seconds(proc.pid)
                more = min(done, calls + warmup - sent)
                if more > 0:
                    conn.sendall(b"".join(invocation(sent + i) for i in range(more)))
                    sent += more
            elapsed = time.perf_counter() - start
            cpu = _cpu_seconds(proc.pid) - cpu0
            conn.close()
            return calls / elapsed, cpu / calls * 1e6
        finally:
            proc.terminate()
            proc.wait()
            server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app", choices=sorted(APPS), default="app_client")
    parser.add_argument("--calls", type=int, default=30000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--text", default="hello")
    parser.add_argument("--json", action="store_true", help="one JSON line (the CI smoke test reads it)")
    args = parser.parse_args()
    runs = [run_once(args.app, args.calls, args.concurrency, args.text) for _ in range(args.repeats)]
    rates, cpus = [r for r, _ in runs], [c for _, c in runs]
    if args.json:
        print(json.dumps({
            "scenario": "app_cpu", "machine": {"cores": os.cpu_count() or 1},
            "params": {"app": args.app, "calls": args.calls, "concurrency": args.concurrency, "repeats": args.repeats},
            "calls_per_s": statistics.median(rates), "app_cpu_us_per_call": statistics.median(cpus),
            "runs": [{"calls_per_s": r, "app_cpu_us_per_call": c} for r, c in runs],
        }))
        return
    print(f"{args.app} @{args.concurrency}: calls/s {statistics.median(rates):,.0f} "
          f"(runs {', '.join(f'{r:,.0f}' for r in rates)}); app CPU µs/call {statistics.median(cpus):.1f} "
          f"(runs {', '.join(f'{c:.1f}' for c in cpus)})")


if __name__ == "__main__":
    main()
