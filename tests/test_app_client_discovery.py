"""Daemon discovery (app_client.discovery): arguments > environment > home directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app_client import DaemonNotFound, find_daemon
from app_client.discovery import ENV_HOME, ENV_HOST, ENV_PORT, ENV_TOKEN, default_home, read_runtime


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (ENV_HOME, ENV_HOST, ENV_PORT, ENV_TOKEN):
        monkeypatch.delenv(name, raising=False)


def write_home(home: Path, *, token: str | None = "tok\n", port: int = 4567, host: str = "127.0.0.1") -> None:
    home.mkdir(parents=True, exist_ok=True)
    if token is not None:
        (home / "token").write_text(token, encoding="utf-8")
    runtime = {"pid": 1, "host": host, "port": port, "httpPort": None, "version": "0.1.0", "startedAt": 1.5}
    (home / "runtime.json").write_text(json.dumps(runtime), encoding="utf-8")


def test_from_home_files(tmp_path: Path) -> None:
    write_home(tmp_path, token="  tok  \n", host="::1")
    address = find_daemon(home=tmp_path)
    assert (address.host, address.port, address.token) == ("::1", 4567, "tok")
    assert address.runtime_file == tmp_path / "runtime.json"
    assert "tok" not in repr(address)
    info = read_runtime(tmp_path)
    assert info.http_port is None and info.started_at == 1.5


def test_environment_beats_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_home(tmp_path)
    monkeypatch.setenv(ENV_HOME, str(tmp_path))
    monkeypatch.setenv(ENV_PORT, "9999")
    monkeypatch.setenv(ENV_HOST, "localhost")
    monkeypatch.setenv(ENV_TOKEN, "envtok")
    address = find_daemon()
    assert (address.host, address.port, address.token) == ("localhost", 9999, "envtok")
    assert address.runtime_file is None


def test_arguments_beat_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_PORT, "9999")
    monkeypatch.setenv(ENV_TOKEN, "envtok")
    address = find_daemon(home=tmp_path / "missing", host="h", port=1234, token="argtok")
    assert (address.host, address.port, address.token) == ("h", 1234, "argtok")


def test_each_value_resolved_separately(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_home(tmp_path, token="filetok")
    monkeypatch.setenv(ENV_HOME, str(tmp_path))
    address = find_daemon(port=1111)
    assert (address.host, address.port, address.token) == ("127.0.0.1", 1111, "filetok")


def test_token_file_reread_each_call(tmp_path: Path) -> None:
    write_home(tmp_path, token="one")
    assert find_daemon(home=tmp_path).token == "one"
    (tmp_path / "token").write_text("two\n", encoding="utf-8")
    assert find_daemon(home=tmp_path).token == "two"


def test_not_running_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(DaemonNotFound, match="toolbridge serve"):
        find_daemon(home=tmp_path)
    write_home(tmp_path, token=None)
    with pytest.raises(DaemonNotFound, match="toolbridge serve"):
        find_daemon(home=tmp_path)
    (tmp_path / "token").write_text("  \n", encoding="utf-8")
    with pytest.raises(DaemonNotFound, match="empty"):
        find_daemon(home=tmp_path)


def test_malformed_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tmp_path.joinpath("runtime.json").write_text("{not json", encoding="utf-8")
    tmp_path.joinpath("token").write_text("t", encoding="utf-8")
    with pytest.raises(DaemonNotFound, match="not a valid toolbridge runtime file"):
        find_daemon(home=tmp_path)
    monkeypatch.setenv(ENV_PORT, "http")
    with pytest.raises(DaemonNotFound, match="TOOLBRIDGE_PORT"):
        find_daemon(home=tmp_path)
    with pytest.raises(DaemonNotFound, match="1-65535"):
        find_daemon(home=tmp_path, port=70000)


def test_default_home_is_per_user() -> None:
    assert default_home().name.lower() == "toolbridge"
