"""app_client against the real broker (the ``daemon`` fixture of conftest.py), over TCP.

These check that the library and the daemon agree on the protocol: registration through
discovery in the daemon's home, calls with progress, errors, deadlines, agent cancellation
and tools added at runtime. The agent side is the router's ``call_tool``.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from app_client import App, ConnectionState, ToolContext, ToolError
from app_client.discovery import ENV_HOME, ENV_HOST, ENV_PORT, ENV_TOKEN
from broker.daemon.run import DaemonInfo


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (ENV_HOME, ENV_HOST, ENV_PORT, ENV_TOKEN):
        monkeypatch.delenv(name, raising=False)


def make_app(daemon: DaemonInfo, **options: Any) -> App:
    return App("E2E", host=daemon.host, port=daemon.port, token=daemon.token, **options)


async def call(daemon: DaemonInfo, name: str, args: dict[str, Any], **kw: Any) -> Any:
    return await daemon.core.router.call_tool(name, args, **kw)


async def test_register_call_progress_and_errors(daemon: DaemonInfo) -> None:
    app = make_app(daemon, max_concurrency=2)

    @app.tool
    async def add(a: int, b: int = 1, ctx: ToolContext | None = None) -> dict[str, int]:
        """Add two numbers."""
        return {"sum": a + b}

    @app.tool(name="Work")
    async def work(steps: int, ctx: ToolContext) -> str:
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step}")
        return "done"

    @app.tool
    def refuse() -> None:
        raise ToolError("nothing to refuse")

    with trio.fail_after(10):
        async with app.connected():
            assert dict(app.agent_names) == {"add": "E2E__add", "Work": "E2E__Work", "refuse": "E2E__refuse"}
            outcome = await call(daemon, "E2E__add", {"a": 2})
            assert outcome.kind == "ok" and outcome.result.data == {"sum": 3}

            invalid = await call(daemon, "E2E__add", {"a": "two"})
            assert invalid.kind == "invalid_arguments"

            seen: list[tuple[float, float | None, str | None]] = []
            outcome = await call(daemon, "E2E__Work", {"steps": 3}, on_progress=lambda p, t, m: seen.append((p, t, m)))
            assert outcome.kind == "ok" and outcome.result.data == "done"
            assert seen == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]

            outcome = await call(daemon, "E2E__refuse", {})
            assert (outcome.kind, outcome.message) == ("app_error", "nothing to refuse")


async def test_deadline_and_agent_cancel_reach_the_handler(daemon: DaemonInfo) -> None:
    app = make_app(daemon, max_concurrency=2)
    contexts: list[ToolContext] = []
    ended: list[trio.Event] = []  # one per call, set once its handler was cancelled
    started = trio.Event()

    @app.tool
    async def hang(ctx: ToolContext) -> None:
        contexts.append(ctx)
        done = trio.Event()
        ended.append(done)
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            done.set()

    with trio.fail_after(10):
        async with app.connected():
            outcome = await call(daemon, "E2E__hang", {}, timeout=0.3)
            # The app's own timeout message wins the race with the broker's, and says its kind.
            assert outcome.kind == "timeout" and "hang timed out after" in outcome.message
            assert contexts[0].cancelled

            started = trio.Event()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(call, daemon, "E2E__hang", {})
                await started.wait()
                nursery.cancel_scope.cancel()
            await ended[1].wait()  # the toolCancel is on its way
            assert contexts[1].cancelled


async def test_discovery_from_home_and_tools_at_runtime(daemon: DaemonInfo, tmp_path: Any) -> None:
    states: list[ConnectionState] = []
    app = App("E2E", home=tmp_path / "home", on_state_change=states.append)

    async def later(text: str) -> str:
        return text.upper()

    with trio.fail_after(10):
        async with app.connected():
            await app.add_tool(later, name="Later")
            assert app.agent_names["Later"] == "E2E__Later"
            names = {tool.agent_name for tool in daemon.core.router.list_tools()}
            assert "E2E__Later" in names
            outcome = await call(daemon, "E2E__Later", {"text": "hi"})
            assert outcome.result.data == "HI"
            await app.remove_tool("Later")
            assert "E2E__Later" not in {tool.agent_name for tool in daemon.core.router.list_tools()}
    assert states == [ConnectionState.CONNECTING, ConnectionState.CONNECTED, ConnectionState.DISCONNECTED]
