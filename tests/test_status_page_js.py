"""The status page's JavaScript passes ``tsc --checkJs --strict`` (issue 31): no framework and no
build step, so the type checker is what catches a null dereference or a misspelt property before
a browser does. tsc is found as test_codegen finds it (``python3 dev.py test`` installs it)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from test_codegen import find_tsc

STATIC = Path(__file__).resolve().parent.parent / "broker" / "mcp" / "static"
#: inspector.js uses status.js's globals, so they are checked together, as the page loads them.
SCRIPTS = ["status.js", "inspector.js", "login.js"]


def test_the_pages_javascript_passes_tsc_check_js_strict() -> None:
    result = subprocess.run(
        [find_tsc(), "--noEmit", "--strict", "--checkJs", "--allowJs", "--target", "es2022",
         "--lib", "es2022,dom,dom.iterable", *(str(STATIC / name) for name in SCRIPTS)],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
