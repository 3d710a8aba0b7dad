"""The app client against a fake broker: registration, calls, heartbeats, reconnects.

Most tests join the App and app_client.testing.FakeBroker with in-memory streams (the
App's ``connector``); those that measure time use ``autojump_clock``. Tests whose handlers
run in worker threads use the real clock (autojump would jump while a thread works), and
one test goes over real TCP with discovery through a home directory.
"""

from __future__ import annotations

import contextvars
import json
import random
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from app_client import (
    App,
    Backoff,
    ConnectionClosed,
    ConnectionState,
    InstanceReplaced,
    RegistrationRejected,
    ToolContext,
    ToolDefinitionError,
    ToolError,
    ToolResult,
    ToolUpdateRejected,
    image,
    text,
)
from app_client.discovery import ENV_HOME, ENV_HOST, ENV_PORT, ENV_TOKEN, DaemonAddress
from app_client.testing import FakeBroker, FakeLink
from app_client.wire import (
    AddTools,
    Error,
    Register,
    RemoveTools,
    ToolCancel,
    ToolsUpdated,
)

TOKEN = "secret-token"
S = ConnectionState


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (ENV_HOME, ENV_HOST, ENV_PORT, ENV_TOKEN):
        monkeypatch.delenv(name, raising=False)


def make_app(broker: FakeBroker, **options: object) -> App:
    app = App("Demo", host="fake", port=1, token=TOKEN, connector=broker.connector, **options)  # type: ignore[arg-type]

    @app.tool
    async def echo(text: str) -> str:
        """Echo the text back."""
        return text

    return app


@asynccontextmanager
async def running(app: App, limit: float = 30) -> AsyncIterator[trio.Nursery]:
    """Run ``app`` in the background for the block (bounded by ``limit`` seconds)."""
    with trio.fail_after(limit):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(app.run)
            yield nursery
            nursery.cancel_scope.cancel()


async def connect(broker: FakeBroker, app: App, **registered: int) -> FakeLink:
    link = await broker.accept()
    await link.accept_registration(check_token=TOKEN, **registered)
    await app.wait_connected()
    return link


_REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="unset")


async def test_each_call_starts_with_fresh_context_variables() -> None:
    """A handler that sets a context variable (structlog's bind_contextvars, say) does not leak
    it into later calls, even though call tasks are reused between calls."""
    broker = FakeBroker()
    app = make_app(broker)
    seen: list[str] = []

    @app.tool
    async def tag(value: str) -> str:
        """Record what the variable held, then set it."""
        seen.append(_REQUEST_ID.get())
        _REQUEST_ID.set(value)
        await trio.sleep(0)
        return _REQUEST_ID.get()

    async with running(app):
        link = await connect(broker, app)
        for n in range(3):  # one at a time: the same parked task takes each next call
            assert await link.call("tag", {"value": f"call {n}"}) == ToolResult(data=f"call {n}")
        first, second = await link.invoke("tag", {"value": "a"}), await link.invoke("tag", {"value": "b"})
        answers = {(await link.response()).correlation_id for _ in range(2)}
        assert answers == {first, second}
    assert seen == ["unset"] * 5


# --- registration and basic calls ----------------------------------------------------------


async def test_registers_with_token_and_tools() -> None:
    broker = FakeBroker()
    states: list[ConnectionState] = []
    app = make_app(broker, instance_id="inst-1", max_concurrency=3, on_state_change=states.append, app_version="1.2")
    async with running(app):
        link = await broker.accept()
        register = await link.accept_registration(check_token=TOKEN)
        await app.wait_connected()
        assert app.state is S.CONNECTED
        assert dict(app.agent_names) == {"echo": "Demo__echo"}
        assert app.registration is not None and app.registration.app_label == "Demo"
    assert register.app_name == "Demo"
    assert register.token == TOKEN
    assert register.instance_id == "inst-1"
    assert register.max_concurrency == 3
    assert register.app_version == "1.2"
    assert [t.name for t in register.tools] == ["echo"]
    assert register.tools[0].description == "Echo the text back."
    assert register.tools[0].input_schema["required"] == ["text"]
    assert states == [S.CONNECTING, S.CONNECTED, S.DISCONNECTED]
    assert dict(app.agent_names) == {} and app.registration is None


