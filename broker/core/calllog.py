"""The call log: every tool call, success or failure, as one row of ``<home>/calls.sqlite3``.

Theory of operation
-------------------
:meth:`CallLog.record` runs on the event loop at the end of every call, so it does almost
nothing: it appends a tuple of references (wall-clock time, names, the arguments object, the
:class:`~broker.core.router.CallOutcome`) to an in-memory :class:`collections.deque`. No encoding,
no hashing, no I/O. The buffer is bounded (:data:`MAX_BUFFERED_ROWS`): if the writer falls that
far behind, the oldest rows are dropped, counted, and a warning is logged.

One dedicated writer thread, owned by :func:`open_call_log`, does everything else. Every
``call_log_flush_interval`` seconds (0.5 s by default; sooner if :data:`EARLY_FLUSH_ROWS` rows
pile up, and at once for a result with a large content string, an image say, so that megabytes
are not held for the interval) it drains the buffer, turns each tuple into a row — arguments and result encoded as
JSON, image/audio ``data`` and resource ``blob`` base64 replaced by their type, size and SHA-256,
any string over :data:`MAX_STRING_CHARS` characters truncated — and inserts the batch plus the
retention deletes in one transaction.

With ``call_log_redact`` on, the writer builds rows with :func:`make_redacted_row` instead:
arguments and results keep their shape (object keys, list lengths, content block types) and lose
every value (:func:`redact_values`), and an error message is kept only when the daemon wrote it
from names and numbers alone (:attr:`~broker.core.outcome.OutcomeKind.value_free`, never an
app's text). That walk runs in the writer thread, like all encoding; with the option off the
writer calls :func:`make_row` as before, whose fast path stores the plain encoding when :func:`redact` could not change it.

Why a thread and not ``trio.to_thread.run_sync`` per flush: sqlite3 connections belong to the
thread that uses them, trio's worker threads are pooled and interchangeable, and a
``check_same_thread=False`` connection shared between them would need a lock and still hop
threads on every flush. One long-lived thread with one connection is simpler and obviously
correct: the connection is opened in a trio worker thread (``check_same_thread=False`` only for
that hand-over), then used by the writer thread alone until it closes it. ``deque.append`` and
``deque.popleft`` are atomic, so the event loop and the writer need no lock.

Durability: the database is in WAL mode with ``synchronous=NORMAL``. A commit appends to the
``-wal`` file before it returns, so after ``kill -9`` of the daemon the database opens cleanly
and holds every call up to the last flush, i.e. at most ``call_log_flush_interval`` seconds of
calls are lost. (A power cut may lose the last few commits too; never consistency.)

Retention: after each flush that wrote rows (and at least every :data:`IDLE_RETENTION_SECONDS`
otherwise, and at start-up) rows beyond ``call_log_max_rows`` (the newest are kept) and rows older
than ``call_log_max_age_days`` are deleted. Either limit set to 0 is off. Ids only grow, so the
row limit is one indexed range delete, not a count.

Waiting for rows: :meth:`CallLog.wait_written` lets a task (a test, a tool reading the database)
wait until a number of rows is committed. After each committed batch the writer thread hands
the waiting tasks' events to their trio loop (``TrioToken.run_sync_soon``); with nobody waiting
it only reads an empty list.

The schema version is ``PRAGMA user_version`` (:data:`SCHEMA_VERSION`); a database written by a
newer toolbridge is refused with a :class:`~broker.errors.StartupError` rather than guessed at.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import os
import re
import sqlite3
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec
import structlog
import trio

from ..config.settings import Settings
from ..errors import StartupError
from .b64 import strict_b64decode
from .passthrough import PassthroughResult, plain

if TYPE_CHECKING:
    from .outcome import CallOutcome

__all__ = [
    "CALL_LOG_FILE",
    "SCHEMA_VERSION",
    "CallLog",
    "open_call_log",
    "open_db",
    "apply_retention",
    "redact",
    "redact_values",
    "make_row",
    "make_redacted_row",
]

log = structlog.get_logger("toolbridge.calllog")

CALL_LOG_FILE: Final = "calls.sqlite3"
SCHEMA_VERSION: Final = 1
#: Rows waiting for the writer beyond this are dropped, oldest first.
MAX_BUFFERED_ROWS: Final = 100_000
#: This many rows waiting wakes the writer before its interval is up.
EARLY_FLUSH_ROWS: Final = 10_000
#: Rows per transaction when the writer drains a long buffer.
BATCH_ROWS: Final = 5_000
#: Strings longer than this (in characters) are truncated in the stored JSON.
MAX_STRING_CHARS: Final = 64 * 1024
#: Retention runs at least this often even when no calls arrive.
IDLE_RETENTION_SECONDS: Final = 60.0
_MIN_FLUSH_INTERVAL: Final = 0.01
_BINARY_TYPES: Final = frozenset({"image", "audio"})

COLUMNS: Final = (
    "ts",
    "tool",
    "app",
    "instance",
    "agent",
    "session",
    "correlation_id",
    "arguments",
    "result",
    "duration_ms",
    "is_error",
    "error_kind",
    "error_message",
)

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS calls (
    id INTEGER PRIMARY KEY,
    ts REAL NOT NULL,               -- unix time (wall clock) when the call ended
    tool TEXT NOT NULL,             -- the name the agent called (App__Tool)
    app TEXT,
    instance TEXT,
    agent TEXT,
    session TEXT,
    correlation_id INTEGER,
    arguments TEXT,                 -- JSON
    result TEXT,                    -- JSON of the app's ToolResult, binaries redacted
    duration_ms REAL NOT NULL,
    is_error INTEGER NOT NULL,
    error_kind TEXT NOT NULL,       -- the outcome kind: ok, timeout, app_error, ...
    error_message TEXT
);
CREATE INDEX IF NOT EXISTS calls_ts ON calls (ts);
CREATE INDEX IF NOT EXISTS calls_tool ON calls (tool);
CREATE INDEX IF NOT EXISTS calls_app ON calls (app);
"""
_INSERT: Final = f"INSERT INTO calls ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"

