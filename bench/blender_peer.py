"""Side by side: toolbridge's Blender add-on beside ahujasid/blender-mcp (issue 28).

Usage: python bench/blender_peer.py --peer PATH_TO_BLENDER_MCP_CHECKOUT [--drive] [--repeats N]
           [--peer-pythonpath DIR] [--blender-modules DIR] [--peer-repeat K] [--json FILE]
       python bench/blender_peer.py --peer PATH --from-json FILE   (the table again)

The repository holds none of the peer's code: the peer is read from --peer. Without --drive
only the lines an app author writes are counted. With --drive, bench/blender_peer_drive.py
starts one Blender under Xvfb with both add-ons and drives both bridges through the MCP SDK:
the five tasks --repeats times each (p50/p95), a scene query during a long render, cancelling
that render, and killing the process between agent and Blender. The peer's server needs the
``mcp<2`` SDK (--peer-pythonpath: a ``pip install --target`` folder with ``mcp[cli]<2 httpx``);
Debian's Blender lacks ``requests``, which the peer's add-on imports (--blender-modules: a
folder with it).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TOOLBRIDGE_ADDON = REPO / "integrations" / "blender" / "toolbridge_blender"
# What an app author writes on the peer's side: the socket server inside Blender
# and the MCP server outside it.
PEER_AUTHOR_FILES = ("addon.py", "src/blender_mcp/server.py")
TASKS = ("scene info", "create object", "set material", "viewport image", "failing call")


def count_code_lines(path: Path) -> int:
    """Lines that are neither blank nor only a `#` comment (docstrings count: they are written too)."""
    count = 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            count += 1
    return count


def count_tree(paths: Iterable[Path]) -> int:
    """Code lines over files and, for directories, every *.py below them (vendored wheels excluded)."""
    total = 0
    for path in paths:
        if path.is_dir():
            for file in sorted(path.rglob("*.py")):
                if "vendor" not in file.relative_to(path).parts:
                    total += count_code_lines(file)
        elif path.is_file():
            total += count_code_lines(path)
    return total


def peer_author_lines(peer: Path) -> int:
    return count_tree(peer / name for name in PEER_AUTHOR_FILES)


def toolbridge_author_lines(addon: Path = TOOLBRIDGE_ADDON) -> int:
    return count_tree([addon])


@dataclass(frozen=True)
class Row:
    case: str
    toolbridge: str
    peer: str


def median_ms(samples: Sequence[float]) -> str:
    """Median of samples given in seconds, as milliseconds; "not measured" for none."""
    if not samples:
        return "not measured"
    ordered = sorted(samples)
    mid = len(ordered) // 2
    value = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return f"{value * 1000:.1f} ms"


def percentile(samples: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` in 0..1) of a non-empty sample."""
    ordered = sorted(samples)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def p50_p95_ms(samples: Sequence[float]) -> str:
    """"p50 / p95 ms" of samples in seconds; "not measured" for none."""
    if not samples:
        return "not measured"
    return f"{percentile(samples, 0.5) * 1000:.0f} / {percentile(samples, 0.95) * 1000:.0f} ms"


def latency_rows(latency: Mapping[str, Mapping[str, Any]], ours: str = "toolbridge",
                 peer: str = "blender-mcp") -> list[Row]:
    """One row per task: p50/p95 on each side (the driver's ``latency`` part)."""
    return [Row(f"latency p50 / p95: {task}", p50_p95_ms(latency[ours][task]["seconds"]),
                p50_p95_ms(latency[peer][task]["seconds"])) for task in latency[ours]]


