"""Side by side: toolbridge's Blender add-on beside ahujasid/blender-mcp (issue 28).

Usage: python bench/blender_peer.py --peer PATH_TO_BLENDER_MCP_CHECKOUT [--repeats N]

The repository holds none of the peer's code: the peer is read from --peer.
STATUS: only the lines-of-code count and the result table are implemented; the
latency/behaviour driver (Blender under Xvfb, MCP SDK agent against both sides)
is not written yet, so those rows print as "not measured".
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

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
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    if not (args.peer / PEER_AUTHOR_FILES[0]).is_file():
        print(f"--peer {args.peer}: no {PEER_AUTHOR_FILES[0]} there; pass a blender-mcp checkout", file=sys.stderr)
        return 2
    rows = [Row(f"latency: {task}", median_ms([]), median_ms([])) for task in TASKS]
    rows.append(Row("lines an app author writes", str(toolbridge_author_lines()), str(peer_author_lines(args.peer))))
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