async def test_answers_ping_and_runs_calls() -> None:
    broker = FakeBroker()
    app = make_app(broker)

    @app.tool(name="Screenshot")
    async def screenshot() -> list[dict[str, str]]:
        return [text("the screen"), image(b"PNG")]

    @app.tool
    async def nothing() -> None:
        return None

    async with running(app):
        link = await connect(broker, app)
        await link.ping(41)
        assert await link.call("echo", {"text": "hi"}) == ToolResult(success=True, data="hi")
        shot = await link.call("Screenshot")
        assert shot.content is not None and [b["type"] for b in shot.content] == ["text", "image"]
        assert await link.call("nothing") == ToolResult(success=True)


async def test_bad_arguments_and_unknown_tool_fail_the_call() -> None:
    broker = FakeBroker()
    app = make_app(broker)
    async with running(app):
        link = await connect(broker, app)
        result = await link.call("echo", {"text": 5})
        assert not result.success and result.error is not None
        assert "invalid arguments for echo" in result.error and "$.text" in result.error
        result = await link.call("nope", {})
        assert result == ToolResult(success=False, error="unknown tool 'nope'")


async def test_handler_errors_are_safe() -> None:
    broker = FakeBroker()
    app = make_app(broker)

    @app.tool(name="ClickElement")
    async def click(x: int) -> None:
        raise ValueError(f"secret path /home/me/{x}")

    @app.tool
    async def find() -> None:
        raise ToolError("element 'OK' not found")

    @app.tool
    async def unsendable() -> object:
        return object()

    async with running(app):
        link = await connect(broker, app)
        assert await link.call("ClickElement", {"x": 1}) == ToolResult(
            success=False, error="ClickElement failed: ValueError"
        )
        assert await link.call("find") == ToolResult(success=False, error="element 'OK' not found")
        result = await link.call("unsendable")
        assert not result.success and result.error == "unsendable failed: it returned a object, which is not JSON"


async def test_progress_then_response() -> None:
    broker = FakeBroker()
    app = make_app(broker)

    @app.tool
    async def work(steps: int, ctx: ToolContext) -> str:
        assert ctx.progress_requested
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step}")
        return "done"

    async with running(app):
        link = await connect(broker, app)
        cid = await link.invoke("work", {"steps": 3}, progress=True)
        response = await link.response(cid)
        assert response.result.data == "done"
        assert [(p.correlation_id, p.progress, p.total, p.message) for p in link.progress] == [
            (cid, 1.0, 3.0, "step 1"),
            (cid, 2.0, 3.0, "step 2"),
            (cid, 3.0, 3.0, "step 3"),
        ]


async def test_report_progress_is_a_checkpoint() -> None:
    # A handler whose only await is report_progress must still be cancellable there and let the
    # app's other tasks run, as every trio await should; queueing the line itself never waits.
    broker = FakeBroker()
    app = make_app(broker)

    @app.tool
    async def report(ctx: ToolContext) -> str:
        for step in (1, 2):
            with trio.testing.assert_checkpoints():
                await ctx.report_progress(step, 2)
        return "reported"

    async with running(app):
        link = await connect(broker, app)
        cid = await link.invoke("report", progress=True)
        assert (await link.response(cid)).result == ToolResult(data="reported")
        assert [p.progress for p in link.progress] == [1, 2]


async def test_result_over_the_brokers_line_limit_fails_cleanly() -> None:
    broker = FakeBroker()
    app = make_app(broker)
    async with running(app):
        link = await connect(broker, app, max_line_bytes=300)
        result = await link.call("echo", {"text": "x" * 280})
        assert not result.success and result.error is not None
        assert result.error.startswith("echo failed: its result is too large")


# --- cancellation, deadlines and concurrency ----------------------------------------------


