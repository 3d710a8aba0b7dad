"""The call log: buffering, flushing, retention, redaction, and surviving ``kill -9``."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sqlite3
import struct
import subprocess
import sys
import textwrap
import time
import zlib
from contextlib import closing
from pathlib import Path
from typing import Any

import msgspec
import pytest
import structlog
import trio

from app_client.wire import ToolResult
from broker.calllog import (
    CALL_LOG_FILE,
    COLUMNS,
    MAX_STRING_CHARS,
    SCHEMA_VERSION,
    CallLog,
    apply_retention,
    make_row,
    open_call_log,
    open_db,
    redact,
)
from broker.config import Settings
from broker.errors import StartupError
from broker.router import CallOutcome


def png_bytes(width: int = 4, height: int = 3) -> bytes:
    """A real (tiny, valid) RGB PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = b"".join(
        b"\x00" + b"".join(bytes([x * 7 % 256, y * 11 % 256, 200]) for x in range(width)) for y in range(height)
    )
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def settings_for(home: Path, **overrides: Any) -> Settings:
    return Settings(home=home, **overrides)


def record(call_log: CallLog, tool: str = "App__Echo", *, outcome: CallOutcome | None = None, **kw: Any) -> None:
    fields: dict[str, Any] = {
        "tool": tool,
        "app": "App",
        "instance": "inst-1",
        "agent": "claude-code/1.0",
        "session": "sess-1",
        "arguments": {"text": "hi"},
        "outcome": outcome or CallOutcome("ok", result=ToolResult(data="hi"), correlation_id=7),
        "duration_ms": 1.5,
    }
    fields.update(kw)
    call_log.record(**fields)


def read_rows(home: Path) -> list[dict[str, Any]]:
    with closing(sqlite3.connect(home / CALL_LOG_FILE)) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute("SELECT * FROM calls ORDER BY id")]


# --- opening ----------------------------------------------------------------------------------


async def test_off_yields_none(tmp_path: Path) -> None:
    async with open_call_log(settings_for(tmp_path, call_log=False)) as call_log:
        assert call_log is None
    assert not (tmp_path / CALL_LOG_FILE).exists()


