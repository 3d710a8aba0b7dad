"""app_client pitfalls (issue 19 items 8 and 9): progress from sync tools, parameter
descriptions in pydantic's spelling, ``pathlib.Path`` parameters, and a quiet log while the
daemon is down."""

from __future__ import annotations

import pathlib
from typing import Annotated, Any

import msgspec
import pytest
import structlog
import trio
import trio.testing

from app_client import App, ToolContext
from app_client.app import FAILURE_LOG_INTERVAL
from app_client.discovery import DaemonAddress, ENV_HOME, ENV_HOST, ENV_PORT, ENV_TOKEN
from app_client.errors import ToolDefinitionError
from app_client.tools import define_tool, derive_input_schema
from broker.daemon.run import DaemonInfo

try:  # module level: the annotations below are resolved in this module's globals
    import pydantic
except ImportError:  # pragma: no cover - the test extra installs it (through mcp)
    pydantic = None  # type: ignore[assignment]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (ENV_HOME, ENV_HOST, ENV_PORT, ENV_TOKEN):
        monkeypatch.delenv(name, raising=False)


def make_app(daemon: DaemonInfo, **options: Any) -> App:
    return App("Pit", host=daemon.host, port=daemon.port, token=daemon.token, **options)


# --- progress from a sync tool ---------------------------------------------------------------


async def test_a_sync_tool_reports_progress_with_report_progress(daemon: DaemonInfo) -> None:
    app = make_app(daemon)

    @app.tool
    def crunch(steps: int, ctx: ToolContext) -> str:  # runs in a worker thread
        for step in range(1, steps + 1):
            ctx.report_progress(step, steps, f"step {step}")  # no await: a sync function cannot
        return "crunched"

    seen: list[tuple[float, float | None, str | None]] = []
    with trio.fail_after(10):
        async with app.connected():
            outcome = await daemon.core.router.call_tool(
                "Pit__crunch", {"steps": 3}, on_progress=lambda p, t, m: seen.append((p, t, m)))
    assert outcome.kind == "ok" and outcome.result.data == "crunched"
    assert seen == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]


async def test_report_progress_outside_trio_returns_a_finished_awaitable() -> None:
    sent: list[Any] = []
    ctx = ToolContext(correlation_id=1, tool="T", send_progress_threadsafe=sent.append)
    pending = await trio.to_thread.run_sync(lambda: ctx.report_progress(1, 2, "half"))
    assert len(sent) == 1 and sent[0].progress == 1.0 and sent[0].message == "half"
    await pending  # awaiting it anyway is harmless
    assert len(sent) == 1


# --- parameter descriptions and paths ---------------------------------------------------------


class DuckField:
    """What pydantic's ``Field(description=...)`` looks like to app_client (no pydantic needed)."""

    def __init__(self, description: str, title: str | None = None) -> None:
        self.description = description
        self.title = title


def test_descriptions_from_field_like_objects_and_msgspec_meta() -> None:
    def tool(
        text: Annotated[str, DuckField("What to type", title="Text")],
        count: Annotated[int, msgspec.Meta(description="How often", ge=1)] = 1,
    ) -> None: ...

    properties = derive_input_schema(tool)["properties"]
    assert properties["text"] == {"type": "string", "description": "What to type", "title": "Text"}
    assert properties["count"] == {"type": "integer", "description": "How often", "minimum": 1, "default": 1}


def test_pydantic_field_description() -> None:
    if pydantic is None:
        pytest.skip("pydantic is not installed")

    def tool(text: Annotated[str, pydantic.Field(description="What to type")]) -> None: ...

    assert derive_input_schema(tool)["properties"]["text"] == {"type": "string", "description": "What to type"}

    def as_default(text: str = pydantic.Field(description="x")) -> None: ...

    with pytest.raises(ToolDefinitionError, match="'text' has a pydantic Field as its default"):
        define_tool(as_default)


def test_path_parameters_are_strings_in_the_schema_and_paths_in_the_handler() -> None:
    def tool(
        source: pathlib.Path,
        target: pathlib.Path | None = None,
        extra: list[pathlib.PurePosixPath] | None = None,
        out: pathlib.Path = pathlib.Path("out.txt"),
    ) -> None: ...

    definition = define_tool(tool)
    properties = definition.spec.input_schema["properties"]
    assert properties["source"] == {"type": "string"}
    assert properties["out"] == {"type": "string", "default": "out.txt"}
    ctx = ToolContext(correlation_id=1, tool="tool")
    _, kwargs = definition.bind({"source": "a/b.txt", "extra": ["c"]}, ctx)
    assert kwargs == {"source": pathlib.Path("a/b.txt"), "target": None,
                      "extra": [pathlib.PurePosixPath("c")], "out": pathlib.Path("out.txt")}
    assert type(kwargs["out"]) is type(pathlib.Path("out.txt"))