async def test_tool_cancel_cancels_async_handler_and_sends_no_response() -> None:
    broker = FakeBroker()
    app = make_app(broker)
    started, finished = trio.Event(), trio.Event()
    contexts: list[ToolContext] = []

    @app.tool
    async def slow(ctx: ToolContext) -> str:
        contexts.append(ctx)
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            finished.set()
        return "never"

    async with running(app):
        link = await connect(broker, app)
        cid = await link.invoke("slow")
        await started.wait()
        await link.send(ToolCancel(correlation_id=cid, reason="agent cancelled"))
        await finished.wait()
        assert contexts[0].cancelled
        # Nothing was sent for the cancelled call: the next messages are the pong and the
        # response to a fresh call.
        await link.ping(7)
        assert await link.call("echo", {"text": "after"}) == ToolResult(data="after")
        # A cancel for a call that is not running is ignored.
        await link.send(ToolCancel(correlation_id=999))
        await link.ping(8)


async def test_deadline_from_timeout_ms(autojump_clock: trio.testing.MockClock) -> None:
    broker = FakeBroker()
    app = make_app(broker)
    contexts: list[ToolContext] = []

    @app.tool
    async def hang(ctx: ToolContext) -> None:
        contexts.append(ctx)
        assert ctx.time_remaining() == pytest.approx(1.5)
        await trio.sleep_forever()

    async with running(app):
        link = await connect(broker, app)
        start = trio.current_time()
        result = await link.call("hang", timeout_ms=1500)
        assert trio.current_time() - start == pytest.approx(1.5)
        assert result == ToolResult(success=False, error="hang timed out after 1.5 s", error_kind="timeout")
        assert contexts[0].cancelled and contexts[0].timeout_ms == 1500


async def test_call_that_never_got_a_slot_says_the_app_was_busy(
    autojump_clock: trio.testing.MockClock,
) -> None:
    broker = FakeBroker()
    app = make_app(broker, max_concurrency=1)

    @app.tool
    async def hog() -> None:
        await trio.sleep_forever()

    async with running(app):
        link = await connect(broker, app)
        await link.invoke("hog")
        result = await link.call("echo", {"text": "x"}, timeout_ms=1000)
        assert result.error == (
            "echo timed out after 1 s without starting: the app was still busy with earlier "
            "calls (it runs 1 at a time)"
        )


async def test_no_more_than_max_concurrency_handlers_at_once() -> None:
    broker = FakeBroker()
    app = make_app(broker, max_concurrency=2)
    gate = trio.Event()
    now = peak = 0

    @app.tool
    async def hold(n: int) -> int:
        nonlocal now, peak
        now += 1
        peak = max(peak, now)
        await gate.wait()
        now -= 1
        return n

    async with running(app):
        link = await connect(broker, app)
        ids = [await link.invoke("hold", {"n": n}) for n in range(3)]
        await trio.testing.wait_all_tasks_blocked()
        assert now == 2
        gate.set()
        results = {}
        for _ in ids:
            response = await link.response()
            results[response.correlation_id] = response.result.data
        assert results == dict(zip(ids, range(3)))
        assert peak == 2


async def test_sync_handler_runs_in_worker_thread() -> None:
    broker = FakeBroker()
    app = make_app(broker)

    @app.tool
    def where(ctx: ToolContext) -> str:
        ctx.report_progress_threadsafe(1, 2, "half way")
        return threading.current_thread().name

    async with running(app, limit=10):
        link = await connect(broker, app)
        cid = await link.invoke("where")
        response = await link.response(cid)
        assert response.result.data == "toolbridge where"
        assert [(p.correlation_id, p.message) for p in link.progress] == [(cid, "half way")]


async def test_threadsafe_progress_from_the_event_loop_goes_out_before_the_response() -> None:
    # A broker's uplink reports progress this way from inside its own trio run, right before
    # the result: the progress must not trail the response (the broker would drop it as late).
    broker = FakeBroker()
    app = make_app(broker)

    @app.tool
    async def relay(ctx: ToolContext) -> str:
        ctx.report_progress_threadsafe(1, 2, "first")
        ctx.report_progress_threadsafe(2, 2, "second")
        return "done"

    async with running(app, limit=10):
        link = await connect(broker, app)
        cid = await link.invoke("relay")
        response = await link.response(cid)
        assert response.result.data == "done"
        assert [(p.correlation_id, p.message) for p in link.progress] == [(cid, "first"), (cid, "second")]