_encoder = msgspec.json.Encoder()

#: What ``record`` buffers: (ts, tool, app, instance, agent, session, arguments, outcome, duration_ms).
_Pending = tuple[float, str, "str | None", "str | None", "str | None", "str | None", Any, "CallOutcome", float]


# --- pure helpers (no threads; tests call them directly) ----------------------------------------


def _truncate(text: str) -> str:
    if len(text) <= MAX_STRING_CHARS:
        return text
    return text[:MAX_STRING_CHARS] + f"... [truncated: {len(text)} characters in all]"


def _binary_summary(block: dict[str, Any], key: str) -> dict[str, Any]:
    """``block`` without its base64 ``key``, plus the decoded size and SHA-256 in its place."""
    encoded = block[key]
    try:
        raw = base64.b64decode(encoded, validate=True)
        summary: dict[str, Any] = {"bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
    except (binascii.Error, ValueError):
        summary = {
            "bytes": None,
            "sha256": hashlib.sha256(encoded.encode("utf-8", "surrogatepass")).hexdigest(),
            "invalidBase64": len(encoded),
        }
    out = {k: redact(v) for k, v in block.items() if k != key}
    out.update(summary)
    return out


#: Rows encoded between two GIL releases in the writer thread.
_ROWS_PER_GIL_SLICE: Final = 32
#: A content string this long makes the writer flush at once rather than hold it.
_LARGE_CONTENT_CHARS: Final = 256 * 1024


def _holds_large_content(outcome: CallOutcome) -> bool:
    result = outcome.result
    if isinstance(result, PassthroughResult):
        return len(result.raw_content) >= _LARGE_CONTENT_CHARS
    if result is None or not result.content:
        return False
    for block in result.content:
        if not isinstance(block, dict):
            continue
        resource = block.get("resource")
        for values in (block.values(), resource.values() if isinstance(resource, dict) else ()):
            for value in values:
                if isinstance(value, str) and len(value) >= _LARGE_CONTENT_CHARS:
                    return True
    return False


def redact(value: Any) -> Any:
    """A JSON value fit for the log: binaries summarised, long strings truncated.

    MCP content blocks of type ``image`` or ``audio`` lose their base64 ``data``, and resource
    contents lose their base64 ``blob``; each gets ``bytes`` (decoded size) and ``sha256`` (of
    the decoded bytes) instead. Any other string over :data:`MAX_STRING_CHARS` is cut, with the
    original length noted. Returns new objects; ``value`` is not changed.
    """
    if isinstance(value, str):
        return _truncate(value)
    if isinstance(value, dict):
        if value.get("type") in _BINARY_TYPES and isinstance(value.get("data"), str):
            return _binary_summary(value, "data")
        if isinstance(value.get("blob"), str):
            return _binary_summary(value, "blob")
        return {k: redact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    return value


def _redact_changes(encoded: bytes) -> bool:
    """Whether :func:`redact` could change the value that encodes to ``encoded``.

    It changes only strings over MAX_STRING_CHARS characters (impossible in an encoding no longer
    than that), blocks with a ``blob``, and ``image``/``audio`` blocks with ``data``: a short
    encoding without those words is stored as it is, skipping a copy of the whole value.
    """
    return (
        len(encoded) > MAX_STRING_CHARS
        or b'"blob"' in encoded
        or (b'"data"' in encoded and (b'"image"' in encoded or b'"audio"' in encoded))
    )


def _to_json(value: Any) -> str | None:
    if value is None:
        return None
    try:
        encoded = _encoder.encode(value)
    except (TypeError, ValueError, msgspec.EncodeError):
        pass  # the full path below says what could not be encoded
    else:
        if not _redact_changes(encoded):
            return encoded.decode()
    try:
        return _encoder.encode(redact(msgspec.to_builtins(value))).decode()
    except (TypeError, ValueError, msgspec.EncodeError) as exc:
        return _encoder.encode({"unencodable": _truncate(f"{type(value).__name__}: {exc}")}).decode()


# --- call_log_redact: the shape of each call, none of its values -------------------------------

#: What a redacted number or boolean becomes.
REDACTED: Final = "<redacted>"
def _placeholder(text: str) -> str:
    return f"<redacted: {len(text)} chars>"


def redact_values(value: Any) -> Any:
    """``value``'s shape without its values, for ``call_log_redact``.

    Strings become ``"<redacted: N chars>"``, numbers and booleans ``"<redacted>"``; ``null``
    stays; object keys (schema names) are kept and lists keep their length. ``value`` is JSON
    builtins (``msgspec.to_builtins`` output); returns new objects.
    """
    if isinstance(value, str):
        return _placeholder(value)
    if isinstance(value, dict):
        return {k: redact_values(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_values(v) for v in value]
    if value is None:
        return None
    return REDACTED


def _binary_placeholder(encoded: str) -> str:
    """A base64 payload's placeholder: its decoded size (no hash: it would fingerprint a value)."""
    try:
        return f"<redacted: {len(base64.b64decode(encoded, validate=True))} bytes>"
    except (binascii.Error, ValueError):
        return _placeholder(encoded)


def _redact_block(block: Any) -> Any:
    """One MCP content block: its ``type`` kept (the schema's discriminator), all else redacted."""
    if not isinstance(block, dict):
        return redact_values(block)
    binary = block.get("type") in _BINARY_TYPES
    out: dict[str, Any] = {}
    for key, value in block.items():
        if key == "type" and isinstance(value, str):
            out[key] = value
        elif key == "data" and binary and isinstance(value, str):
            out[key] = _binary_placeholder(value)
        elif key == "resource" and isinstance(value, dict):
            out[key] = {
                k: _binary_placeholder(v) if k == "blob" and isinstance(v, str) else redact_values(v)
                for k, v in value.items()
            }
        else:
            out[key] = redact_values(value)
    return out


def _redact_result(value: Any) -> Any:
    """A ToolResult (as builtins) with ``success`` and content block types kept, no values."""
    if not isinstance(value, dict):
        return redact_values(value)
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key == "success" and isinstance(item, bool):
            out[key] = item  # the outcome, which the row's is_error says anyway
        elif key == "content" and isinstance(item, list):
            out[key] = [_redact_block(block) for block in item]
        else:
            out[key] = redact_values(item)
    return out


def _to_redacted_json(value: Any, walk: Callable[[Any], Any]) -> str | None:
    if value is None:
        return None
    try:
        return _encoder.encode(walk(msgspec.to_builtins(value))).decode()
    except (TypeError, ValueError, RecursionError, msgspec.EncodeError):
        # Not the exception's text: it may quote the value.
        return _encoder.encode({"unencodable": type(value).__name__}).decode()


# --- large results passed through raw (broker.core.passthrough) ----------------------------------

#: Base64 characters decoded at a time when summarising a raw payload (a multiple of 4). The
#: decoder holds the GIL (~0.3 ms a step): between steps the writer thread lets it go, so the
#: event loop, which is sending that very result to its agent meanwhile, is not held up; small
#: steps also keep the decoded pieces small (they come and go from the thread's own heap).
_B64_STEP: Final = 64 * 1024
_BACKSLASH: Final = re.compile(rb"\\")


def _raw_binary(raw: msgspec.Raw, redacted: bool) -> dict[str, Any] | str:
    """:func:`_binary_summary`'s fields (or, ``redacted``, :func:`_binary_placeholder`'s text)
    for a base64 JSON string still raw: decoded a step at a time, never whole."""
    view = memoryview(raw)
    if len(view) < 2 or view[0] != 0x22:
        return _plain_binary(raw, redacted)
    body = view[1:-1]
    digest, size = hashlib.sha256(), 0
    step = _B64_STEP  # (larger steps with the fast decoder: a little less CPU, a higher peak)
    try:
        if len(body) % 4:
            raise binascii.Error("Incorrect padding")
        for start in range(0, len(body), step):
            decoded = strict_b64decode(body[start:start + step])  # (a SIMD decoder if installed)
            time.sleep(0)  # (releases the GIL: see _B64_STEP)
            size += len(decoded)
            if not redacted:
                digest.update(decoded)
    except (binascii.Error, ValueError):
        # A backslash is never base64: only a string with escapes (rare) is looked at again.
        if _BACKSLASH.search(body):
            return _plain_binary(raw, redacted)
        if redacted:
            return f"<redacted: {len(body)} chars>"
        return {"bytes": None, "sha256": hashlib.sha256(body).hexdigest(), "invalidBase64": len(body)}
    if redacted:
        return f"<redacted: {size} bytes>"
    return {"bytes": size, "sha256": digest.hexdigest()}


def _plain_binary(raw: msgspec.Raw, redacted: bool) -> dict[str, Any] | str:
    """:func:`_raw_binary` the plain way: the value decoded whole (escapes, or not a string)."""
    value = msgspec.json.decode(raw)
    if not isinstance(value, str):
        return str(redact_values(value) if redacted else redact(value))
    return _binary_placeholder(value) if redacted else _binary_summary({"data": value}, "data")


def _is_string(raw: msgspec.Raw) -> bool:
    return len(raw) > 0 and memoryview(raw)[0] == 0x22


def _raw_value(raw: msgspec.Raw, redacted: bool) -> Any:
    value = msgspec.json.decode(raw)
    return redact_values(value) if redacted else redact(value)


def _raw_block(block: dict[str, msgspec.Raw], redacted: bool) -> dict[str, Any]:
    """One raw content block as the log stores it (binaries summarised from their raw bytes)."""
    kind = msgspec.json.decode(block["type"]) if "type" in block else None
    out: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    for key, raw in block.items():
        if key == "type" and isinstance(kind, str):
            out[key] = kind
        elif key == "data" and kind in _BINARY_TYPES and _is_string(raw):
            done = _raw_binary(raw, redacted)
            if isinstance(done, dict):
                summary = done
            else:
                out[key] = done
        elif key == "resource" and len(raw) and memoryview(raw)[0] == 0x7B:
            inner = msgspec.json.decode(raw, type=dict[str, msgspec.Raw])
            out[key] = _raw_resource(inner, redacted)
        else:
            out[key] = _raw_value(raw, redacted)
    out.update(summary)
    return out


def _raw_resource(inner: dict[str, msgspec.Raw], redacted: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    for key, raw in inner.items():
        if key == "blob" and _is_string(raw):
            done = _raw_binary(raw, redacted)
            if isinstance(done, dict):
                summary = done
            else:
                out[key] = done
        else:
            out[key] = _raw_value(raw, redacted)
    out.update(summary)
    return out


def _passthrough_json(result: PassthroughResult, redacted: bool) -> str:
    """The result column for a large result whose content is still the app's raw JSON."""
    try:
        shell = msgspec.to_builtins(plain(result, decode=False))
        fields = _redact_result(shell) if redacted else redact(shell)
        fields["content"] = [_raw_block(block, redacted) for block in result.raw_blocks]
        return _encoder.encode(fields).decode()
    except (TypeError, ValueError, RecursionError, msgspec.DecodeError, msgspec.EncodeError):
        return _encoder.encode({"unencodable": type(result).__name__}).decode()


def make_redacted_row(pending: _Pending) -> tuple[Any, ...]:
    """:func:`make_row` for ``call_log_redact``: the same columns, no argument or result values."""
    arguments, outcome = pending[6], pending[7]
    message = outcome.message
    if message and (outcome.result is not None or not outcome.kind.value_free):
        message = _placeholder(message)  # an app's text, or a schema error quoting the value
    result = outcome.result
    return _row(pending, _to_redacted_json(arguments, redact_values),
                _passthrough_json(result, True) if isinstance(result, PassthroughResult)
                else _to_redacted_json(result, _redact_result), message)


def make_row(pending: _Pending) -> tuple[Any, ...]:
    """Turn one buffered record into the values of :data:`COLUMNS`."""
    outcome = pending[7]
    result = outcome.result
    return _row(pending, _to_json(pending[6]), _passthrough_json(result, False) if isinstance(result, PassthroughResult)
                else _to_json(result), outcome.message)


def _row(pending: _Pending, arguments: str | None, result: str | None, message: str) -> tuple[Any, ...]:
    """The values of :data:`COLUMNS`, the arguments and result already encoded."""
    ts, tool, app, instance, agent, session, _, outcome, duration_ms = pending
    return (
        ts,
        tool,
        app,
        instance,
        agent,
        session,
        outcome.correlation_id,
        arguments,
        result,
        duration_ms,
        int(outcome.is_error),
        str(outcome.kind),  # the kind's plain string, as the column always held
        _truncate(message) if message else None,
    )


def open_db(path: Path) -> sqlite3.Connection:
    """Open (creating if need be) the call log at ``path`` for writing.

    WAL mode, ``synchronous=NORMAL``, schema created or checked. Raises StartupError if the
    file is not a usable database or was written by a newer toolbridge. The connection may be
    handed to another thread once (``check_same_thread=False``); use it from one at a time.
    """
    try:
        if os.name == "posix" and not path.exists():
            # Owner-only: arguments and results may be private. -wal/-shm copy this mode.
            os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    except OSError as exc:
        raise StartupError(f"cannot create the call log {path}: {exc.strerror}") from exc
    except sqlite3.Error as exc:
        raise StartupError(f"cannot open the call log {path}: {exc}") from exc
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StartupError(f"the call log {path} cannot use WAL mode (got {mode!r})")
        conn.execute("PRAGMA synchronous = NORMAL")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StartupError(
                f"the call log {path} was written by a newer toolbridge (schema {version}, this "
                f"one knows {SCHEMA_VERSION}); move the file away or set call_log = false"
            )
        if version < SCHEMA_VERSION:
            conn.execute("BEGIN IMMEDIATE")
            for statement in filter(None, (s.strip() for s in _SCHEMA.split(";"))):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
    except sqlite3.Error as exc:
        conn.close()
        raise StartupError(
            f"cannot open the call log {path} ({exc}); move the file away to start a new one, "
            "or set call_log = false"
        ) from exc
    except BaseException:
        conn.close()
        raise
    return conn


def apply_retention(conn: sqlite3.Connection, *, max_rows: int, max_age_days: float, now: float) -> int:
    """Delete rows beyond the newest ``max_rows`` and rows older than ``max_age_days``.

    A limit of 0 is off. Returns the number of rows deleted. Runs in the caller's transaction.
    """
    deleted = 0
    if max_rows > 0:
        (max_id,) = conn.execute("SELECT max(id) FROM calls").fetchone()
        if max_id is not None and max_id > max_rows:
            deleted += conn.execute("DELETE FROM calls WHERE id <= ?", (max_id - max_rows,)).rowcount
    if max_age_days > 0:
        cutoff = now - max_age_days * 86400.0
        deleted += conn.execute("DELETE FROM calls WHERE ts < ?", (cutoff,)).rowcount
    return deleted


# --- the log ------------------------------------------------------------------------------------


class CallLog:
    """The buffer the router records into and the writer thread that drains it.

    Build it with :func:`open_call_log`; the constructor takes an open connection and starts
    nothing.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        flush_interval: float = 0.5,
        max_rows: int = 100_000,
        max_age_days: float = 30.0,
        max_buffered: int = MAX_BUFFERED_ROWS,
        redact: bool = False,
    ) -> None:
        self._conn = conn
        #: Chosen once, so the default path does exactly what it did before the option existed.
        self._make_row = make_redacted_row if redact else make_row
        self._interval = max(flush_interval, _MIN_FLUSH_INTERVAL)
        self._max_rows = max_rows
        self._max_age_days = max_age_days
        self._max_buffered = max_buffered
        self._buffer: deque[_Pending] = deque()
        self._wake = threading.Event()
        self._stopping = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self._last_retention = 0.0
        #: Rows dropped because the buffer was full (event-loop side).
        self.dropped = 0
        #: Rows lost because a write failed (writer side).
        self.failed = 0
        #: Rows written so far.
        self.written = 0
        #: Tasks in :meth:`wait_written`: their loop's token and event. The writer thread
        #: takes the list after each write (under the lock) and sets the events on their loop.
        self._written_waiters: list[tuple[trio.lowlevel.TrioToken, trio.Event]] = []
        self._waiters_lock = threading.Lock()

    # --- event-loop side ---------------------------------------------------------------------

    def record(
        self,
        *,
        tool: str,
        app: Any,  # str | None; Any because the router passes them out of a mixed dict
        instance: Any,
        agent: str | None,
        session: str | None,
        arguments: Any,
        outcome: CallOutcome,
        duration_ms: float,
    ) -> None:
        """Queue one call for the log. Never blocks, never raises, does no I/O.

        ``arguments`` and ``outcome`` are kept by reference and encoded later in the writer
        thread: do not mutate them after the call.
        """
        if self._closed:
            return
        buffer = self._buffer
        if len(buffer) >= self._max_buffered:
            try:
                buffer.popleft()
            except IndexError:  # the writer just drained it
                pass
            else:
                self.dropped += 1
                if self.dropped == 1 or self.dropped % 10_000 == 0:
                    log.warning(
                        "call_log_rows_dropped",
                        dropped=self.dropped,
                        hint="the call log writer is falling behind (slow disk?)",
                    )
        buffer.append((time.time(), tool, app, instance, agent, session, arguments, outcome, duration_ms))
        if len(buffer) == EARLY_FLUSH_ROWS or _holds_large_content(outcome):
            self._wake.set()  # a large result (an image) is not held a whole interval

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    async def wait_written(self, rows: int) -> None:
        """Return once :attr:`written` is at least ``rows`` (for tests and tools that read the
        database). No time limit of its own: bound it with ``trio.fail_after``."""
        while self.written < rows:
            event = trio.Event()
            with self._waiters_lock:
                self._written_waiters.append((trio.lowlevel.current_trio_token(), event))
            # Checked again after the waiter is visible: a write between the first check and
            # the append has either been counted here or will wake the event.
            if self.written >= rows:
                return
            await event.wait()

    # --- lifecycle (driven by open_call_log) -------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="toolbridge-calllog", daemon=True)
        self._thread.start()

    def stop_and_join(self) -> None:
        """Flush everything buffered, close the database. Blocking: call it off the loop."""
        self._closed = True
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        else:
            self._conn.close()

    # --- writer thread -----------------------------------------------------------------------

    def _run(self) -> None:
        conn = self._conn
        try:
            self._retention(force=True)
            while not self._stopping:
                self._wake.wait(self._interval)
                self._wake.clear()
                self._flush()
            self._flush()
        except BaseException:  # noqa: BLE001 - the thread must not die silently
            self._closed = True  # stop buffering rows nobody will write
            log.exception("call_log_writer_crashed", unwritten=len(self._buffer))
            self._buffer.clear()
        finally:
            conn.close()

    def _flush(self) -> None:
        buffer = self._buffer
        wrote = False
        while buffer:
            batch: list[_Pending] = []
            while buffer and len(batch) < BATCH_ROWS:
                batch.append(buffer.popleft())
            rows: list[tuple[Any, ...]] = []
            for start in range(0, len(batch), _ROWS_PER_GIL_SLICE):
                rows.extend(self._safe_row(pending) for pending in batch[start:start + _ROWS_PER_GIL_SLICE])
                # Let the event loop have the GIL: a thread busy in Python code keeps it for
                # the whole switch interval (5 ms) each time the loop comes back from I/O.
                time.sleep(0)
            try:
                with self._transaction():
                    self._conn.executemany(_INSERT, rows)
                    self._retention_in_tx()
            except sqlite3.Error:
                self.failed += len(rows)
                log.exception("call_log_write_failed", rows=len(rows), failed=self.failed)
            else:
                self.written += len(rows)
                wrote = True
                self._wake_written_waiters()
        if not wrote:
            self._retention()

    def _wake_written_waiters(self) -> None:
        """Writer thread: wake the :meth:`wait_written` tasks (they check the count again)."""
        if not self._written_waiters:  # the usual case: nobody waits (read without the lock)
            return
        with self._waiters_lock:
            waiters, self._written_waiters = self._written_waiters, []
        for token, event in waiters:
            try:
                token.run_sync_soon(event.set)
            except trio.RunFinishedError:
                pass  # that loop has ended: nobody is waiting any more

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """BEGIN IMMEDIATE ... COMMIT, rolled back if the body raises."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    def _safe_row(self, pending: _Pending) -> tuple[Any, ...]:
        try:
            return self._make_row(pending)
        except Exception:  # noqa: BLE001 - one bad record must not lose the batch
            log.exception("call_log_bad_record", tool=pending[1])
            ts, tool, app, instance, agent, session, _args, outcome, duration_ms = pending
            kind = getattr(outcome, "kind", "internal_error")
            return (ts, str(tool), app, instance, agent, session, None, None, None,
                    duration_ms, int(kind != "ok"), str(kind), "(record could not be encoded)")

    def _retention_in_tx(self) -> None:
        now = time.time()
        apply_retention(self._conn, max_rows=self._max_rows, max_age_days=self._max_age_days, now=now)
        self._last_retention = time.monotonic()

    def _retention(self, *, force: bool = False) -> None:
        """Retention outside a flush: at start-up, and every so often while idle."""
        if not force and time.monotonic() - self._last_retention < IDLE_RETENTION_SECONDS:
            return
        try:
            with self._transaction():
                self._retention_in_tx()
        except sqlite3.Error:
            log.exception("call_log_retention_failed")
            self._last_retention = time.monotonic()


@asynccontextmanager
async def open_call_log(settings: Settings) -> AsyncIterator[CallLog | None]:
    """The daemon's call log, or ``None`` when ``settings.call_log`` is off.

    Opens ``<home>/calls.sqlite3`` (raising StartupError if it cannot), runs the writer thread
    while the block runs, and on exit flushes every buffered row and closes the database.
    """
    if not settings.call_log:
        yield None
        return
    path = settings.home / CALL_LOG_FILE
    conn = await trio.to_thread.run_sync(open_db, path)
    call_log = CallLog(
        conn,
        flush_interval=settings.call_log_flush_interval,
        max_rows=settings.call_log_max_rows,
        max_age_days=settings.call_log_max_age_days,
        redact=settings.call_log_redact,
    )
    call_log.start()
    log.debug("call_log_opened", path=str(path), flush_interval=settings.call_log_flush_interval,
              redact=settings.call_log_redact)
    try:
        yield call_log
    finally:
        # Shielded on purpose: the last rows are written even when the exit is cancelled
        # (to_thread.run_sync would otherwise raise Cancelled before starting the thread).
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(call_log.stop_and_join)
        if call_log.dropped or call_log.failed:
            log.warning("call_log_closed_with_losses", dropped=call_log.dropped, failed=call_log.failed)
