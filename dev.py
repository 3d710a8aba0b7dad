#!/usr/bin/env python3
"""One-command set-up: `python3 dev.py serve` runs the daemon, `python3 dev.py test` the tests.

Each creates (or reuses) the virtual environment `.venv` beside this file, installs toolbridge
into it in editable mode with what that command needs (re-installing only when pyproject.toml
changed), then runs the command. Extra arguments are passed on: `python3 dev.py serve --port 0`,
`python3 dev.py test -k protocol`. Needs only python3 (3.11+) with venv and pip.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("TOOLBRIDGE_VENV", ROOT / ".venv"))
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")


def ensure_env(extra: str) -> None:
    if sys.version_info < (3, 11):
        sys.exit(f"toolbridge needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    if not PYTHON.exists():
        print(f"creating the virtual environment {VENV}", file=sys.stderr)
        venv.EnvBuilder(with_pip=True).create(VENV)
    spec = f".[{extra}]" if extra else "."
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + spec.encode()).hexdigest()
    stamp = VENV / ".toolbridge-installed"
    installed = stamp.read_text().split() if stamp.exists() else []
    if digest in installed:
        return
    print(f"installing toolbridge{f'[{extra}]' if extra else ''} into {VENV}", file=sys.stderr)
    subprocess.run([str(PYTHON), "-m", "pip", "install", "--quiet", "--upgrade", "pip"], check=True)
    subprocess.run([str(PYTHON), "-m", "pip", "install", "--quiet", "-e", spec], check=True, cwd=ROOT)
    stamp.write_text("\n".join([*installed, digest]) + "\n")


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("serve", "test"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    if command == "serve":
        ensure_env("")
        return subprocess.call([str(PYTHON), "-m", "broker", "serve", *rest])
    ensure_env("test")
    return subprocess.call([str(PYTHON), "-m", "pytest", *rest], cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
