"""The repository holds no leftovers of a merge: no ``*.orig`` / ``*.rej`` files and no conflict
markers in tracked text (a docs/nats.md.orig was committed once by mistake)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: A conflict marker as git writes it: at the start of a line, seven characters, then a space
#: or the end of the line (a Markdown rule or a docstring underline never has that shape).
MARKER = re.compile(rb"^(<{7}|>{7}) |^={7}$", re.MULTILINE)


def tracked() -> list[str]:
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")  # an sdist: nothing to check
    return [name for name in listed.stdout.decode().split("\0") if name]


def test_no_merge_leftover_files() -> None:
    assert [name for name in tracked() if name.endswith((".orig", ".rej"))] == []


def test_no_conflict_markers_in_tracked_text() -> None:
    marked = []
    for name in tracked():
        path = ROOT / name
        if path.suffix not in {".py", ".md", ".toml", ".json", ".ts", ".cs", ".yml", ".yaml", ".txt", ".cfg", ".sh"} \
                or not path.is_file():
            continue
        if MARKER.search(path.read_bytes()):
            marked.append(name)
    assert marked == []
