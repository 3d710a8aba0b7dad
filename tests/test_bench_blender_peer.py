"""Unit tests for bench/blender_peer.py's LOC counting and table formatting (no peer, no Blender)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "blender_peer", Path(__file__).resolve().parent.parent / "bench" / "blender_peer.py")
assert _SPEC is not None and _SPEC.loader is not None
blender_peer = importlib.util.module_from_spec(_SPEC)
sys.modules["blender_peer"] = blender_peer
_SPEC.loader.exec_module(blender_peer)


def test_counts_code_lines_not_blanks_or_comments(tmp_path: Path) -> None:
    (tmp_path / "addon.py").write_text("# header\n\nimport bpy\n  # indented comment\nx = 1  # trailing\n")
    server = tmp_path / "src" / "blender_mcp"
    server.mkdir(parents=True)
    (server / "server.py").write_text('"""doc"""\ndef f():\n    return 1\n')
    assert blender_peer.peer_author_lines(tmp_path) == 2 + 3


def test_addon_tree_skips_vendored_code(tmp_path: Path) -> None:
    (tmp_path / "__init__.py").write_text("a = 1\nb = 2\n")
    (tmp_path / "vendor").mkdir()
    (tmp_path / "vendor" / "big.py").write_text("x = 1\n" * 50)
    (tmp_path / "notes.txt").write_text("not python\n")
    assert blender_peer.toolbridge_author_lines(tmp_path) == 2


def test_table_escapes_pipes_and_reports_medians() -> None:
    rows = [blender_peer.Row("a|b", blender_peer.median_ms([0.003, 0.001, 0.002]),
                             blender_peer.median_ms([]))]
    table = blender_peer.format_table(rows)
    assert table.splitlines() == [
        "| case | toolbridge | blender-mcp |",
        "|---|---|---|",
        "| a\\|b | 2.0 ms | not measured |",
    ]
    assert blender_peer.median_ms([0.001, 0.003]) == "2.0 ms"
