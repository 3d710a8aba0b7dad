"""``toolbridge logs``: filters, output formats, the missing-log hint, and ``--follow``."""

from __future__ import annotations

import argparse
import io
import json
import os
import queue
import re
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from app_client.wire import ToolResult
from broker.core.calllog import CALL_LOG_FILE, COLUMNS, make_row, open_db
from broker.cli import main
from broker.cli.logs_command import LogFilter, connect_readonly, follow, parse_since
from broker.core.router import CallOutcome

_INSERT = f"INSERT INTO calls ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
#: The rows' reference time: set by the ``home`` fixture when it writes them, so a slow suite
#: (collected long before this file's tests run) cannot move rows across a ``--since`` bound.
NOW = time.time()


def add_call(
    conn: sqlite3.Connection,
    tool: str,
    *,
    app: str | None = "WatchTower",
    instance: str | None = "main",
    outcome: CallOutcome | None = None,
    age_s: float = 0.0,
    arguments: Any = None,
    duration_ms: float = 12.5,
    session: str | None = "sess",
) -> None:
    outcome = outcome or CallOutcome("ok", result=ToolResult(data={"clicked": True}), correlation_id=1)
    pending = (NOW - age_s, tool, app, instance, "claude-code/2.0", session, arguments or {}, outcome, duration_ms)
    conn.execute(_INSERT, make_row(pending))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    global NOW
    NOW = time.time()
    with closing(open_db(tmp_path / CALL_LOG_FILE)) as conn:
        add_call(conn, "WatchTower__ClickElement", age_s=3 * 3600, arguments={"id": "ok-button"})
        add_call(conn, "WatchTower__TypeText", age_s=1800,
                 outcome=CallOutcome("timeout", "WatchTower__TypeText timed out after 30 s; the app was "
                                     "asked to stop.\nRetry.", correlation_id=2), duration_ms=30500)
        add_call(conn, "Paint__Draw", app="Paint", instance="9f3c2a7b1e4d4c0f8a6b5d3e2f1a0b9c", age_s=60,
                 session="0123456789abcdef0123")
        add_call(conn, "Nope__Thing", app=None, instance=None, age_s=5,
                 outcome=CallOutcome("unknown_tool", "unknown tool 'Nope__Thing'"), duration_ms=0.2)
    return tmp_path


