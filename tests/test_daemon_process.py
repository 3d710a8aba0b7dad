"""`toolbridge serve` as a real process: home files, refusals, signals, configuration."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.errors import ConfigError
from broker.config.settings_file import load_settings

SERVE = [sys.executable, "-m", "broker", "serve"]


def wait_for_runtime(home: Path, proc: subprocess.Popen[str], timeout: float = 20) -> dict:
    """Poll for the runtime file the daemon writes once its listeners are bound."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"daemon exited early: {proc.communicate()}")
        try:
            return json.loads((home / "runtime.json").read_text())
        except (FileNotFoundError, ValueError):
            time.sleep(0.02)
    raise AssertionError("daemon did not start")


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str], dict]]:
    home = tmp_path / "home"
    proc = subprocess.Popen([*SERVE, "--home", str(home), "--port", "0", "--http-port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield home, proc, wait_for_runtime(home, proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_first_start_creates_a_private_token_and_runtime_file(running: tuple) -> None:
    home, proc, runtime = running
    token = (home / "token").read_text().strip()
    assert len(token) >= 32
    if os.name == "posix":
        assert stat.S_IMODE((home / "token").stat().st_mode) == 0o600
        assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert runtime["pid"] == proc.pid and runtime["host"] == "127.0.0.1"
    assert isinstance(runtime["port"], int) and runtime["port"] > 0


def test_a_second_daemon_on_the_same_home_is_refused(running: tuple) -> None:
    home, proc, runtime = running
    second = subprocess.run([*SERVE, "--home", str(home), "--port", "0", "--http-port", "0"],
                            capture_output=True, text=True, timeout=30)
    assert second.returncode == 1
    assert f"pid {proc.pid}" in second.stderr and "is running with the home" in second.stderr
    assert "Traceback" not in second.stderr


@pytest.mark.parametrize("trial", range(3))
def test_two_daemons_started_together_on_one_home_leave_exactly_one(tmp_path: Path, trial: int) -> None:
    """Regression (issue 14, item 6): with port 0 both bound and both kept running. The home's
    lock lets exactly one run; the other exits at once with a message naming the winner."""
    home = tmp_path / "home"
    procs = [subprocess.Popen([*SERVE, "--home", str(home), "--port", "0", "--http-port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        runtime = wait_for_runtime_any(home, procs)
        [winner] = [p for p in procs if p.pid == runtime["pid"]]
        [loser] = [p for p in procs if p is not winner]
        _out, err = loser.communicate(timeout=30)
        assert loser.returncode == 1
        # The loser may look between the winner's lock and the pid it writes next: then the
        # message says the pid is not written yet (still naming the home and what to do).
        named = (f"another toolbridge daemon (pid {winner.pid}) is running with the home {home}",
                 f"another toolbridge daemon (its pid is not written yet) is running with the home {home}")
        assert any(text in err for text in named), err
        assert "--home" in err and "Traceback" not in err
        assert winner.poll() is None
        if os.name == "posix":
            assert stat.S_IMODE((home / "daemon.lock").stat().st_mode) == 0o600
        assert (home / "daemon.lock").read_text().strip() == str(winner.pid)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


def wait_for_runtime_any(home: Path, procs: list[subprocess.Popen[str]], timeout: float = 30) -> dict:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return json.loads((home / "runtime.json").read_text())
        except (FileNotFoundError, ValueError):
            if all(p.poll() is not None for p in procs):
                raise AssertionError(f"both daemons exited: {[p.communicate() for p in procs]}") from None
            time.sleep(0.02)
    raise AssertionError("no daemon started")


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_killed_daemons_lock_does_not_block_the_next_start(running: tuple) -> None:
    home, proc, _runtime = running
    proc.kill()  # SIGKILL: no clean-up at all; the OS drops the lock with the process
    proc.communicate()
    assert (home / "daemon.lock").read_text().strip() == str(proc.pid)  # stale pid left behind
    second = subprocess.Popen([*SERVE, "--home", str(home), "--port", "0", "--http-port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        import time

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if json.loads((home / "runtime.json").read_text())["pid"] == second.pid:
                    break
            except (FileNotFoundError, ValueError, KeyError):
                pass
            assert second.poll() is None, second.communicate()
            time.sleep(0.02)
        else:
            raise AssertionError("the second daemon did not start")
        assert (home / "daemon.lock").read_text().strip() == str(second.pid)
    finally:
        second.kill()
        second.communicate()


def test_a_taken_port_is_refused_with_a_hint(running: tuple, tmp_path: Path) -> None:
    _, _, runtime = running
    other = subprocess.run([*SERVE, "--home", str(tmp_path / "other"), "--port", str(runtime["port"]),
                            "--http-port", "0"], capture_output=True, text=True, timeout=30)
    assert other.returncode == 1
    assert f"port {runtime['port']}" in other.stderr and "--port" in other.stderr
    assert "Traceback" not in other.stderr


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signals_stop_the_daemon_cleanly(running: tuple, signum: int) -> None:
    home, proc, _ = running
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "daemon_stopped" in err
    assert not (home / "runtime.json").exists()


def test_a_stale_runtime_file_is_replaced(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "runtime.json").write_text(json.dumps({"pid": 999999, "host": "127.0.0.1", "port": 1}))
    proc = subprocess.Popen([*SERVE, "--home", str(home), "--port", "0", "--no-http"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        import time

        deadline = time.monotonic() + 20
        while json.loads((home / "runtime.json").read_text()).get("pid") != proc.pid:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.02)
    finally:
        proc.kill()
        proc.communicate()


def test_non_loopback_bind_needs_an_explicit_flag(tmp_path: Path) -> None:
    result = subprocess.run([*SERVE, "--home", str(tmp_path), "--host", "0.0.0.0", "--port", "0", "--no-http"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert "--allow-remote" in result.stderr and "Traceback" not in result.stderr


def test_invalid_config_names_the_key(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('default_timeout = "soon"\n')
    result = subprocess.run([*SERVE, "--home", str(tmp_path), "--port", "0", "--no-http"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert "default_timeout" in result.stderr and "a number" in result.stderr


# --- configuration precedence, in-process ---------------------------------------------------


def test_precedence_defaults_file_env_flags(tmp_path: Path) -> None:
    import argparse

    (tmp_path / "config.toml").write_text("default_timeout = 60\nport = 5000\nlog_format = 'json'\n")
    env = {"TOOLBRIDGE_PORT": "6000", "TOOLBRIDGE_PATH_GUARD": "off"}
    flags = argparse.Namespace(port=7000, host=None, http_port=None, log_format=None, no_http=True, allow_remote=False)
    settings = load_settings(flags, tmp_path, env)
    assert settings.default_timeout == 60.0  # file
    assert settings.log_format == "json"  # file
    assert settings.path_guard is False  # environment
    assert settings.port == 7000  # flag beats environment beats file
    assert settings.http_port is None
    assert load_settings(None, tmp_path, env).port == 6000


@pytest.mark.parametrize(
    ("toml", "words"),
    [
        ("nonsense = 1\n", "unknown setting 'nonsense'"),
        ("max_queue = -1\n", "max_queue"),
        ("path_guard = 'maybe'\n", "true or false"),
        ("log_format = 'xml'\n", "one of auto, console, json"),
        ("port = 70000\n", "0 to 65535"),
        ("port = [\n", "not valid TOML"),
    ],
)
def test_invalid_settings_are_named(tmp_path: Path, toml: str, words: str) -> None:
    (tmp_path / "config.toml").write_text(toml)
    with pytest.raises(ConfigError) as info:
        load_settings(None, tmp_path, {})
    assert words in str(info.value)


def test_invalid_environment_value_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(None, tmp_path, {"TOOLBRIDGE_DEFAULT_TIMEOUT": "soon"})
    assert "TOOLBRIDGE_DEFAULT_TIMEOUT" in str(info.value)