def test_open_db_creates_schema_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / CALL_LOG_FILE
    with closing(open_db(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {"calls_ts", "calls_tool", "calls_app"} <= indexes
    with closing(open_db(path)):  # opening again is fine
        pass
    if os.name == "posix":
        assert path.stat().st_mode & 0o777 == 0o600


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / CALL_LOG_FILE
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(StartupError, match="newer toolbridge"):
        open_db(path)


def test_garbage_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / CALL_LOG_FILE
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StartupError, match="move the file away"):
        open_db(path)


# --- recording and flushing -------------------------------------------------------------------


async def test_rows_are_written_on_exit(tmp_path: Path) -> None:
    async with open_call_log(settings_for(tmp_path, call_log_flush_interval=60)) as call_log:
        assert call_log is not None
        record(call_log)
        record(
            call_log,
            "App__Fail",
            outcome=CallOutcome("app_error", "disk full", result=ToolResult(success=False, error="disk full"),
                                correlation_id=8),
        )
        record(call_log, "Nope__X", app=None, instance=None, arguments=None,
               outcome=CallOutcome("unknown_tool", "unknown tool 'Nope__X'"))
        assert call_log.buffered == 3
    rows = read_rows(tmp_path)
    assert [r["tool"] for r in rows] == ["App__Echo", "App__Fail", "Nope__X"]
    ok, failed, unknown = rows
    assert ok["is_error"] == 0 and ok["error_kind"] == "ok" and ok["error_message"] is None
    assert ok["correlation_id"] == 7 and ok["agent"] == "claude-code/1.0" and ok["session"] == "sess-1"
    assert json.loads(ok["arguments"]) == {"text": "hi"}
    assert json.loads(ok["result"]) == {"data": "hi"}  # the wire form: defaults left out
    assert ok["duration_ms"] == 1.5 and abs(ok["ts"] - time.time()) < 60
    assert failed["is_error"] == 1 and failed["error_kind"] == "app_error"
    assert failed["error_message"] == "disk full"
    assert json.loads(failed["result"]) == {"success": False, "error": "disk full"}
    assert unknown["app"] is None and unknown["arguments"] is None and unknown["result"] is None
    assert unknown["error_kind"] == "unknown_tool"


async def test_rows_are_flushed_periodically(tmp_path: Path) -> None:
    async with open_call_log(settings_for(tmp_path, call_log_flush_interval=0.02)) as call_log:
        assert call_log is not None
        record(call_log)
        with trio.fail_after(5):
            while not read_rows(tmp_path):  # the writer thread flushes while we wait
                await trio.sleep(0.01)
        assert call_log.buffered == 0 and call_log.written == 1
        record(call_log, "App__Second")
        with trio.fail_after(5):
            while len(read_rows(tmp_path)) < 2:
                await trio.sleep(0.01)


async def test_a_large_result_is_written_at_once_not_held_for_the_interval(tmp_path: Path) -> None:
    # An image result is kept by reference until the writer encodes it: with a long interval,
    # holding every image for it would hold megabytes per call.
    async with open_call_log(settings_for(tmp_path, call_log_flush_interval=3600)) as call_log:
        assert call_log is not None
        record(call_log, "App__Small")
        image = {"type": "image", "data": base64.b64encode(b"x" * 300_000).decode(), "mimeType": "image/png"}
        record(call_log, "App__Shot", outcome=CallOutcome("ok", result=ToolResult(content=[image]), correlation_id=8))
        with trio.fail_after(10):
            while len(read_rows(tmp_path)) < 2:  # long before the hour: the writer was woken
                await trio.sleep(0.01)
        assert call_log.buffered == 0


async def test_record_after_close_is_ignored(tmp_path: Path) -> None:
    async with open_call_log(settings_for(tmp_path)) as call_log:
        assert call_log is not None
    record(call_log)
    assert call_log.buffered == 0


def test_full_buffer_drops_oldest_and_warns(tmp_path: Path) -> None:
    call_log = CallLog(open_db(tmp_path / CALL_LOG_FILE), flush_interval=60, max_buffered=3)
    with structlog.testing.capture_logs() as logs:
        for i in range(5):
            record(call_log, f"App__T{i}")
    assert call_log.dropped == 2 and call_log.buffered == 3
    assert [e["event"] for e in logs] == ["call_log_rows_dropped"]
    assert logs[0]["log_level"] == "warning"
    call_log.start()
    call_log.stop_and_join()
    assert [r["tool"] for r in read_rows(tmp_path)] == ["App__T2", "App__T3", "App__T4"]


def test_unencodable_arguments_do_not_lose_the_row(tmp_path: Path) -> None:
    call_log = CallLog(open_db(tmp_path / CALL_LOG_FILE))
    record(call_log, arguments={"x": object()})
    call_log.start()
    call_log.stop_and_join()
    (row,) = read_rows(tmp_path)
    assert "unencodable" in json.loads(row["arguments"])
    assert row["error_kind"] == "ok"


# --- retention --------------------------------------------------------------------------------


async def test_row_limit_keeps_the_newest(tmp_path: Path) -> None:
    async with open_call_log(settings_for(tmp_path, call_log_max_rows=5, call_log_flush_interval=60)) as call_log:
        assert call_log is not None
        for i in range(12):
            record(call_log, f"App__T{i}")
    assert [r["tool"] for r in read_rows(tmp_path)] == [f"App__T{i}" for i in range(7, 12)]


def test_retention_across_flushes(tmp_path: Path) -> None:
    with closing(open_db(tmp_path / CALL_LOG_FILE)) as conn:
        now = time.time()
        for batch in range(3):
            rows = [make_row((now, f"A__{batch}_{i}", "A", None, None, None, {}, CallOutcome("ok"), 1.0))
                    for i in range(4)]
            conn.executemany(
                "INSERT INTO calls (ts, tool, app, instance, agent, session, correlation_id, arguments, "
                "result, duration_ms, is_error, error_kind, error_message) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                rows,
            )
            apply_retention(conn, max_rows=6, max_age_days=0, now=now)
        tools = [r[0] for r in conn.execute("SELECT tool FROM calls ORDER BY id")]
        assert tools == ["A__1_2", "A__1_3", "A__2_0", "A__2_1", "A__2_2", "A__2_3"]
        assert apply_retention(conn, max_rows=0, max_age_days=0, now=now) == 0  # both limits off


async def test_old_rows_are_deleted_at_start(tmp_path: Path) -> None:
    now = time.time()
    with closing(open_db(tmp_path / CALL_LOG_FILE)) as conn:
        for age_days, tool in ((40, "A__old"), (31, "A__older_than_30"), (2, "A__recent")):
            row = make_row((now - age_days * 86400, tool, "A", None, None, None, {}, CallOutcome("ok"), 1.0))
            conn.execute(
                "INSERT INTO calls (ts, tool, app, instance, agent, session, correlation_id, arguments, "
                "result, duration_ms, is_error, error_kind, error_message) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                row,
            )
    async with open_call_log(settings_for(tmp_path, call_log_max_age_days=30)) as call_log:
        assert call_log is not None
        with trio.fail_after(5):
            while len(read_rows(tmp_path)) != 1:
                await trio.sleep(0.01)
    assert [r["tool"] for r in read_rows(tmp_path)] == ["A__recent"]


# --- redaction --------------------------------------------------------------------------------


def test_redact_replaces_images_audio_and_blobs() -> None:
    png = png_bytes()
    audio = b"RIFF" + bytes(range(256)) * 4
    value = {
        "content": [
            {"type": "text", "text": "here you go"},
            {"type": "image", "mimeType": "image/png", "data": base64.b64encode(png).decode()},
            {"type": "audio", "mimeType": "audio/wav", "data": base64.b64encode(audio).decode()},
            {"type": "resource", "resource": {"uri": "file:///x.png", "mimeType": "image/png",
                                              "blob": base64.b64encode(png).decode()}},
        ]
    }
    original = json.dumps(value)
    out = redact(value)
    assert json.dumps(value) == original  # input untouched
    text, image, sound, resource = out["content"]
    assert text == {"type": "text", "text": "here you go"}
    assert image == {"type": "image", "mimeType": "image/png", "bytes": len(png),
                     "sha256": hashlib.sha256(png).hexdigest()}
    assert sound == {"type": "audio", "mimeType": "audio/wav", "bytes": len(audio),
                     "sha256": hashlib.sha256(audio).hexdigest()}
    assert resource["resource"] == {"uri": "file:///x.png", "mimeType": "image/png", "bytes": len(png),
                                    "sha256": hashlib.sha256(png).hexdigest()}


def test_redact_truncates_long_strings_and_survives_bad_base64() -> None:
    long = "x" * (MAX_STRING_CHARS + 10)
    out = redact({"a": [long, "short"], "img": {"type": "image", "data": "not base64!!"}})
    assert out["a"][1] == "short"
    assert out["a"][0].startswith("x" * MAX_STRING_CHARS)
    assert f"{MAX_STRING_CHARS + 10} characters" in out["a"][0]
    assert len(out["a"][0]) < MAX_STRING_CHARS + 100
    assert out["img"]["bytes"] is None and "sha256" in out["img"] and "data" not in out["img"]


@pytest.mark.parametrize(
    "value",
    [
        {"path": "a.txt", "count": 3, "nested": [{"data": "not binary"}, None, 1.5]},
        ToolResult(content=[{"type": "text", "text": "an image of a cat"}], data={"k": "v"}),
        ToolResult(content=[{"type": "image", "mimeType": "image/png", "data": "aGk="}]),
        {"type": "audio", "data": "aGk="},
        {"resource": {"uri": "file:///x", "blob": "aGk="}},
        {"text": "x" * (MAX_STRING_CHARS - 20)},  # just under the limit: may be kept as it is
        {"text": "x" * (MAX_STRING_CHARS + 1)},
        ["é" * (MAX_STRING_CHARS // 2 + 1)],  # few characters, more bytes than the limit
    ],
)
def test_stored_json_is_the_redacted_value_whichever_path_encodes_it(value: Any) -> None:
    outcome = CallOutcome("ok", result=value if isinstance(value, ToolResult) else None)
    arguments = None if isinstance(value, ToolResult) else value
    row = dict(zip(COLUMNS, make_row((0.0, "A__t", "A", None, None, None, arguments, outcome, 1.0))))
    stored = json.loads(row["result"] if arguments is None else row["arguments"])
    assert stored == redact(json.loads(msgspec.json.encode(value)))


async def test_stored_result_has_no_image_bytes(tmp_path: Path) -> None:
    png = png_bytes(64, 64)
    encoded = base64.b64encode(png).decode()
    result = ToolResult(
        content=[{"type": "image", "mimeType": "image/png", "data": encoded}],
        structured_content={"log": "y" * (MAX_STRING_CHARS * 2)},
    )
    async with open_call_log(settings_for(tmp_path)) as call_log:
        assert call_log is not None
        record(call_log, "App__Screenshot", arguments={"note": "z" * (MAX_STRING_CHARS + 1)},
               outcome=CallOutcome("ok", result=result, correlation_id=1))
    (row,) = read_rows(tmp_path)
    assert encoded not in row["result"]
    stored = json.loads(row["result"])
    assert stored["content"] == [{"type": "image", "mimeType": "image/png", "bytes": len(png),
                                  "sha256": hashlib.sha256(png).hexdigest()}]
    assert f"{MAX_STRING_CHARS * 2} characters" in stored["structuredContent"]["log"]
    assert f"{MAX_STRING_CHARS + 1} characters" in json.loads(row["arguments"])["note"]


# --- kill -9 ----------------------------------------------------------------------------------

_DAEMON_LIKE = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import trio

    from app_client.wire import ToolResult
    from broker.calllog import open_call_log
    from broker.config import Settings
    from broker.router import CallOutcome

    async def main():
        settings = Settings(home=Path(sys.argv[1]), call_log_flush_interval=0.05)
        async with open_call_log(settings) as call_log:
            for i in range(int(sys.argv[2])):
                call_log.record(tool=f"App__T{i}", app="App", instance="i", agent="a", session="s",
                                arguments={"i": i}, outcome=CallOutcome("ok", result=ToolResult(data=i)),
                                duration_ms=0.1)
            await trio.sleep_forever()

    trio.run(main)
    """
)


def _count(path: Path) -> int:
    if not path.exists():
        return 0
    try:
        with closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as conn:
            return int(conn.execute("SELECT count(*) FROM calls").fetchone()[0])
    except sqlite3.OperationalError:  # file created, schema not yet
        return 0


def test_database_survives_kill_9(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = 500
    path = tmp_path / CALL_LOG_FILE
    with subprocess.Popen([sys.executable, "-c", _DAEMON_LIKE, str(tmp_path), str(rows)]) as proc:
        try:
            deadline = time.monotonic() + 10
            while _count(path) < rows:
                assert proc.poll() is None, "the writer process died"
                assert time.monotonic() < deadline, "rows never reached the database"
                time.sleep(0.02)
        finally:
            proc.kill()  # SIGKILL on POSIX: no finally blocks, no close, no checkpoint
    assert proc.returncode != 0

    # `toolbridge logs` reads the crashed database read-only, WAL and all.
    from broker.cli import main

    assert main(["logs", "--home", str(tmp_path), "--limit", "0", "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == rows and json.loads(lines[-1])["arguments"] == {"i": rows - 1}

    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT count(*) FROM calls").fetchone()[0] == rows
    with closing(open_db(path)) as conn:  # and the daemon can open it again
        assert conn.execute("SELECT max(id) FROM calls").fetchone()[0] == rows


async def test_the_router_records_into_the_log(tmp_path: Path) -> None:
    from broker.core import BrokerCore
    from broker.router import CallerInfo

    settings = settings_for(tmp_path)
    async with open_call_log(settings) as call_log:
        core = BrokerCore(settings, "token", call_log)
        caller = CallerInfo(client_name="inspector", client_version="0.9", session="s-42")
        outcome = await core.router.call_tool("Ghost__Boo", {"path": "a"}, caller=caller)
        assert outcome.kind == "unknown_tool"
    (row,) = read_rows(tmp_path)
    assert (row["tool"], row["agent"], row["session"]) == ("Ghost__Boo", "inspector/0.9", "s-42")
    assert row["error_kind"] == "unknown_tool" and row["is_error"] == 1
    assert row["error_message"] == outcome.message and json.loads(row["arguments"]) == {"path": "a"}


async def test_rows_are_written_when_the_exit_is_cancelled(tmp_path: Path) -> None:
    with trio.CancelScope() as scope:
        async with open_call_log(settings_for(tmp_path, call_log_flush_interval=60)) as call_log:
            assert call_log is not None
            record(call_log)
            scope.cancel()
            await trio.sleep_forever()
    assert scope.cancelled_caught
    assert [r["tool"] for r in read_rows(tmp_path)] == ["App__Echo"]


def test_a_large_content_block_wakes_the_writer_at_once() -> None:
    from broker.calllog import _LARGE_CONTENT_CHARS, _holds_large_content

    big = "A" * _LARGE_CONTENT_CHARS

    def holds(*blocks: Any) -> bool:
        return _holds_large_content(CallOutcome("ok", result=ToolResult(content=list(blocks))))

    assert holds({"type": "image", "mimeType": "image/png", "data": big})
    assert holds({"type": "text", "text": "small"}, {"type": "resource", "resource": {"uri": "x", "blob": big}})
    assert not holds({"type": "text", "text": big[:-1]}, {"type": "resource", "resource": "not an object"})
    assert not _holds_large_content(CallOutcome("ok")) and not holds()
