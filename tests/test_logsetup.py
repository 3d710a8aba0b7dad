"""The daemon's batched JSON log: lines reach the file without a flush per line, but soon."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

CHILD_PRELUDE = textwrap.dedent(
    """
    import os, sys, structlog, trio
    from broker.config.logsetup import configure_logging, flush_periodically
    configure_logging("json", batched=True)
    log = structlog.get_logger("test")
    """
)


def run_child(body: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", CHILD_PRELUDE + textwrap.dedent(body)],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE)


def events(output: bytes) -> list[str]:
    return [json.loads(line)["event"] for line in output.splitlines() if line.strip()]


def test_info_lines_wait_for_a_flush_and_warnings_flush_at_once() -> None:
    child = run_child(
        """
        log.info("first")
        log.warning("second")  # flushes itself and what was before it
        log.info("third")      # only buffered: lost to SIGKILL
        sys.stdin.read()
        """
    )
    with child:
        assert child.stderr is not None
        seen = [json.loads(child.stderr.readline()) for _ in range(2)]
        child.kill()
        rest = child.stderr.read()
    assert [line["event"] for line in seen] == ["first", "second"]
    assert seen[1]["level"] == "warning" and seen[0]["timestamp"].endswith("Z")
    assert events(rest) == []


def test_the_daemon_flushes_info_lines_without_exiting() -> None:
    child = run_child(
        """
        async def main():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(flush_periodically)
                log.info("audit line")
                await trio.to_thread.run_sync(sys.stdin.read)  # until the test kills us
        trio.run(main)
        """
    )
    with child:
        assert child.stderr is not None
        line = child.stderr.readline()  # arrives by the periodic flush: the process is still alive
        assert child.poll() is None
        child.kill()
    assert events(line) == ["audit line"]


def test_the_fast_info_line_renders_as_the_structlog_chain_does() -> None:
    child = run_child(
        """
        from broker.config.logsetup import info_line
        fields = {"tool": "Echo__echo", "app": None, "duration_ms": 1.5, "outcome": "ok"}
        log.info("tool_executed", **fields)
        assert info_line("tool_executed", dict(fields))
        configure_logging("json", level="warning", batched=True)
        assert not info_line("tool_executed", dict(fields))  # below the level: structlog decides
        configure_logging("console")
        assert not info_line("tool_executed", dict(fields))
        """
    )
    with child:
        assert child.stderr is not None
        _, err = child.communicate(b"")
    assert child.returncode == 0, err
    chain, fast = (json.loads(line) for line in err.splitlines())
    assert list(chain) == list(fast)  # the same keys in the same order
    del chain["timestamp"], fast["timestamp"]
    assert chain == fast == {"tool": "Echo__echo", "app": None, "duration_ms": 1.5, "outcome": "ok",
                             "event": "tool_executed", "level": "info"}
