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
from broker.core.calllog import (
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
from broker.config.settings import Settings
from broker.errors import StartupError
from broker.core.router import CallOutcome


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
            await call_log.wait_written(1)  # the writer thread flushes while we wait
        assert len(read_rows(tmp_path)) == 1
        assert call_log.buffered == 0 and call_log.written == 1
        record(call_log, "App__Second")
        with trio.fail_after(5):
            await call_log.wait_written(2)
        assert len(read_rows(tmp_path)) == 2


async def test_a_large_result_is_written_at_once_not_held_for_the_interval(tmp_path: Path) -> None:
    # An image result is kept by reference until the writer encodes it: with a long interval,
    # holding every image for it would hold megabytes per call.
    async with open_call_log(settings_for(tmp_path, call_log_flush_interval=3600)) as call_log:
        assert call_log is not None
        record(call_log, "App__Small")
        image = {"type": "image", "data": base64.b64encode(b"x" * 300_000).decode(), "mimeType": "image/png"}
        record(call_log, "App__Shot", outcome=CallOutcome("ok", result=ToolResult(content=[image]), correlation_id=8))
        with trio.fail_after(10):
            await call_log.wait_written(2)  # long before the hour: the writer was woken
        assert len(read_rows(tmp_path)) == 2
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
    async with open_call_log(settings_for(tmp_path, call_log_max_age_days=30, call_log_flush_interval=0.01)) as call_log:
        assert call_log is not None
        record(call_log, "A__new")
        with trio.fail_after(5):
            await call_log.wait_written(1)  # the writer applies retention at start, before any write
        assert [r["tool"] for r in read_rows(tmp_path)] == ["A__recent", "A__new"]


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
    from broker.core.calllog import open_call_log
    from broker.config.settings import Settings
    from broker.core.router import CallOutcome

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
    from broker.daemon.broker_core import BrokerCore
    from broker.core.router import CallerInfo

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
    from broker.core.calllog import _LARGE_CONTENT_CHARS, _holds_large_content

    big = "A" * _LARGE_CONTENT_CHARS

    def holds(*blocks: Any) -> bool:
        return _holds_large_content(CallOutcome("ok", result=ToolResult(content=list(blocks))))

    assert holds({"type": "image", "mimeType": "image/png", "data": big})
    assert holds({"type": "text", "text": "small"}, {"type": "resource", "resource": {"uri": "x", "blob": big}})
    assert not holds({"type": "text", "text": big[:-1]}, {"type": "resource", "resource": "not an object"})
    assert not _holds_large_content(CallOutcome("ok")) and not holds()


# --- call_log_redact ----------------------------------------------------------------------------

SECRET = "hunter2-SECRET-7c1f"
SECRET_NUMBER = 987_654_321


def test_redact_values_keeps_keys_and_lengths_and_no_value() -> None:
    from broker.core.calllog import redact_values

    value = {"pin": SECRET, "n": SECRET_NUMBER, "f": 2.5, "ok": True, "none": None,
             "nested": {"tags": [SECRET, "x", 7], "empty": {}}}
    assert redact_values(value) == {
        "pin": f"<redacted: {len(SECRET)} chars>", "n": "<redacted>", "f": "<redacted>", "ok": "<redacted>",
        "none": None, "nested": {"tags": [f"<redacted: {len(SECRET)} chars>", "<redacted: 1 chars>", "<redacted>"],
                                 "empty": {}},
    }


def test_a_redacted_row_keeps_the_shape_of_the_result_and_daemon_messages() -> None:
    from broker.core.calllog import make_redacted_row

    png = png_bytes()
    result = ToolResult(
        success=True,
        data={"echo": SECRET},
        content=[
            {"type": "text", "text": f"your pin is {SECRET}"},
            {"type": "image", "mimeType": "image/png", "data": base64.b64encode(png).decode()},
            {"type": "resource", "resource": {"uri": f"file:///{SECRET}", "blob": base64.b64encode(png).decode()}},
            {"type": "resource_link", "uri": f"file:///{SECRET}.txt", "name": SECRET},
        ],
        structured_content={"pin": SECRET, "n": SECRET_NUMBER},
    )

    def row(arguments: Any, outcome: CallOutcome) -> dict[str, Any]:
        return dict(zip(COLUMNS, make_redacted_row((0.0, "A__t", "A", "i", "ag", "s", arguments, outcome, 1.5))))

    ok = row({"pin": SECRET}, CallOutcome("ok", result=result, correlation_id=3))
    assert SECRET not in repr(ok) and str(SECRET_NUMBER) not in repr(ok)
    assert (ok["tool"], ok["correlation_id"], ok["duration_ms"], ok["error_kind"]) == ("A__t", 3, 1.5, "ok")
    assert json.loads(ok["arguments"]) == {"pin": f"<redacted: {len(SECRET)} chars>"}
    stored = json.loads(ok["result"])
    assert stored["data"] == {"echo": f"<redacted: {len(SECRET)} chars>"}
    assert stored["structuredContent"] == {"pin": f"<redacted: {len(SECRET)} chars>", "n": "<redacted>"}
    text, image, resource, link = stored["content"]
    assert text == {"type": "text", "text": f"<redacted: {len(SECRET) + 12} chars>"}
    assert image == {"type": "image", "mimeType": "<redacted: 9 chars>", "data": f"<redacted: {len(png)} bytes>"}
    assert resource == {"type": "resource", "resource": {"uri": f"<redacted: {len(SECRET) + 8} chars>",
                                                         "blob": f"<redacted: {len(png)} bytes>"}}
    assert link["type"] == "resource_link" and link["name"] == f"<redacted: {len(SECRET)} chars>"
    assert hashlib.sha256(png).hexdigest() not in ok["result"]  # no fingerprint of a binary either

    # An app's error text (by result or by kind) and a schema error quoting the value: redacted.
    app_error = row(None, CallOutcome("app_error", f"pin {SECRET} refused",
                                      result=ToolResult(success=False, error=f"pin {SECRET} refused")))
    assert app_error["error_message"] == f"<redacted: {len(SECRET) + 12} chars>"
    assert json.loads(app_error["result"]) == {"success": False, "error": f"<redacted: {len(SECRET) + 12} chars>"}
    reported = row(None, CallOutcome("timeout", SECRET, result=ToolResult(success=False, error=SECRET,
                                                                          error_kind="timeout")))
    assert SECRET not in repr(reported)
    invalid = row({"x": SECRET}, CallOutcome("invalid_arguments", f"$.x: '{SECRET}' is not of type 'integer'"))
    assert SECRET not in repr(invalid) and invalid["error_message"].startswith("<redacted: ")
    # The daemon's own messages name tools, kinds and numbers only: they stay readable.
    timeout = row({"pin": SECRET}, CallOutcome("timeout", "A__t timed out after 30 s; the app was asked to stop"))
    assert timeout["error_message"] == "A__t timed out after 30 s; the app was asked to stop"
    unencodable = row({"when": object()}, CallOutcome("ok"))
    assert json.loads(unencodable["arguments"]) == {"unencodable": "dict"}


def test_call_log_redact_comes_from_file_and_environment(tmp_path: Path) -> None:
    from broker.config.settings_file import load_settings

    assert Settings().call_log_redact is False
    (tmp_path / "config.toml").write_text("call_log_redact = true\n")
    assert load_settings(None, tmp_path, {}).call_log_redact is True
    assert load_settings(None, tmp_path, {"TOOLBRIDGE_CALL_LOG_REDACT": "off"}).call_log_redact is False
    (tmp_path / "config.toml").unlink()
    assert load_settings(None, tmp_path, {"TOOLBRIDGE_CALL_LOG_REDACT": "1"}).call_log_redact is True


def _raw_log_bytes(home: Path) -> bytes:
    """Every byte of the call log as it is on disk: the database and its WAL (and shm)."""
    return b"".join(p.read_bytes() for p in sorted(home.glob(CALL_LOG_FILE + "*")))


@pytest.mark.parametrize("redact_on", [True, False])
async def test_call_log_redact_leaves_no_secret_on_disk_or_in_logs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], redact_on: bool
) -> None:
    """A real daemon and a raw-socket app: with ``call_log_redact`` a secret string, number and
    nested object, echoed in the app's result and quoted by its errors, reaches neither the
    database files nor ``toolbridge logs``; the shape, outcome, tool and duration do. Off, the
    values are stored as before (which also shows the byte search can find them)."""
    from broker.cli import main
    from broker.daemon.run import run_daemon
    from rawapp import CLICK_TOOL, ECHO_TOOL, RawApp

    home = tmp_path / "home"
    arguments = {"text": SECRET, "amount": SECRET_NUMBER,
                 "card": {"holder": SECRET, "cvv": 4242, "tags": [SECRET, True, None]}}
    shutdown = trio.Event()
    async with trio.open_nursery() as nursery:
        settings = Settings(home=home, port=0, http_port=None, call_log_flush_interval=0.02,
                            call_log_redact=redact_on)
        info = await nursery.start(lambda task_status: run_daemon(settings, shutdown=shutdown,
                                                                  task_status=task_status))
        app = await RawApp.connect(info.port)
        assert (await app.register(info.token, tools=[ECHO_TOOL, CLICK_TOOL]))["type"] == "registered"
        answers = [
            {"type": "toolResponse", "result": {
                "success": True, "data": {"echo": SECRET, "n": SECRET_NUMBER},
                "content": [{"type": "text", "text": f"pin {SECRET}"},
                            {"type": "resource_link", "uri": f"file:///{SECRET}", "name": SECRET}],
                "structuredContent": {"card": {"holder": SECRET, "amount": SECRET_NUMBER}}}},
            {"type": "error", "code": "bad_pin", "message": f"pin {SECRET} refused"},
            {"type": "toolResponse", "result": {"success": False, "error": f"card {SECRET} declined"}},
        ]
        outcomes: list[CallOutcome] = []
        for answer in answers:
            async with trio.open_nursery() as calls:
                async def agent() -> None:
                    outcomes.append(await info.core.router.call_tool("WatchTower__Echo", arguments))

                calls.start_soon(agent)
                invocation = await app.recv_type("toolInvocation")
                await app.send({**answer, "correlationId": invocation["correlationId"]})
        # A schema error quotes the value; the daemon's own message for an unknown tool does not.
        outcomes.append(await info.core.router.call_tool("WatchTower__ClickElement", {"x": SECRET, "y": 1}))
        outcomes.append(await info.core.router.call_tool("WatchTower__Gone", arguments))
        assert [o.kind for o in outcomes] == ["ok", "app_error", "app_error", "invalid_arguments", "unknown_tool"]
        assert SECRET in outcomes[1].message and SECRET in outcomes[3].message  # the agent still gets them

        call_log = info.core.call_log
        assert call_log is not None
        with trio.fail_after(10):
            await call_log.wait_written(len(outcomes))
        raw_while_running = _raw_log_bytes(home)
        assert (home / (CALL_LOG_FILE + "-wal")).exists()
        shutdown.set()
    raw_after_exit = _raw_log_bytes(home)
    capsys.readouterr()  # the daemon's own log lines

    assert main(["logs", "--home", str(home), "--json", "--limit", "0"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main(["logs", "--home", str(home), "--limit", "0"]) == 0
    table = capsys.readouterr().out
    secrets = [SECRET, str(SECRET_NUMBER)]
    assert [r["tool"] for r in rows] == ["WatchTower__Echo"] * 3 + ["WatchTower__ClickElement", "WatchTower__Gone"]
    assert [r["error_kind"] for r in rows] == [o.kind for o in outcomes]
    assert [r["is_error"] for r in rows] == [False, True, True, True, True]
    assert all(r["duration_ms"] >= 0 for r in rows) and rows[0]["correlation_id"] is not None
    assert rows[4]["error_message"].startswith("unknown tool 'WatchTower__Gone'")
    if not redact_on:
        for secret in secrets:
            assert secret.encode() in raw_while_running and secret.encode() in raw_after_exit
        assert rows[0]["arguments"] == arguments
        assert rows[0]["result"]["structuredContent"] == {"card": {"holder": SECRET, "amount": SECRET_NUMBER}}
        assert SECRET in rows[1]["error_message"] and SECRET in table
        return

    for secret in secrets:
        assert secret.encode() not in raw_while_running
        assert secret.encode() not in raw_after_exit
        assert secret not in json.dumps(rows) and secret not in table
    chars = f"<redacted: {len(SECRET)} chars>"
    assert rows[0]["arguments"] == {"text": chars, "amount": "<redacted>",
                                    "card": {"holder": chars, "cvv": "<redacted>", "tags": [chars, "<redacted>", None]}}
    assert rows[0]["result"] == {
        "data": {"echo": chars, "n": "<redacted>"},
        "content": [{"type": "text", "text": f"<redacted: {len(SECRET) + 4} chars>"},
                    {"type": "resource_link", "uri": f"<redacted: {len(SECRET) + 8} chars>", "name": chars}],
        "structuredContent": {"card": {"holder": chars, "amount": "<redacted>"}},
    }
    assert rows[1]["error_message"] == f"<redacted: {len(outcomes[1].message)} chars>"
    assert rows[2]["result"] == {"success": False, "error": f"<redacted: {len(SECRET) + 14} chars>"}
    assert rows[3]["arguments"] == {"x": chars, "y": "<redacted>"}
    assert f"<redacted: {len(outcomes[3].message)} chars>" in table  # the table says what it hides
