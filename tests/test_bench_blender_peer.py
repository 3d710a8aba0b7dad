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


def test_percentiles_are_nearest_rank() -> None:
    samples = [0.001 * n for n in range(1, 21)]  # 1..20 ms, unordered below
    shuffled = samples[1::2] + samples[::2]
    assert blender_peer.percentile(shuffled, 0.5) == samples[9]
    assert blender_peer.percentile(shuffled, 0.95) == samples[18]
    assert blender_peer.percentile([0.7], 0.95) == 0.7
    assert blender_peer.p50_p95_ms(shuffled) == "10 / 19 ms"
    assert blender_peer.p50_p95_ms([]) == "not measured"


def test_latency_rows_pair_the_bridges_task_by_task() -> None:
    latency = {"toolbridge": {"scene info": {"seconds": [0.1, 0.3, 0.2]}, "failing call": {"seconds": [0.05]}},
               "blender-mcp": {"scene info": {"seconds": [0.4]}, "failing call": {"seconds": []}}}
    rows = blender_peer.latency_rows(latency)
    assert rows == [blender_peer.Row("latency p50 / p95: scene info", "200 / 300 ms", "400 / 400 ms"),
                    blender_peer.Row("latency p50 / p95: failing call", "50 / 50 ms", "not measured")]


def test_behaviour_rows_say_what_each_side_did() -> None:
    def marks(answered: float, **more: object) -> dict[str, object]:
        return {"scene": "{}", "scene_asked_at_s": 1.5, "scene_answered_at_s": answered, "long_ended_s": 20.0, **more}

    report = {
        "one_full_hd_render": {"toolbridge": [24.0, "image"], "blender-mcp": [1.25, "rendered"]},
        "busy": {"toolbridge": {**marks(31.5), "scene": "ERROR Blender__scene_summary timed out after 30 s"},
                 "blender-mcp": marks(20.0)},
        "cancel": {"toolbridge": marks(2.0, cancelled_at_s=1.5), "blender-mcp": marks(24.0, cancelled_at_s=1.5)},
        "toolbridge_last_render": {"rows": 1080, "rows_done": 120, "strips_done": 2, "cancelled": True},
        "peer_renders_done_after_cancel": "Code executed successfully: 25",
        "restart": {"toolbridge": {"open_session_sees": "MCPError: lost", "open_session_recovers_after_s": 0.75},
                    "blender-mcp": {"open_session_sees": "MCPError: gone", "open_session_recovers_after_s": None,
                                    "fresh_session_total_s": 1.0}},
    }
    render, busy, cancel, restart = blender_peer.behaviour_rows(report)
    assert (render.toolbridge, render.peer) == ("24.0 s (in cancellable strips)", "1.2 s")
    assert busy.toolbridge.startswith("answered with an error (Blender__scene_summary timed out") \
        and "30.0 s after asking" in busy.toolbridge
    assert busy.peer == "answered 18.5 s after asking; the render ended 20.0 s in"
    assert cancel.toolbridge == "answered 0.5 s after the cancel; the render stopped after 120 of 1080 rows (2 strips)"
    assert cancel.peer.endswith("ran on to the end (25 renders done)")
    assert restart.toolbridge == ("the open session's next call: MCPError: lost; the call after it works, 0.8 s later, "
                                  "same session")
    assert restart.peer == ("the open session's next call: MCPError: gone; that session stays dead: a new session's "
                            "first good call 1.0 s after starting it")
