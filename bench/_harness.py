"""Shared pieces of the benchmark scripts: processes, homes, statistics, daemon memory, output.

Theory of operation
-------------------
Every scenario script (``bench/*.py``) is one command that starts what it needs as real
processes on 127.0.0.1 with port 0 and a temporary home of its own, measures, stops
everything it started (by pid), and prints a table — or, with ``--json``, one JSON object
that ``tests/test_bench_smoke.py`` parses.

The daemon is started through ``bench/bench_daemon.py``: the same settings loading, logging
set-up and :func:`broker.daemon.run.run_daemon` as ``toolbridge serve``, plus one admin command,
``bench.memory``, that runs ``gc.collect()`` in the daemon and reports its ``VmRSS`` and
``VmHWM`` (Linux ``/proc/self/status``; elsewhere ``ru_maxrss`` for the peak and no RSS).
Nothing is changed in the broker for the benchmark.

Every loop here is bounded in count and in time.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
PYTHON = sys.executable
#: Seconds to wait for a process we started to come up.
START_TIMEOUT = 30.0


# --- statistics ------------------------------------------------------------------------------


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of an already sorted sequence (``fraction`` in 0..1)."""
    if not sorted_values:
        return math.nan
    index = min(len(sorted_values) - 1, max(0, math.ceil(fraction * len(sorted_values)) - 1))
    return sorted_values[index]


def latency_summary(latencies_ns: list[int]) -> dict[str, float]:
    values = sorted(latencies_ns)
    return {
        "p50_ms": percentile(values, 0.50) / 1e6,
        "p99_ms": percentile(values, 0.99) / 1e6,
        "mean_ms": (sum(values) / len(values) / 1e6) if values else math.nan,
        "max_ms": (values[-1] / 1e6) if values else math.nan,
    }


def median(values: Sequence[float]) -> float:
    finite = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return statistics.median(finite) if finite else math.nan


def median_of_runs(runs: list[dict[str, Any]], keys: Sequence[str]) -> dict[str, float]:
    return {key: median([run[key] for run in runs if key in run]) for key in keys}


# --- machine ---------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    import platform

    return {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }


def raise_nofile(wanted: int) -> int:
    """Raise this process's open-file limit (inherited by children); return the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU seconds used so far by a process (Linux ``/proc``; NaN elsewhere).

    For the current process, :func:`time.process_time` works everywhere.
    """
    if pid is None:
        return time.process_time()
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_memory(pid: int | None = None) -> dict[str, int | None]:
    """``{"rss_kib", "hwm_kib"}`` of a process from ``/proc/<pid>/status`` (Linux only).

    For the current process elsewhere, ``hwm_kib`` falls back to ``ru_maxrss`` and ``rss_kib``
    is None.
    """
    path = Path(f"/proc/{pid if pid is not None else 'self'}/status")
    found: dict[str, int | None] = {"rss_kib": None, "hwm_kib": None}
    try:
        for line in path.read_text().splitlines():
            if line.startswith("VmRSS:"):
                found["rss_kib"] = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                found["hwm_kib"] = int(line.split()[1])
    except OSError:
        if pid is None:
            maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            found["hwm_kib"] = maxrss // 1024 if sys.platform == "darwin" else maxrss
    return found


# --- homes and processes ---------------------------------------------------------------------


@contextlib.contextmanager
def temp_home(prefix: str = "tb-bench-") -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("TOOLBRIDGE_HOME", None)
    env.update({"PYTHONUNBUFFERED": "1", "TOOLBRIDGE_LOG_FORMAT": "json"})
    env.update(extra)
    return env


def stop_process(process: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    """SIGTERM, wait, then SIGKILL: only the process we started, by its pid."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait(timeout)


@contextlib.contextmanager
def started(argv: list[str], *, env: dict[str, str] | None = None, log: Path | None = None,
            stdout: int | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``argv`` for the duration of the block; its stderr (and stdout) go to ``log``."""
    log_file = open(log, "ab") if log is not None else subprocess.DEVNULL
    try:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=stdout if stdout is not None else log_file,
            stderr=log_file, env=env or child_env(), cwd=REPO,
        )
        try:
            yield process
        finally:
            stop_process(process)
    finally:
        if log is not None:
            log_file.close()  # type: ignore[union-attr]


def wait_until(predicate: Any, timeout: float, what: str, process: subprocess.Popen[bytes] | None = None,
               log: Path | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if process is not None and process.poll() is not None:
            break
        time.sleep(0.02)
    tail = log.read_text(errors="replace")[-2000:] if log is not None and log.exists() else ""
    raise RuntimeError(f"timed out waiting for {what}" + (f"; log tail:\n{tail}" if tail else ""))


class Daemon:
    """A toolbridge daemon process (``bench/bench_daemon.py``) on free ports in ``home``."""

    def __init__(self, home: Path, *, http: bool = False, env: dict[str, str] | None = None) -> None:
        self.home = home
        self.http = http
        self.env = child_env(**(env or {}))
        self.log = home / "daemon.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.http_port: int | None = None
        self.token = ""
        self.pid = 0
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Daemon:
        self.home.mkdir(parents=True, exist_ok=True)
        argv = [PYTHON, str(BENCH_DIR / "bench_daemon.py"), "--home", str(self.home), "--port", "0"]
        argv += ["--http-port", "0"] if self.http else ["--no-http"]
        self.process = self._stack.enter_context(started(argv, env=self.env, log=self.log))
        runtime = self.home / "runtime.json"

        def ready() -> dict[str, Any] | None:
            try:
                return json.loads(runtime.read_text())
            except (OSError, ValueError):
                return None

        info = wait_until(ready, START_TIMEOUT, "the daemon's runtime.json", self.process, self.log)
        self.port = int(info["port"])
        self.http_port = info.get("httpPort")
        self.pid = int(info["pid"])
        self.token = (self.home / "token").read_text().strip()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stack.close()

    def admin(self, command: str, args: dict[str, Any] | None = None, timeout: float = 30.0) -> Any:
        """One admin request over the app port (protocol.md section 8)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as sock:
            request = {"type": "admin", "token": self.token, "command": command, "args": args or {}}
            sock.sendall(json.dumps(request).encode() + b"\n")
            buffer = b""
            deadline = time.monotonic() + timeout
            while b"\n" not in buffer and time.monotonic() < deadline:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                buffer += chunk
        reply = json.loads(buffer.partition(b"\n")[0])
        if not reply.get("ok"):
            raise RuntimeError(f"admin {command} failed: {reply.get('error')}")
        return reply.get("result")

    def memory(self) -> dict[str, Any]:
        """The daemon's memory after a ``gc.collect()`` in it (``bench.memory``)."""
        return dict(self.admin("bench.memory"))

    def wait_tools(self, count: int, timeout: float = START_TIMEOUT) -> None:
        wait_until(lambda: self.admin("status")["tools"] >= count, timeout, f"{count} tools", self.process, self.log)

    def stdio_argv(self) -> list[str]:
        """The command an agent runs: ``toolbridge stdio`` for this home (never auto-starts)."""
        return [PYTHON, "-m", "broker", "stdio", "--home", str(self.home), "--no-start"]


# --- output ----------------------------------------------------------------------------------


def fmt(value: Any, digits: int = 3) -> str:
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}g}"
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(fmt(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def emit(result: dict[str, Any], as_json: bool, text: str) -> None:
    if as_json:
        print(json.dumps(result, indent=None, default=str))
    else:
        print(text)


def parse_list(value: str, kind: type = int) -> list[Any]:
    return [kind(v) for v in value.split(",") if v.strip()]
