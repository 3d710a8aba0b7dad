"""``toolbridge logs``: read the call log (``<home>/calls.sqlite3``) straight from disk.

Theory of operation
-------------------
The command opens the database read-only (``mode=ro``), so it never writes, never needs the
daemon, and works while the daemon runs (WAL lets readers and the writer proceed together).
Filters become one parameterised ``SELECT``; the newest ``--limit`` matching rows are printed
oldest first, like ``tail``. ``--follow`` then polls every :data:`POLL_SECONDS` for rows with a
higher id (ids only grow) until Ctrl-C.

Exit codes: 0 when the log was read (even if no row matched); 1 when there is no call log
yet in the home directory (a one-line hint goes to stderr), so scripts can tell "nothing
matched" from "nothing logged at all". With ``--follow`` a missing log is waited for instead.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final, TextIO

import attrs

from ._common import EXIT_ERROR, EXIT_OK, SubParsers, add_command, add_home, home_from, short_id
from ..core.calllog import CALL_LOG_FILE

__all__ = ["LogFilter", "parse_since", "fetch_rows", "follow", "format_row", "format_rows", "json_row", "cmd_logs"]

POLL_SECONDS: Final = 0.5
DEFAULT_LIMIT: Final = 50
_ERROR_CHARS: Final = 120
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)
_GLOB_CHARS: Final = frozenset("*?[")
_JSON_COLUMNS: Final = ("arguments", "result")


@attrs.frozen
class LogFilter:
    """Which rows to show. ``tool`` and ``app`` are exact names or globs (``*``, ``?``, ``[]``)."""

    tool: str | None = None
    app: str | None = None
    errors_only: bool = False
    since: float | None = None  # unix time
    #: The call's correlation id (what the status page links to; ids restart with the daemon).
    correlation_id: int | None = None

    def where(self) -> tuple[list[str], list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        if self.tool:
            if _GLOB_CHARS & set(self.tool):
                clauses.append("tool GLOB ?")
                params.append(self.tool)
            else:  # the exact agent name, or the tool's own name under any app
                clauses.append("(tool = ? OR tool GLOB ?)")
                params += [self.tool, "*__" + self.tool]
        if self.app:
            clauses.append("app GLOB ?" if _GLOB_CHARS & set(self.app) else "app = ?")
            params.append(self.app)
        if self.errors_only:
            clauses.append("is_error != 0")
        if self.since is not None:
            clauses.append("ts >= ?")
            params.append(self.since)
        if self.correlation_id is not None:
            clauses.append("correlation_id = ?")
            params.append(self.correlation_id)
        return clauses, params


def parse_since(text: str, now: float | None = None) -> float:
    """``10m``, ``2h``, ``1d``, ``30s``, ``1w`` ago, or an ISO 8601 time (local if no zone).

    Raises ``argparse.ArgumentTypeError`` (argparse turns it into a usage error).
    """
    match = _RELATIVE.match(text)
    if match:
        seconds = float(match.group(1)) * _UNITS[match.group(2).lower()]
        return (time.time() if now is None else now) - seconds
    try:
        return datetime.fromisoformat(text.strip()).timestamp()  # naive = local time
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid --since {text!r}: use a duration such as 10m, 2h, 1d, or an ISO time "
            "such as 2025-01-31T14:00"
        ) from None


def connect_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection; raises ``sqlite3.Error`` if the file is not a database."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        conn.execute("PRAGMA busy_timeout = 2000")
    except BaseException:
        conn.close()
        raise
    return conn


def _rows(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    try:
        return [dict(row) for row in conn.execute(sql, params)]
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):  # the daemon created the file but not the schema yet
            return []
        raise


def fetch_rows(
    conn: sqlite3.Connection, where: LogFilter, *, limit: int | None = DEFAULT_LIMIT, after_id: int = 0
) -> list[dict[str, Any]]:
    """Matching rows with ``id > after_id``, oldest first: the newest ``limit`` (None = all)."""
    clauses, params = where.where()
    clauses.insert(0, "id > ?")
    params.insert(0, after_id)
    sql = f"SELECT * FROM calls WHERE {' AND '.join(clauses)} ORDER BY id DESC"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    rows = _rows(conn, sql, params)
    rows.reverse()
    return rows


def _max_id(conn: sqlite3.Connection) -> int:
    rows = _rows(conn, "SELECT max(id) AS m FROM calls", ())
    return int(rows[0]["m"] or 0) if rows else 0


# --- output -----------------------------------------------------------------------------------


def _local_time(ts: float) -> str:
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _duration(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms:.1f}ms" if ms < 1000 else f"{ms / 1000:.2f}s"


def _short(text: str | None) -> str:
    if not text:
        return ""
    line = " ".join(text.split())
    return line if len(line) <= _ERROR_CHARS else line[: _ERROR_CHARS - 3] + "..."


#: Least widths of the tool, app and agent columns, so lines printed one at a time (``--follow``)
#: still mostly line up; a batch widens a column to its longest value.
MIN_WIDTHS: Final = (24, 16, 16)


def _parts(row: dict[str, Any]) -> tuple[str, str, str, str, str, str, str]:
    """The columns of one human line: time, duration, outcome kind, tool, app/instance,
    agent/session, short error."""
    where = row.get("app") or "-"
    if row.get("instance"):
        where += f"/{short_id(row['instance'])}"
    who = row.get("agent") or "-"
    if row.get("session"):
        who += f" {short_id(row['session'])}"
    error = _short(row.get("error_message")) if row.get("is_error") else ""
    return (_local_time(row["ts"]), _duration(row.get("duration_ms")), row.get("error_kind") or "?", row["tool"],
            where, who, error or "")


def format_rows(rows: list[dict[str, Any]]) -> list[str]:
    """Human lines, their columns aligned across ``rows``."""
    parts = [_parts(row) for row in rows]
    widths = [max([least, *(len(p[column]) for p in parts)]) for column, least in zip((3, 4, 5), MIN_WIDTHS)]
    lines = []
    for when, took, kind, tool, where, who, error in parts:
        line = f"{when}  {took:>9}  {kind:<16} {tool:<{widths[0]}}  {where:<{widths[1]}}  {who:<{widths[2]}}"
        lines.append(f"{line}  {error}".rstrip() if error else line.rstrip())
    return lines


def format_row(row: dict[str, Any]) -> str:
    """One human line (see :func:`format_rows`)."""
    return format_rows([row])[0]


def json_row(row: dict[str, Any]) -> str:
    """Every column as one JSON object; ``arguments``/``result`` decoded, ``time`` added (ISO, UTC)."""
    out = dict(row)
    for column in _JSON_COLUMNS:
        value = out.get(column)
        if isinstance(value, str):
            try:
                out[column] = json.loads(value)
            except ValueError:
                pass
    if "is_error" in out:
        out["is_error"] = bool(out["is_error"])
    if isinstance(out.get("ts"), int | float):
        out["time"] = datetime.fromtimestamp(out["ts"]).astimezone().isoformat(timespec="milliseconds")
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


def _emit(rows: list[dict[str, Any]], as_json: bool, out: TextIO) -> None:
    lines = [json_row(row) for row in rows] if as_json else format_rows(rows)
    for line in lines:
        out.write(line + "\n")
    out.flush()


# --- follow -----------------------------------------------------------------------------------


def follow(
    conn: sqlite3.Connection,
    where: LogFilter,
    *,
    after_id: int,
    as_json: bool = False,
    out: TextIO | None = None,
    poll_seconds: float = POLL_SECONDS,
    stop: Callable[[], bool] | None = None,
    max_polls: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Print matching rows newer than ``after_id`` as they arrive; returns the last id seen.

    Runs until Ctrl-C (KeyboardInterrupt propagates), ``stop()`` returns true, or ``max_polls``
    polls have been made (the last two are for tests and embedding).
    """
    out = out or sys.stdout
    polls = 0
    while True:
        if max_polls is not None and polls >= max_polls:
            return after_id
        if stop is not None and stop():
            return after_id
        polls += 1
        if _max_id(conn) < after_id:  # the log was cleared or replaced: start over
            after_id = 0
        rows = fetch_rows(conn, where, limit=None, after_id=after_id)
        if rows:
            _emit(rows, as_json, out)
            after_id = rows[-1]["id"]
        sleep(poll_seconds)