async def test_cancelled_sync_handler_keeps_its_slot_until_it_returns() -> None:
    broker = FakeBroker()
    app = make_app(broker, max_concurrency=1)
    entered, release = threading.Event(), threading.Event()
    contexts: list[ToolContext] = []

    @app.tool
    def blocker(ctx: ToolContext) -> str:
        contexts.append(ctx)
        entered.set()
        release.wait(10)
        return "late"

    async with running(app, limit=10):
        link = await connect(broker, app)
        cid = await link.invoke("blocker")
        await trio.to_thread.run_sync(entered.wait, 10)
        await link.send(ToolCancel(correlation_id=cid, reason="agent cancelled"))
        await link.ping(1)
        assert contexts[0].cancelled
        next_cid = await link.invoke("echo", {"text": "next"})
        await trio.testing.wait_all_tasks_blocked()
        # The abandoned thread still holds the only slot; the next call waits.
        assert app._session is not None and app._session.active_calls == 1
        release.set()
        response = await link.response()  # no response to the cancelled call comes first
        assert (response.correlation_id, response.result.data) == (next_cid, "next")


# --- robustness ----------------------------------------------------------------------------


async def test_bad_lines_get_error_replies_not_a_disconnect() -> None:
    broker = FakeBroker()
    app = make_app(broker)
    async with running(app):
        link = await connect(broker, app)
        await link.send_raw(b'{"type": "bogus", "correlationId": 4}\n')
        error = await link.expect(Error)
        assert (error.code, error.correlation_id, error.fatal) == ("unknown_type", 4, False)
        await link.send_raw(b"not json\n")
        assert (await link.expect(Error)).code == "invalid_json"
        await link.send(Register(app_name="x"))
        assert (await link.expect(Error)).code == "unexpected_message"
        await link.ping(3)
        assert broker.attempts == 1


async def test_reconnects_after_drop_with_same_instance(autojump_clock: trio.testing.MockClock) -> None:
    broker = FakeBroker()
    states: list[ConnectionState] = []
    app = make_app(broker, on_state_change=states.append)
    async with running(app):
        first = await connect(broker, app)
        dropped_at = trio.current_time()
        await first.aclose()
        second = await broker.accept()
        register = await second.accept_registration(check_token=TOKEN)
        await app.wait_connected()
        assert trio.current_time() - dropped_at <= 0.1  # backoff was reset by the registration
        assert first.register is not None and register.instance_id == first.register.instance_id
        assert await second.call("echo", {"text": "again"}) == ToolResult(data="again")
    assert states == [S.CONNECTING, S.CONNECTED, S.RECONNECTING, S.CONNECTED, S.DISCONNECTED]


async def test_pending_handlers_are_cancelled_when_the_link_drops(
    autojump_clock: trio.testing.MockClock,
) -> None:
    broker = FakeBroker()
    app = make_app(broker)
    started = trio.Event()
    contexts: list[ToolContext] = []

    @app.tool
    async def slow(ctx: ToolContext) -> None:
        contexts.append(ctx)
        started.set()
        await trio.sleep_forever()

    async with running(app):
        first = await connect(broker, app)
        await first.invoke("slow")
        await started.wait()
        await first.aclose()
        await connect(broker, app)
        assert contexts[0].cancelled


class CountingBroker(FakeBroker):
    """A :class:`FakeBroker` that sets ``tried`` once the app has dialled ``target`` times."""

    def __init__(self, target: int) -> None:
        super().__init__()
        self.target = target
        self.tried = trio.Event()

    async def connector(self, address: DaemonAddress) -> trio.abc.Stream:
        try:
            return await super().connector(address)
        finally:
            if self.attempts >= self.target:
                self.tried.set()