def behaviour_rows(report: Mapping[str, Any], ours: str = "toolbridge", peer: str = "blender-mcp") -> list[Row]:
    """The driver's render, busy, cancel and restart parts, one row each, in words."""
    render = report["one_full_hd_render"]
    rows = [Row("one full-HD workbench render", f"{render[ours][0]:.1f} s (in cancellable strips)", f"{render[peer][0]:.1f} s")]

    def answered(marks: Mapping[str, Any], since: str) -> str:
        error = f" with an error ({marks['scene'][6:70]}...)" if marks["scene"].startswith("ERROR") else ""
        return f"answered{error} {marks['scene_answered_at_s'] - marks[since]:.1f} s after"

    busy = report["busy"]
    rows.append(Row("scene query 1.5 s into a long render",
                    *(f"{answered(busy[side], 'scene_asked_at_s')} asking; the render ended "
                      f"{busy[side]['long_ended_s']:.1f} s in" for side in (ours, peer))))
    last = report["toolbridge_last_render"]
    renders = report["peer_renders_done_after_cancel"].rsplit(" ", 1)[-1]
    cancel = report["cancel"]
    rows.append(Row("cancel the render from the agent, then a scene query",
                    f"{answered(cancel[ours], 'cancelled_at_s')} the cancel; the render stopped after "
                    f"{last['rows_done']} of {last['rows']} rows ({last['strips_done']} strips)",
                    f"{answered(cancel[peer], 'cancelled_at_s')} the cancel; the render ran on to the end "
                    f"({renders} renders done)"))
    def after_kill(marks: Mapping[str, Any]) -> str:
        first = f"the open session's next call: {marks['open_session_sees']}"
        if marks.get("open_session_recovers_after_s") is not None:
            return f"{first}; the call after it works, {marks['open_session_recovers_after_s']:.1f} s later, same session"
        return (f"{first}; that session stays dead: a new session's first good call "
                f"{marks['fresh_session_total_s']:.1f} s after starting it")

    restart = report["restart"]
    rows.append(Row("kill the process between agent and Blender (our daemon; its MCP server)",
                    after_kill(restart[ours]), after_kill(restart[peer])))
    return rows


def format_table(rows: Sequence[Row]) -> str:
    """A Markdown table for BENCHMARKS.md; pipes inside cells are escaped."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")
    lines = ["| case | toolbridge | blender-mcp |", "|---|---|---|"]
    lines += [f"| {cell(r.case)} | {cell(r.toolbridge)} | {cell(r.peer)} |" for r in rows]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", type=Path, required=True, help="checkout of ahujasid/blender-mcp")
    parser.add_argument("--repeats", type=int, default=5, help="calls per task and bridge (--drive)")
    parser.add_argument("--drive", action="store_true", help="start Blender and time both bridges")
    parser.add_argument("--peer-pythonpath", default="", help="folder with mcp<2 and httpx for the peer's server")
    parser.add_argument("--blender-modules", default="", help="folder with requests for Blender's Python")
    parser.add_argument("--peer-repeat", type=int, default=25,
                        help="renders in the peer's long call (25: about as long as our strip render)")
    parser.add_argument("--json", type=Path, help="also write the raw measurements here")
    parser.add_argument("--from-json", type=Path, help="print the table of a --json file written before")
    args = parser.parse_args(argv)
    if not (args.peer / PEER_AUTHOR_FILES[0]).is_file():
        print(f"--peer {args.peer}: no {PEER_AUTHOR_FILES[0]} there; pass a blender-mcp checkout", file=sys.stderr)
        return 2
    rows = [Row(f"latency: {task}", median_ms([]), median_ms([])) for task in TASKS]
    if args.drive or args.from_json:
        report = json.loads(args.from_json.read_text()) if args.from_json else drive(args)
        if args.drive:
            print(json.dumps(report, indent=1))
        if args.json and args.drive:
            args.json.write_text(json.dumps(report, indent=1))
        rows = latency_rows(report["latency"]) + behaviour_rows(report)
    rows.append(Row("lines an app author writes", str(toolbridge_author_lines()), str(peer_author_lines(args.peer))))
    print(format_table(rows))
    return 0


def drive(args: argparse.Namespace) -> dict[str, Any]:
    import trio

    sys.path.insert(0, str(REPO / "bench"))
    from blender_peer_drive import World
    from blender_peer_drive import drive as run

    with tempfile.TemporaryDirectory(prefix="blender-peer-") as base:
        world = World(Path(base), args.peer.resolve(), args.peer_pythonpath, args.blender_modules)
        try:
            world.start()
            report: dict[str, Any] = trio.run(run, world, args.repeats, TASKS, args.peer_repeat)
            return report
        finally:
            world.stop()


if __name__ == "__main__":
    raise SystemExit(main())