# --- the command ------------------------------------------------------------------------------


def _missing_hint(home: Path) -> str:
    return f"no calls logged yet in {home}; is the daemon running with the call log on?"


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"invalid --limit {text!r}: a whole number >= 0 (0 = all)")
    return value


def cmd_logs(args: argparse.Namespace) -> int:
    home = home_from(args)
    path = home / CALL_LOG_FILE
    where = LogFilter(tool=args.tool, app=args.app, errors_only=args.errors, since=args.since,
                      correlation_id=args.id)
    try:
        if not path.exists():
            print(_missing_hint(home), file=sys.stderr)
            if not args.follow:
                return EXIT_ERROR
            while not path.exists():
                time.sleep(POLL_SECONDS)
        conn = connect_readonly(path)
        try:
            rows = fetch_rows(conn, where, limit=args.limit or None)
            _emit(rows, args.json, sys.stdout)
            if not rows and not args.follow:
                print(f"no matching calls in {path}", file=sys.stderr)
            if args.follow:
                last = rows[-1]["id"] if rows else _max_id(conn)
                follow(conn, where, after_id=last, as_json=args.json)
        finally:
            conn.close()
    except KeyboardInterrupt:
        return EXIT_OK
    except sqlite3.Error as exc:
        print(f"toolbridge: cannot read the call log {path}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def add_parser(sub: SubParsers) -> None:
    parser = add_command(
        sub, "logs",
        description="Show the call log: one line per tool call, newest last. Read-only; works "
        "while the daemon runs. Exit status 1 if nothing has been logged in this home yet.",
    )
    add_home(parser)
    parser.add_argument("--tool", help="only this tool: the agent name (App__Tool), the tool's own name, or a glob")
    parser.add_argument("--app", help="only this app (name or glob)")
    parser.add_argument("--errors", action="store_true", help="only calls that failed")
    parser.add_argument("--since", type=parse_since, metavar="WHEN",
                        help="only calls since WHEN: 10m, 2h, 1d, or an ISO time (local unless it has a zone)")
    parser.add_argument("--id", type=int, metavar="N",
                        help="only the call with correlation id N (the status page shows it; ids restart "
                        "with the daemon, so the newest such call is first with -n 1)")
    parser.add_argument("-n", "--limit", type=_limit, default=DEFAULT_LIMIT, metavar="N",
                        help=f"the newest N matching calls (default {DEFAULT_LIMIT}; 0 = all)")
    parser.add_argument("--json", action="store_true", help="one JSON object per line, with every field")
    parser.add_argument("-f", "--follow", action="store_true",
                        help=f"keep printing new calls as they arrive (polls every {POLL_SECONDS} s; Ctrl-C stops)")
    parser.set_defaults(func=cmd_logs)
