"""The daemon's file descriptors under a flood of HTTP connections (issue 27, item 14).

A real ``toolbridge serve`` process under a small descriptor limit: HTTP connections that never
finish their head must not use up the descriptors that app links, the admin socket and the
daemon's own files need.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from broker.config.fdlimit import descriptor_limit, raise_descriptor_limit
from rawapp import RawApp

resource = pytest.importorskip("resource")  # POSIX: Windows has no descriptor limit to lower

#: The limit the daemon runs under (soft and hard: it cannot raise it).
SMALL_LIMIT = 256
#: Connections that send half a head and then nothing: more than the limit.
HALF_HEADS = 300


def _limit_descriptors(limit: int) -> Callable[[], None]:
    def apply() -> None:  # in the child, before it runs Python
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    return apply


@asynccontextmanager
async def serve_under_limit(home: Path, log_path: Path) -> AsyncIterator[dict[str, Any]]:
    """``toolbridge serve`` with RLIMIT_NOFILE at SMALL_LIMIT (JSON logs to ``log_path``)."""
    env = {**os.environ, "TOOLBRIDGE_LOG_FORMAT": "json"}
    with open(log_path, "wb") as log_file:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "broker", "serve", "--home", str(home), "--port", "0", "--http-port", "0"],
            stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file, env=env,
            preexec_fn=_limit_descriptors(SMALL_LIMIT))
    try:
        with trio.fail_after(30):
            # Polled: the runtime file is another process's.
            while (runtime := _runtime(home)) is None:
                assert process.returncode is None, log_path.read_text()
                await trio.sleep(0.05)
        yield runtime
    finally:
        process.terminate()
        with trio.move_on_after(10):
            await process.wait()
        if process.returncode is None:  # pragma: no cover - only when a test failed
            process.kill()
            await process.wait()


def _runtime(home: Path) -> dict[str, Any] | None:
    try:
        info: dict[str, Any] = json.loads((home / "runtime.json").read_text())
    except (OSError, ValueError):
        return None
    return info


async def test_half_sent_heads_past_the_descriptor_limit_leave_apps_and_status_alone(tmp_path: Path) -> None:
    """Regression: ~1,100 token-less half-sent heads at the common 1,024 limit (here 300 at 256)
    used every descriptor, so accepting on the Unix socket failed with EMFILE until the heads
    timed out (app registrations and `toolbridge status` waited seconds) and trio logged a
    traceback at every retry. Now HTTP connections are capped below the limit (the ones past
    the cap are closed at once), and the condition is logged once, without a traceback."""
    if not hasattr(socket, "AF_UNIX"):
        pytest.skip("no Unix socket here")
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < SMALL_LIMIT:
        pytest.skip("the hard descriptor limit is below the one the test sets")
    home, log_path = tmp_path / "home", tmp_path / "daemon.log"
    async with serve_under_limit(home, log_path) as runtime:
        heads: list[trio.SocketStream] = []
        try:
            for _ in range(HALF_HEADS):
                stream = await trio.open_tcp_stream("127.0.0.1", runtime["httpPort"])
                await stream.send_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n")
                heads.append(stream)
            # While every one of them is still open on our side: an app registers over the Unix
            # socket, and the CLI's status (the admin socket) answers.
            with trio.fail_after(30):
                app = RawApp(await trio.open_unix_socket(runtime["socket"]))
                token = (home / "token").read_text().strip()
                assert (await app.register(token, "Notes", timeout=30))["type"] == "registered"
                status = await trio.run_process(
                    [sys.executable, "-m", "broker", "status", "--home", str(home), "--json"],
                    capture_stdout=True, capture_stderr=True, check=False)
            assert status.returncode == 0, status.stderr
            state = json.loads(status.stdout)
            assert state["apps"]
            loop = state["eventLoop"]  # the loop-stall watchdog: refusing the flood never stalled it
            assert loop["watching"] and loop["maxStallMs"] < 100, loop
            await app.aclose()
        finally:
            for stream in heads:
                await trio.aclose_forcefully(stream)
    log_text = log_path.read_text()
    assert "Traceback" not in log_text
    assert "EMFILE" not in log_text
    at_cap = [json.loads(line) for line in log_text.splitlines() if "http_connections_at_cap" in line]
    assert len(at_cap) == 1, at_cap  # once, however many were refused
    assert at_cap[0]["limit"] < SMALL_LIMIT


def test_the_soft_descriptor_limit_is_raised_to_the_hard_one() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= SMALL_LIMIT:
        pytest.skip("the hard limit leaves nothing to raise")
    resource.setrlimit(resource.RLIMIT_NOFILE, (SMALL_LIMIT, hard))
    try:
        assert descriptor_limit() == SMALL_LIMIT
        raised = raise_descriptor_limit()
        assert raised is not None and raised > SMALL_LIMIT
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == raised == descriptor_limit()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
