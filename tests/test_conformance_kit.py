"""The conformance kit (broker/conformance): vectors, matching, and the runner against real apps.

The runner is run as a user runs it, `toolbridge conformance app -- COMMAND`, against real
app processes: the Python fixture app must pass every scenario, and a fixture with a fault
must fail the scenario that checks it, with a message that shows the offending line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from app_client.wire import Error, Message, decode_message
from broker.conformance import load_scenarios, runner
from broker.conformance.matching import Mismatch, fill, match, normalize
from broker.conformance.vectors import Scenario, VectorError

from agentkit import a_killed_runner_leaves_no_app, runner_with_app

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = [sys.executable, str(ROOT / "examples" / "conformance_app.py")]
BROKEN = [sys.executable, str(ROOT / "tests" / "conformance_broken_app.py")]
#: Message types a vector sends on purpose although version 1 has no such type.
FUTURE_TYPES = {"futureMessage"}
WIRE_TYPES = {t.__struct_config__.tag for t in Message.__args__}  # type: ignore[attr-defined]


def conformance(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "broker", "conformance", "app", *args],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT,
    )


# --- vectors -------------------------------------------------------------------------------


def test_every_vector_loads_and_every_step_is_checked() -> None:
    scenarios = load_scenarios()
    assert len(scenarios) >= 30
    assert all(s.steps[0] == {"accept": {}} for s in scenarios)


def test_vectors_send_only_lines_the_wire_module_decodes() -> None:
    """What the scripted broker sends is a valid wire message (or malformed on purpose)."""
    env = {"token": "t", "captures": {"instanceId": "i-1", "elicitId": 1}}
    sent = 0
    for scenario in load_scenarios():
        for step in scenario.steps:
            if "send" in step:
                line = msgspec.json.encode(fill(step["send"], env))
                if step["send"]["type"] in FUTURE_TYPES:
                    continue
                decode_message(line)  # raises RemoteProtocolError if the vector is wrong
                sent += 1
            for key in ("expect", "expectMaybe"):
                if key in step:
                    kinds = [p.get("type") for p in step[key].get("$oneOf", [step[key]])]
                    assert set(kinds) <= WIRE_TYPES | {"goodbye"}, (scenario.name, kinds)
    assert sent > 50


def test_unknown_scenario_names_are_refused() -> None:
    with pytest.raises(VectorError, match="no scenario named nope"):
        load_scenarios(["nope"])


# --- matching ------------------------------------------------------------------------------


def env() -> dict[str, Any]:
    return {"token": "secret", "captures": {}}


def test_defaults_are_filled_in_before_matching() -> None:
    line = b'{"type":"toolResponse","correlationId":1,"result":{"data":"x"}}'
    match({"type": "toolResponse", "result": {"success": True, "error": None}}, normalize(line), env())


def test_placeholders_capture_and_refer() -> None:
    e = env()
    match({"instanceId": "$capture:iid:$nonEmptyString", "token": "$token"}, {"instanceId": "a", "token": "secret"}, e)
    match({"instanceId": "$ref:iid"}, {"instanceId": "a"}, e)
    with pytest.raises(Mismatch, match="the iid seen earlier"):
        match({"instanceId": "$ref:iid"}, {"instanceId": "b"}, e)
    with pytest.raises(Mismatch, match="current token"):
        match({"token": "$token"}, {"token": "old"}, e)
    with pytest.raises(Mismatch, match="at least one character"):
        match("$capture:x:$nonEmptyString", "", e)


def test_contains_one_of_and_exact_arrays() -> None:
    e = env()
    match({"$contains": [{"name": "b"}, {"name": "a"}]}, [{"name": "a"}, {"name": "c"}, {"name": "b"}], e)
    with pytest.raises(Mismatch, match="no element matches"):
        match({"$contains": [{"name": "a"}, {"name": "a"}]}, [{"name": "a"}], e)
    match({"$oneOf": ["$null", "app_error"]}, None, e)
    with pytest.raises(Mismatch):
        match({"$oneOf": ["$null", "app_error"]}, "timeout", e)
    with pytest.raises(Mismatch, match="array of 2"):
        match([1, 2], [1, 2, 3], e)
    with pytest.raises(Mismatch):
        match(True, 1, e)


def test_a_line_the_wire_module_refuses_matches_nothing() -> None:
    with pytest.raises(Mismatch, match="invalid_message"):
        normalize(b'{"type":"toolResponse","correlationId":"one"}')
    assert normalize(msgspec.json.encode(Error(code="x", message="y")))["fatal"] is False


# --- the runner against real apps ------------------------------------------------------------


def test_the_python_fixture_app_passes_every_scenario() -> None:
    done = conformance("--", *FIXTURE)
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert sum(line.startswith("pass: ") for line in lines) == len(load_scenarios())
    assert lines[-1] == f"{len(load_scenarios())} of {len(load_scenarios())} scenarios passed"


def test_a_fixture_that_ignores_tool_cancel_fails_the_cancel_scenario() -> None:
    done = conformance("--only", "cancel-by-agent", "--only", "echo", "--", *BROKEN, "ignore-cancel")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "pass: echo" in lines
    [failure] = [line for line in lines if line.startswith("FAIL")]
    assert failure.startswith("FAIL: cancel-by-agent: step 7: expected nothing for 1500 ms, got ")
    assert '"type":"toolResponse","correlationId":1' in failure and "finished" in failure
    assert "1 required failed: cancel-by-agent" in lines[-1]


def test_a_fixture_that_ignores_the_cancel_of_a_read_fails_the_read_cancel_scenario() -> None:
    done = conformance("--only", "resource-read-cancel", "--only", "resource-read-text", "--", *BROKEN, "ignore-cancel")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "pass: resource-read-text" in lines
    [failure] = [line for line in lines if line.startswith("FAIL")]
    assert failure.startswith("FAIL: resource-read-cancel: step 7: expected nothing for 1500 ms, got ")
    assert '"type":"resourceResponse","correlationId":1' in failure and "finished" in failure


def test_a_fixture_that_never_announces_updates_fails_the_resource_updated_scenario() -> None:
    done = conformance("--only", "resource-updated", "--", *BROKEN, "no-resource-updated")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith(
        'FAIL: resource-updated: step 5: expected {"type":"resourceUpdated","uri":"conformance://text"}, '
        'got {"type":"toolResponse","correlationId":1'
    ), done.stdout


def test_a_fixture_that_sends_bytes_as_text_fails_the_blob_scenario() -> None:
    done = conformance("--only", "resource-read-blob", "--only", "resource-read-text", "--", *BROKEN, "blob-as-text")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "pass: resource-read-text" in lines
    [failure] = [line for line in lines if line.startswith("FAIL")]
    assert failure.startswith("FAIL: resource-read-blob: step 5: expected ")
    assert "blob" in failure


def test_a_fixture_that_ignores_the_cancel_of_a_completion_fails_the_complete_cancel_scenario() -> None:
    done = conformance("--only", "complete-cancel", "--only", "complete-prompt", "--", *BROKEN, "ignore-cancel")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "pass: complete-prompt" in lines
    [failure] = [line for line in lines if line.startswith("FAIL")]
    assert failure.startswith("FAIL: complete-cancel: step 7: expected nothing for 1500 ms, got ")
    assert '"type":"completeResponse","correlationId":1' in failure and "finished" in failure


def test_a_fixture_whose_call_log_loses_its_call_fails_the_log_scenario() -> None:
    done = conformance("--only", "log", "--only", "elicit-form", "--", *BROKEN, "log-without-call")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "pass: elicit-form" in lines
    [failure] = [line for line in lines if line.startswith("FAIL")]
    assert failure.startswith("FAIL: log: step 6: expected ")
    assert "correlationId" in failure


def test_max_version_1_leaves_out_the_version_2_scenarios() -> None:
    v1 = [s for s in load_scenarios() if s.version == 1]
    v2 = [s.name for s in load_scenarios() if s.version == 2]
    assert len(v2) >= 15 and {"resource-read-cancel", "set-prompts", "prompt-get", "v2-register"} <= set(v2)
    assert [s.name for s in load_scenarios(max_version=1)] == [s.name for s in v1]
    listed = conformance("--list").stdout.splitlines()
    assert any(line.startswith("resource-read-text (v2): ") for line in listed)
    assert conformance("--list", "--max-version", "1").stdout.splitlines() == [
        line for line in listed if " (v2): " not in line]


def test_a_fixture_that_quits_without_goodbye_fails_the_goodbye_scenario() -> None:
    done = conformance("--only", "goodbye", "--", *BROKEN, "no-goodbye")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith(
        'FAIL: goodbye: step 7: expected {"type":"goodbye"}, got the connection closed'
    ), done.stdout


def test_a_command_that_does_not_start_fails_clearly() -> None:
    done = conformance("--only", "echo", "--", str(ROOT / "no-such-app"))
    assert done.returncode == 1
    assert done.stdout.startswith("FAIL: echo: cannot start the app command"), done.stdout


def test_no_command_is_a_usage_error() -> None:
    done = conformance()
    assert done.returncode == 2
    assert "give the app's command after --" in done.stderr


def test_an_app_that_exits_at_once_fails_with_its_exit_code_and_stderr(tmp_path: Path) -> None:
    script = tmp_path / "crash.py"
    script.write_text('import sys\nprint("boom: no display", file=sys.stderr)\nsys.exit(3)\n', encoding="utf-8")
    done = conformance("--only", "echo", "--", sys.executable, str(script))
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[0] == (
        "FAIL: echo: step 1: expected the app to connect within 30000 ms, got no connection "
        "(the app exited with code 3)"
    )
    assert lines[1] == "    app stderr: boom: no display"


@pytest.mark.skipif(os.name != "posix", reason="signals are POSIX")
async def test_an_app_stuck_before_it_connects_is_asked_for_its_stacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Like Mono on SIGQUIT: print every thread's stack on stdout, and carry on.
    script = tmp_path / "stuck.py"
    script.write_text(
        "import signal, sys, time\n"
        "def dump(*_):\n"
        "    print('Full thread dump:', flush=True)\n"
        "    print('  at Fixture.Main () waiting for a lock', flush=True)\n"
        "signal.signal(signal.SIGQUIT, dump)\n"
        "print('starting', file=sys.stderr, flush=True)\n"
        "while True:\n"
        "    time.sleep(1)\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(runner, "START_UP_MS", 3000)  # time enough to set up its handler
    stuck = Scenario(name="stuck", summary="the app never connects", covers=[],
                     steps=[{"accept": True, "withinMs": 100}])
    result = await runner.run_scenario(stuck, [sys.executable, str(script)], stacks_signal=signal.SIGQUIT)
    assert result.failure == ("step 1: expected the app to connect within 3000 ms, got no connection; "
                              "what it printed on SIGQUIT follows")
    assert result.stdout_tail == ("Full thread dump:", "  at Fixture.Main () waiting for a lock")
    assert result.stderr_tail == ("starting",)
    # without the option nothing is sent and stdout is not read
    plain = await runner.run_scenario(stuck, [sys.executable, str(script)])
    assert plain.failure == "step 1: expected the app to connect within 3000 ms, got no connection"
    assert plain.stdout_tail == ()


def test_a_stacks_signal_that_does_not_exist_is_a_usage_error() -> None:
    done = conformance("--stacks-signal", "NOPE", "--", sys.executable, "-c", "pass")
    assert done.returncode == 2
    assert "--stacks-signal NOPE: not a signal here" in done.stderr
    assert done.stdout == ""


@pytest.mark.skipif(os.name != "posix", reason="SIGTERM is POSIX")
def test_a_runner_stopped_by_sigterm_stops_its_apps_first(tmp_path: Path) -> None:
    # Found when runners were killed mid-run: their apps lived on, retrying ports that later
    # runs listened on, and registered there with their own tokens.
    kit, app = runner_with_app(tmp_path, "import time\nwhile True:\n    time.sleep(1)\n", capture=True)
    try:
        kit.send_signal(signal.SIGTERM)
        _, err = kit.communicate(timeout=60)
    finally:
        kit.kill()
    assert kit.returncode == 128 + signal.SIGTERM
    assert "stopped by SIGTERM; the app processes it started were stopped" in err
    with pytest.raises(ProcessLookupError):
        os.kill(app, 0)  # stopped and reaped by the runner, not left running


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads a zombie's state from /proc")
def test_the_fixture_app_outlives_no_runner_even_one_killed_outright(tmp_path: Path) -> None:
    """Before, such an app retried its port for ever (see agentkit.a_killed_runner_leaves_no_app)."""
    a_killed_runner_leaves_no_app(tmp_path, FIXTURE, dict(os.environ))


@pytest.mark.skipif(os.name != "posix", reason="SIGTERM and process groups are POSIX")
def test_an_app_that_ignores_sigterm_is_killed_at_the_end(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    done = conformance("--only", "echo", "--", *BROKEN, "ignore-term", str(pid_file))
    assert done.stdout.startswith("pass: echo"), done.stdout + done.stderr
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone (killed after the grace period, and reaped by the runner)


def test_list_names_every_scenario_with_its_summary() -> None:
    done = conformance("--list")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(load_scenarios())
    assert any(line.startswith("cancel-by-agent: After toolCancel") for line in lines)
    assert any(line.startswith("silence (optional): ") for line in lines)
