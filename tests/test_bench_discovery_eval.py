"""The blind-set evaluation command (``bench/discovery/round5.py --catalogues --queries
--aggregate-only``): any catalogue files and query file, aggregates per class only.

Runs the script as the lead will (a subprocess, BM25 only to stay quick) on a small catalogue
and a query file in every accepted format, and checks that it measures what it should and never
prints a query or a tool name.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "discovery" / "round5.py"


def _tool(name: str, description: str) -> dict[str, object]:
    return {"name": name, "description": description, "inputSchema": {"type": "object", "properties": {}}}


def _write(tmp_path: Path) -> tuple[Path, Path, Path]:
    first = tmp_path / "first.json"
    first.write_text(json.dumps({"apps": [{"name": "Tuner", "tools": [
        _tool("SetTempo", "Change the tempo of the song."),
        _tool("MuteTrack", "Silence a track."),
    ]}]}))
    second = tmp_path / "second.json"
    second.write_text(json.dumps({"apps": [{"name": "Ledger", "tools": [
        _tool("AddTransaction", "Record a payment or an income."),
        _tool("ShowBudget", "Show this month's budget."),
    ]}]}))
    queries = tmp_path / "queries.json"
    queries.write_text(json.dumps({"queries": [
        {"query": "change the tempo", "expected": "Tuner__SetTempo", "kind": "plain"},
        {"query": "silence the track", "expected": ["Tuner__MuteTrack"], "class": "paraphrase"},
        {"query": "record a payment", "expected": "Ledger__AddTransaction", "class": "plain"},
        {"query": "zzqx wibble frobnicate", "expected": [], "class": "none"},
        {"query": "qqqq zzzz", "expected": "", "kind": "none"},
        {"query": "vvvv xxxx", "expected": None, "kind": "none"},
    ]}))
    return first, second, queries


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, check=False)


def test_aggregates_per_class_over_several_catalogues(tmp_path: Path) -> None:
    first, second, queries = _write(tmp_path)
    done = _run("--catalogues", f"{first},{second}", "--queries", str(queries), "--aggregate-only")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "6 queries (3 with no answering tool) over 4 tools" in out
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in out.splitlines() if line.startswith("| ") and "---" not in line}
    # both catalogues are in one index: every answerable query's tool is found first
    assert rows["all answerable"][:4] == ["3", "1.000", "1.000", "1.000"]
    assert rows["plain"][0] == "2" and rows["paraphrase"][0] == "1"
    # "", [] and null all mean no tool answers; `class` is read like `kind`
    assert rows["none"][0] == "3" and rows["none"][1:4] == ["-", "-", "-"]
    assert "warning" not in out
    for secret in ("tempo", "payment", "wibble", "Tuner__", "Ledger__"):  # aggregates only
        assert secret not in out


def test_aggregate_only_refuses_misses(tmp_path: Path) -> None:
    first, _, queries = _write(tmp_path)
    done = _run("--catalogues", str(first), "--queries", str(queries), "--aggregate-only", "--misses")
    assert done.returncode != 0
    assert "--misses" in done.stderr


def test_expected_tool_missing_from_the_catalogues_is_counted_not_named(tmp_path: Path) -> None:
    first, _, queries = _write(tmp_path)  # the Ledger queries name tools of the second file
    done = _run("--catalogues", str(first), "--queries", str(queries), "--aggregate-only")
    assert done.returncode == 0, done.stderr
    assert "warning: 1 queries expect a tool name that is in no catalogue" in done.stdout
    assert "Ledger" not in done.stdout