async def test_backoff_while_daemon_unreachable(autojump_clock: trio.testing.MockClock) -> None:
    broker = CountingBroker(9)
    broker.refuse_connections = True
    app = make_app(broker, backoff=Backoff(rng=random.Random(3)))
    async with running(app, limit=120):
        await broker.tried.wait()
        # ceilings 0.1, 0.2, 0.4, ... capped at 5 s: 8 waits add up to at most 16.3 s
        assert trio.current_time() <= 16.3 + 0.1
        assert app.state is S.RECONNECTING
        assert app.last_error is not None and "cannot connect to toolbridge at fake:1" in app.last_error
        broker.refuse_connections = False
        await connect(broker, app)
        assert app.last_error is None


async def test_daemon_not_found_keeps_retrying(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    broker = FakeBroker()
    app = App("Demo", home=tmp_path, connector=broker.connector)
    async with running(app):
        await trio.sleep(10)
        assert app.state is S.RECONNECTING
        assert app.last_error is not None and "toolbridge serve" in app.last_error
        assert broker.attempts == 0
        (tmp_path / "token").write_text(TOKEN, encoding="utf-8")
        (tmp_path / "runtime.json").write_text(json.dumps({"pid": 1, "host": "127.0.0.1", "port": 5}))
        await connect(broker, app)
        assert broker.addresses[0].port == 5


async def test_missed_heartbeats_end_the_link(autojump_clock: trio.testing.MockClock) -> None:
    broker = FakeBroker()
    app = make_app(broker)
    async with running(app):
        link = await connect(broker, app, heartbeat_interval_ms=1000)
        # Pings within the interval keep the link up.
        for n in range(5):
            await trio.sleep(1)
            await link.ping(n)
        silent_from = trio.current_time()
        with pytest.raises(ConnectionClosed, match="closed the connection"):
            await link.receive()
        assert trio.current_time() - silent_from == pytest.approx(3.0)
        await connect(broker, app)
        assert broker.attempts == 2


async def test_unauthorized_retries_and_rereads_the_token(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    (tmp_path / "token").write_text("old\n", encoding="utf-8")
    (tmp_path / "runtime.json").write_text(json.dumps({"pid": 1, "host": "127.0.0.1", "port": 5}))
    broker = FakeBroker()
    states: list[ConnectionState] = []
    app = App("Demo", home=tmp_path, connector=broker.connector, on_state_change=states.append)
    async with running(app):
        for _ in range(2):
            link = await broker.accept()
            register = await link.expect(Register)
            assert register.token == "old"
            await link.reject(register, "unauthorized", "wrong token")
        assert app.state is S.UNAUTHORIZED
        assert app.last_error is not None and "refused the token" in app.last_error
        (tmp_path / "token").write_text("new\n", encoding="utf-8")
        link = await broker.accept()
        register = await link.expect(Register)
        if register.token == "old":  # the third attempt may have read the file before the write
            await link.reject(register, "unauthorized", "wrong token")
            link = await broker.accept()
            register = await link.expect(Register)
        assert register.token == "new"
    assert states[:2] == [S.CONNECTING, S.UNAUTHORIZED]


async def test_invalid_tool_is_fatal() -> None:
    broker = FakeBroker()
    states: list[ConnectionState] = []
    app = make_app(broker, on_state_change=states.append)

    async def refuse() -> None:
        link = await broker.accept()
        register = await link.expect(Register)
        await link.reject(register, "invalid_tool", "echo: inputSchema is not an object schema")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(refuse)
        with pytest.raises(RegistrationRejected) as info:
            async with app.connected(timeout=10):
                pytest.fail("should not connect")
    assert info.value.code == "invalid_tool"
    assert states == [S.CONNECTING, S.FAILED]
    assert app.state is S.FAILED and not app.running


async def test_instance_replaced_stops_the_app() -> None:
    broker = FakeBroker()
    app = make_app(broker)

    async def accept() -> FakeLink:
        link = await broker.accept()
        await link.accept_registration()
        return link

    links: list[FakeLink] = []
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: _collect(accept, links))
            with pytest.raises(InstanceReplaced):
                async with app.connected():
                    await links[0].send(Error(code="replaced", message="a new connection registered this instance", fatal=True))
                    await trio.sleep_forever()
    assert broker.attempts == 1 and app.state is S.FAILED


async def _collect(fn: Callable[[], Awaitable[FakeLink]], into: list[FakeLink]) -> None:
    into.append(await fn())


async def test_connected_context_manager() -> None:
    broker = FakeBroker()
    app = make_app(broker)

    async def accept_twice() -> None:
        for _ in range(2):
            await (await broker.accept()).accept_registration()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(accept_twice)
            async with app.connected(timeout=10) as same:
                assert same is app and same.state is S.CONNECTED
            assert app.state is S.DISCONNECTED
            with pytest.raises(KeyError, match="from the body"):  # not wrapped in a group
                async with app.connected(timeout=10):
                    raise KeyError("from the body")
            assert app.state is S.DISCONNECTED


async def test_connected_timeout(autojump_clock: trio.testing.MockClock) -> None:
    broker = FakeBroker()
    broker.refuse_connections = True
    app = make_app(broker)
    with pytest.raises(trio.TooSlowError):
        async with app.connected(timeout=3):
            pass
    assert app.state is S.DISCONNECTED


# --- tools at runtime ------------------------------------------------------------------------


async def test_add_and_remove_tools_at_runtime() -> None:
    broker = FakeBroker()
    app = make_app(broker)

    async def later(x: int) -> int:
        return x * 2

    async def broken(x: int) -> int:
        return x

    async with running(app) as nursery:
        link = await connect(broker, app)
        with pytest.raises(RuntimeError, match="add_tool"):
            app.tool(later)

        nursery.start_soon(app.add_tool, later)
        added = await link.expect(AddTools)
        assert [t.name for t in added.tools] == ["later"]
        await link.send(ToolsUpdated(tool_names={"echo": "Demo__echo", "later": "Demo__later"}))
        assert await link.call("later", {"x": 21}) == ToolResult(data=42)
        assert app.agent_names["later"] == "Demo__later"

        async def add_rejected() -> None:
            with pytest.raises(ToolUpdateRejected) as info:
                await app.add_tool(broken)
            assert info.value.code == "too_many_tools"

        nursery.start_soon(add_rejected)
        await link.expect(AddTools)
        await link.send(Error(code="too_many_tools", message="limit is 2"))
        await trio.testing.wait_all_tasks_blocked()
        assert "broken" not in app.tools

        nursery.start_soon(app.remove_tool, "echo")
        removed = await link.expect(RemoveTools)
        assert removed.names == ["echo"]
        await link.send(ToolsUpdated(tool_names={"later": "Demo__later"}))
        await link.ping()
        assert dict(app.agent_names) == {"later": "Demo__later"}
        assert set(app.tools) == {"later"}

        with pytest.raises(ToolDefinitionError):
            await app.add_tool(later)
        with pytest.raises(KeyError):
            await app.remove_tool("echo")


async def test_tools_added_while_disconnected_go_into_the_next_registration(
    autojump_clock: trio.testing.MockClock,
) -> None:
    broker = FakeBroker()
    broker.refuse_connections = True
    app = make_app(broker)

    async def later() -> str:
        return "ok"

    async with running(app):
        await trio.sleep(1)
        await app.add_tool(later, name="Later")
        broker.refuse_connections = False
        link = await broker.accept()
        register = await link.accept_registration()
        assert [t.name for t in register.tools] == ["echo", "Later"]


# --- real TCP --------------------------------------------------------------------------------


async def test_real_tcp_with_discovery_from_home(tmp_path: Path) -> None:
    broker = FakeBroker()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            port = await broker.serve_tcp(nursery)
            (tmp_path / "token").write_text(TOKEN + "\n", encoding="utf-8")
            runtime = {"pid": 1, "host": "127.0.0.1", "port": port, "httpPort": None, "version": "t", "startedAt": 0.0}
            (tmp_path / "runtime.json").write_text(json.dumps(runtime), encoding="utf-8")
            app = App("Tcp", home=tmp_path)

            @app.tool
            async def add(a: int, b: int = 1) -> int:
                return a + b

            nursery.start_soon(app.run)
            link = await broker.accept()
            await link.accept_registration(check_token=TOKEN, heartbeat_interval_ms=5000)
            await app.wait_connected()
            await link.ping(1)
            assert await link.call("add", {"a": 2}) == ToolResult(data=3)
            nursery.cancel_scope.cancel()