def test_a_type_without_a_schema_is_refused_naming_the_parameter() -> None:
    def tool(count: int, lock: trio.Lock) -> None: ...

    with pytest.raises(ToolDefinitionError, match="parameter 'lock' of type Lock has no JSON schema"):
        define_tool(tool)


def test_an_annotation_that_cannot_be_resolved_is_refused_not_ignored() -> None:
    # With `from __future__ import annotations` the hint is a string; a name only imported
    # inside the function cannot be resolved. Before: the parameter silently took anything.
    def tool(text: NotImportedAnywhere) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(ToolDefinitionError, match="cannot resolve the type hints"):
        define_tool(tool)


async def test_a_path_parameter_end_to_end(daemon: DaemonInfo) -> None:
    app = make_app(daemon)

    @app.tool
    def stat(path: pathlib.Path) -> str:
        return f"{type(path).__name__}:{path.name}"

    with trio.fail_after(10):
        async with app.connected():
            outcome = await daemon.core.router.call_tool("Pit__stat", {"path": "docs/readme.md"})
            wrong = await daemon.core.router.call_tool("Pit__stat", {"path": 3})
    assert outcome.kind == "ok" and outcome.result.data == f"{type(pathlib.Path()).__name__}:readme.md"
    assert wrong.kind == "invalid_arguments"


# --- a daemon that stays down --------------------------------------------------------------------


async def test_a_daemon_that_stays_down_is_logged_rarely(autojump_clock: trio.testing.MockClock) -> None:
    attempts = 0

    async def refused(address: DaemonAddress) -> trio.abc.Stream:
        nonlocal attempts
        attempts += 1
        raise ConnectionRefusedError(111, "Connection refused")

    minutes = 5
    with structlog.testing.capture_logs() as logs:
        app = App("Down", host="127.0.0.1", port=9, token="t", connector=refused)
        with trio.move_on_after(minutes * 60 + 1):
            await app.run()
    failures = [entry for entry in logs if "toolbridge" in entry["event"] and entry.get("error")]
    assert attempts > 50  # it kept trying every few seconds
    assert 1 <= len(failures) <= minutes * 60 / FAILURE_LOG_INTERVAL + 1, [e["event"] for e in logs]
    assert [entry["log_level"] for entry in logs] == ["warning"] * len(logs)  # no per-attempt debug lines
    first, later = failures[0], failures[1:]
    assert "Connection refused" in first["error"] and 0 <= first["next_retry_in_s"] <= 5
    assert later and later[-1]["failed_attempts"] > 50 and later[-1]["failing_for_s"] >= 4 * 60


# --- never on stdout ---------------------------------------------------------------------------

_UNCONFIGURED_APP = """
import trio, trio.testing
from app_client import App

attempts = 0

async def refuse(address):
    global attempts
    attempts += 1
    if attempts == 2:  # the first failure has been logged and retried
        scope.cancel()
    raise OSError("nobody listens")

app = App("Quiet", host="127.0.0.1", port=9, token="x", connector=refuse)
scope = trio.CancelScope()

async def main():
    with scope:
        await app.run()

trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
"""


def test_an_unconfigured_host_gets_app_client_logs_on_stderr_never_stdout() -> None:
    """structlog's default PrintLogger writes to stdout; a host that never configured structlog
    (Blender's console, a stdio MCP server) must not find app_client's messages there."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", _UNCONFIGURED_APP], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout == ""
    assert "connection attempt failed" in run.stderr


_HOST_STDERR_APP = """
import sys
from app_client.logs import get_logger

class HostConsole:  # like FreeCAD's sys.stderr (OutputStderr): no weak references
    __slots__ = ("lines",)
    def __init__(self):
        self.lines = []
    def write(self, text):
        self.lines.append(text)
    def flush(self):
        pass

console = sys.stderr = HostConsole()
get_logger("toolbridge.test").warning("through the host's console", n=1)
sys.__stderr__.write("".join(console.lines))
"""


def test_logs_reach_a_host_stderr_that_cannot_be_weakly_referenced() -> None:
    """FreeCAD replaces sys.stderr with an object that takes no weak reference, which
    structlog's PrintLogger needs for its per-file lock: logging raised TypeError there and
    ended the app's thread."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", _HOST_STDERR_APP], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "through the host's console" in run.stderr and run.stdout == ""


def test_app_client_logs_follow_the_host_once_it_configured_structlog() -> None:
    from app_client.logs import get_logger

    with structlog.testing.capture_logs() as logs:
        get_logger("toolbridge.test").bind(app="A").warning("hello", n=1)
    assert logs == [{"app": "A", "n": 1, "event": "hello", "log_level": "warning"}]