def logs(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    assert main(["logs", *args]) == 0
    return capsys.readouterr().out.splitlines()


def test_human_output(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = logs(capsys, "--home", str(home))
    assert len(lines) == 4
    click, typed, draw, nope = lines
    assert click.startswith(datetime.fromtimestamp(NOW - 3 * 3600).strftime("%Y-%m-%d %H:%M:%S"))
    assert "12.5ms" in click and " ok " in click
    assert click.split()[-4:] == ["WatchTower__ClickElement", "WatchTower/main", "claude-code/2.0", "sess"]
    assert "30.50s" in typed and "timeout" in typed
    assert typed.endswith("WatchTower__TypeText timed out after 30 s; the app was asked to stop. Retry.")
    # Issue 30 item 9: long instance and session ids are shortened, the agent and its session shown.
    assert draw.split()[-3:] == ["Paint/9f3c2a7b", "claude-code/2.0", "01234567"]
    assert "unknown_tool" in nope and re.search(r"claude-code/2.0 sess +unknown tool 'Nope__Thing'$", nope)
    # Columns line up: each starts at the same place on every line.
    for column in ("WatchTower__", "claude-code/2.0"):
        starts = {line.index(column) for line in (click, typed)}
        assert len(starts) == 1, column
    assert len({line.index("claude-code/2.0") for line in lines}) == 1


def test_limit_keeps_the_newest_printed_oldest_first(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = logs(capsys, "--home", str(home), "--limit", "2")
    assert ["Paint__Draw" in lines[0], "Nope__Thing" in lines[1]] == [True, True]
    assert len(logs(capsys, "--home", str(home), "--limit", "0")) == 4


def test_json_lines_have_every_field(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [json.loads(line) for line in logs(capsys, "--home", str(home), "--json")]
    assert len(rows) == 4
    first = rows[0]
    assert set(COLUMNS) | {"id", "time"} <= set(first)
    assert first["arguments"] == {"id": "ok-button"}
    assert first["result"] == {"data": {"clicked": True}}
    assert first["is_error"] is False and first["error_kind"] == "ok"
    assert first["agent"] == "claude-code/2.0" and first["correlation_id"] == 1
    assert datetime.fromisoformat(first["time"]).timestamp() == pytest.approx(first["ts"], abs=0.001)
    assert rows[1]["is_error"] is True and rows[1]["error_kind"] == "timeout"
    assert rows[1]["error_message"].startswith("WatchTower__TypeText timed out")


def test_errors_filter(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = logs(capsys, "--home", str(home), "--errors")
    assert len(lines) == 2 and "timeout" in lines[0] and "unknown_tool" in lines[1]


def test_id_filter_finds_the_call_the_status_page_names(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The status page's "full record" hint is `toolbridge logs --id N --json`.
    rows = [json.loads(line) for line in logs(capsys, "--home", str(home), "--id", "2", "--json")]
    assert [row["tool"] for row in rows] == ["WatchTower__TypeText"] and rows[0]["correlation_id"] == 2


def test_since_filter(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert len(logs(capsys, "--home", str(home), "--since", "2h")) == 3
    assert len(logs(capsys, "--home", str(home), "--since", "10m")) == 2
    assert len(logs(capsys, "--home", str(home), "--since", "1d")) == 4
    iso = datetime.fromtimestamp(NOW - 120).isoformat(timespec="seconds")
    assert len(logs(capsys, "--home", str(home), "--since", iso)) == 2


def test_parse_since() -> None:
    assert parse_since("90s", now=1000.0) == 910.0
    assert parse_since("1.5h", now=10_000.0) == 10_000.0 - 5400
    assert parse_since("2025-01-31T14:00:00+00:00") == datetime.fromisoformat("2025-01-31T14:00:00+00:00").timestamp()
    with pytest.raises(argparse.ArgumentTypeError):
        parse_since("yesterday")


def test_bad_since_is_a_usage_error(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["logs", "--home", str(home), "--since", "soon"])
    assert exc.value.code == 2
    assert "invalid --since" in capsys.readouterr().err


def test_tool_and_app_filters(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def tools(*args: str) -> list[str]:
        return [json.loads(line)["tool"] for line in logs(capsys, "--home", str(home), "--json", *args)]

    assert tools("--tool", "WatchTower__TypeText") == ["WatchTower__TypeText"]
    assert tools("--tool", "Draw") == ["Paint__Draw"]  # the tool's own name under any app
    assert tools("--tool", "WatchTower__*") == ["WatchTower__ClickElement", "WatchTower__TypeText"]
    assert tools("--tool", "*Thing") == ["Nope__Thing"]
    assert tools("--tool", "Typ") == []
    assert tools("--app", "Paint") == ["Paint__Draw"]
    assert tools("--app", "Watch*", "--errors") == ["WatchTower__TypeText"]


def test_missing_log_prints_a_hint_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["logs", "--home", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == (
        f"no calls logged yet in {tmp_path}; is the daemon running with the call log on?"
    )


def test_home_from_environment(home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLBRIDGE_HOME", str(home))
    assert len(logs(capsys)) == 4


def test_reading_does_not_write(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in home.iterdir()}
    logs(capsys, "--home", str(home))
    with closing(connect_readonly(home / CALL_LOG_FILE)) as conn:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("DELETE FROM calls")
    assert {p.name: p.stat().st_mtime_ns for p in home.iterdir() if p.name in before} == before


def test_follow_prints_new_rows(home: Path) -> None:
    out = io.StringIO()
    with closing(connect_readonly(home / CALL_LOG_FILE)) as reader, closing(open_db(home / CALL_LOG_FILE)) as writer:
        polls: list[float] = []

        def sleep(seconds: float) -> None:  # between polls: the daemon logs more calls
            polls.append(seconds)
            add_call(writer, f"Paint__Stroke{len(polls)}", app="Paint")
            add_call(writer, f"WatchTower__Hidden{len(polls)}")

        last = follow(reader, LogFilter(app="Paint"), after_id=4, out=out, sleep=sleep, max_polls=3)
    lines = out.getvalue().splitlines()
    assert [line.split()[-4] for line in lines] == ["Paint__Stroke1", "Paint__Stroke2"]
    assert polls == [0.5, 0.5, 0.5]
    assert last == 7  # the id of Paint__Stroke2


def test_follow_stop_condition(home: Path) -> None:
    out = io.StringIO()
    with closing(connect_readonly(home / CALL_LOG_FILE)) as reader:
        assert follow(reader, LogFilter(), after_id=0, out=out, stop=lambda: bool(out.getvalue()),
                      sleep=lambda s: None) == 4
    assert len(out.getvalue().splitlines()) == 4


def test_follow_as_a_process(home: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TOOLBRIDGE_HOME"}
    cmd = [sys.executable, "-m", "broker", "logs", "--home", str(home), "--follow", "--json", "--limit", "1"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as proc:
        lines: queue.Queue[str] = queue.Queue()
        assert proc.stdout is not None
        reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True)  # type: ignore[union-attr]
        reader.start()
        try:
            assert json.loads(lines.get(timeout=10))["tool"] == "Nope__Thing"
            with closing(open_db(home / CALL_LOG_FILE)) as writer:
                add_call(writer, "Paint__Fresh", app="Paint")
            row = json.loads(lines.get(timeout=10))
            assert row["tool"] == "Paint__Fresh" and row["id"] == 5
        finally:
            proc.terminate()
            proc.wait(timeout=10)
        reader.join(timeout=10)


def test_no_match_says_so_on_stderr(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["logs", "--home", str(home), "--tool", "Nothing__Here"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("no matching calls in ")
