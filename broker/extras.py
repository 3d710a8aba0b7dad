"""The command that installs one of toolbridge's extras, for the way toolbridge was installed.

toolbridge is not on a package index, so ``pip install 'toolbridge[code]'`` (what messages used
to say) installs nothing. Every message that asks the user to install an extra (``code``,
``semantic``, ``nats``, ``agent``) takes its command from :func:`install_hint`, which reads
how this copy was installed:

* **a clone's virtual environment** (an editable install, PEP 610 ``direct_url.json`` naming a
  local folder): ``<venv>/bin/pip install -e '<clone>[code]'``;
* **pipx** (the environment is ``<PIPX_HOME>/venvs/toolbridge``): ``pipx inject toolbridge
  'deno>=2.1'``, the extra's own requirements;
* **uv tool** (``<uv tools>/toolbridge``; such environments have no pip): ``uv tool install
  --force '<source>[code]'`` when the source is known, else ``uv pip install --python ...``;
* **anything else** (a plain venv, a wheel): ``<python> -m pip install 'deno>=2.1'`` with the
  interpreter that runs toolbridge.

Paths are absolute, so the command works from any folder. Nothing here imports more than the
standard library; :func:`install_hint` never raises.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import sys
from importlib import metadata
from pathlib import Path
from typing import Final
from urllib.parse import unquote, urlparse

import attrs

__all__ = ["EXTRAS", "Install", "detect_install", "extra_installed", "extra_requirements", "install_hint"]

DISTRIBUTION: Final = "toolbridge"
#: The optional extras users install, what each is for, and the modules that show it is there.
EXTRAS: Final[dict[str, tuple[str, tuple[str, ...]]]] = {
    "code": ("code mode (Deno)", ("deno",)),
    # numpy runs the model, tokenizers splits text into its tokens, threadpoolctl keeps BLAS to
    # one thread (broker/discovery/_bert.py); the weights are fetched apart (`models fetch`)
    "semantic": ("semantic tool search", ("numpy", "tokenizers", "threadpoolctl")),
    "nats": ("federation over NATS", ("nats",)),
    "agent": ("broker.agent, agents in Python (the MCP SDK)", ("mcp",)),
}
_EXTRA_MARKER: Final = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


@attrs.frozen
class Install:
    """How this copy of toolbridge was installed (what :func:`install_hint` needs)."""

    #: "clone", "pipx", "uv-tool" or "venv" (any other environment)
    kind: str
    #: the interpreter running toolbridge
    python: Path
    #: the folder or URL toolbridge was installed from, when recorded (PEP 610)
    source: str | None = None


def detect_install(prefix: Path, python: Path, direct_url: str | None) -> Install:
    """Classify an installation from its environment's prefix, its interpreter and the text of
    its ``direct_url.json`` (None when there is none)."""
    source, editable = _source(direct_url)
    parts = prefix.parts
    if len(parts) >= 3 and parts[-1] == DISTRIBUTION and parts[-2] == "venvs" and "pipx" in parts[-3].lower():
        return Install("pipx", python, source)
    if len(parts) >= 3 and parts[-1] == DISTRIBUTION and parts[-2] == "tools" and "uv" in parts[-3].lower():
        return Install("uv-tool", python, source)
    if editable and source is not None and not source.startswith(("http:", "https:", "git+")):
        return Install("clone", python, source)
    return Install("venv", python, source)


def _source(direct_url: str | None) -> tuple[str | None, bool]:
    if not direct_url:
        return None, False
    try:
        info = json.loads(direct_url)
        url = str(info["url"])
    except (ValueError, KeyError, TypeError):
        return None, False
    editable = bool((info.get("dir_info") or {}).get("editable"))
    parsed = urlparse(url)
    if parsed.scheme == "file":
        return unquote(parsed.path), editable
    return url, editable


def extra_installed(extra: str) -> bool:
    """Whether the modules of ``extra`` can be imported (nothing is imported)."""
    return all(importlib.util.find_spec(module) is not None for module in EXTRAS[extra][1])


def extra_requirements(extra: str, requires: list[str]) -> list[str]:
    """The requirements an extra adds, from the distribution's ``Requires-Dist`` lines."""
    found = []
    for line in requires:
        spec, _, marker = line.partition(";")
        if extra in _EXTRA_MARKER.findall(marker):
            found.append(spec.strip())
    return found


def install_hint(extra: str) -> str:
    """The shell command that installs ``extra`` into the environment running toolbridge."""
    # The installed copy's metadata: a clone also holds setuptools' toolbridge.egg-info, which
    # comes first when the current folder is on sys.path (`python -m broker` in the clone) and
    # says nothing of how it was installed; the installer's record (PEP 610) is in the venv.
    found = sorted(metadata.distributions(name=DISTRIBUTION),
                   key=lambda d: d.read_text("direct_url.json") is None)
    if not found:  # run from a source tree that was never installed
        root = Path(__file__).resolve().parents[1]
        return f"{shlex.quote(sys.executable)} -m pip install -e {shlex.quote(f'{root}[{extra}]')}"
    direct_url, requires = found[0].read_text("direct_url.json"), found[0].requires or []
    install = detect_install(Path(sys.prefix), Path(sys.executable), direct_url)
    return command_for(install, extra, extra_requirements(extra, requires))


def command_for(install: Install, extra: str, requirements: list[str]) -> str:
    """The command for ``install`` (see the module's docstring)."""
    wanted = " ".join(shlex.quote(r) for r in requirements) or shlex.quote(f"{DISTRIBUTION}[{extra}]")
    if install.kind == "clone" and install.source is not None:
        pip = install.python.parent / ("pip.exe" if install.python.suffix == ".exe" else "pip")
        return f"{shlex.quote(str(pip))} install -e {shlex.quote(f'{install.source}[{extra}]')}"
    if install.kind == "pipx":
        return f"pipx inject {DISTRIBUTION} {wanted}"
    if install.kind == "uv-tool":
        if install.source is not None:
            return f"uv tool install --force {shlex.quote(f'{install.source}[{extra}]')}"
        return f"uv pip install --python {shlex.quote(str(install.python))} {wanted}"
    return f"{shlex.quote(str(install.python))} -m pip install {wanted}"
