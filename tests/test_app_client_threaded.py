"""The threaded API (app_client.threaded): trio in a background thread, handlers on a GUI thread.

The "GUI" is a plain thread draining a queue, standing in for Tk or Qt. The fake broker runs
in the test's own trio loop and the app in the AppThread's loop, so they talk over real TCP.
Blocking calls into the runner are made through trio.to_thread so the test loop stays free.
"""

from __future__ import annotations

import functools
import queue
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest
import trio

from app_client import (
    App,
    AppThread,
    ConnectionState,
    GuiCallQueue,
    RegistrationRejected,
    ToolContext,
    tk_executor,
)
from app_client.testing import FakeBroker, FakeLink
from app_client.protocol import Complete, CompleteResponse
from app_client.wire import AddTools, Register, ToolCancel, ToolsUpdated

TOKEN = "t0ken"


class FakeGui:
    """A GUI thread: runs submitted callables one at a time, in order."""

    def __init__(self) -> None:
        self.calls: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, name="fake-gui", daemon=True)
        self.thread.start()

    def submit(self, fn: Callable[[], None]) -> None:
        self.calls.put(fn)

    def _loop(self) -> None:
        while (fn := self.calls.get()) is not None:
            fn()

    def close(self) -> None:
        self.calls.put(None)
        self.thread.join(5)


@asynccontextmanager
async def threaded_setup(**app_options: object) -> AsyncIterator[tuple[FakeBroker, App, FakeGui, trio.Nursery]]:
    broker = FakeBroker()
    gui = FakeGui()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            port = await broker.serve_tcp(nursery)
            app = App("Gui", host="127.0.0.1", port=port, token=TOKEN, gui_executor=gui.submit, **app_options)  # type: ignore[arg-type]
            try:
                yield broker, app, gui, nursery
            finally:
                nursery.cancel_scope.cancel()
                gui.close()


async def start(app: App, broker: FakeBroker) -> tuple[AppThread, FakeLink]:
    runner = app.start_in_thread()
    link = await broker.accept()
    await link.accept_registration(check_token=TOKEN)
    assert await trio.to_thread.run_sync(runner.wait_connected, 5)
    return runner, link


async def test_gui_handlers_run_on_gui_thread_and_heartbeats_flow_while_it_blocks() -> None:
    async with threaded_setup() as (broker, app, _gui, _):
        entered, release = threading.Event(), threading.Event()

        @app.tool
        def click(x: int, ctx: ToolContext) -> dict[str, object]:
            entered.set()
            ctx.report_progress_threadsafe(0.5, message="pressing")
            release.wait(5)
            return {"thread": threading.current_thread().name, "x": x}

        @app.tool(on_gui_thread=False)
        def background() -> str:
            return threading.current_thread().name

        runner, link = await start(app, broker)
        try:
            cid = await link.invoke("click", {"x": 3})
            await trio.to_thread.run_sync(entered.wait, 5)
            for n in range(3):  # the GUI thread is blocked; the trio thread answers anyway
                await link.ping(n)
            release.set()
            response = await link.response(cid)
            assert response.result.data == {"thread": "fake-gui", "x": 3}
            assert [p.message for p in link.progress] == ["pressing"]
            assert (await link.call("background")).data == "toolbridge background"
        finally:
            await trio.to_thread.run_sync(runner.stop)
        assert not runner.running and runner.error is None
        assert app.state is ConnectionState.DISCONNECTED
        runner.stop()  # idempotent


async def test_gui_call_cancelled_before_it_starts_is_skipped() -> None:
    async with threaded_setup(max_concurrency=2) as (broker, app, _gui, _):
        entered, release = threading.Event(), threading.Event()
        ran: list[str] = []

        @app.tool
        def first() -> str:
            entered.set()
            release.wait(5)
            ran.append("first")
            return "first"

        @app.tool
        def second() -> str:
            ran.append("second")
            return "second"

        runner, link = await start(app, broker)
        try:
            first_id = await link.invoke("first")
            await trio.to_thread.run_sync(entered.wait, 5)
            second_id = await link.invoke("second")  # queued behind "first" on the GUI thread
            await link.ping(1)  # the invocation has been read
            await link.send(ToolCancel(correlation_id=second_id))
            await link.ping(2)  # ... and so has the cancel
            release.set()
            response = await link.response()
            assert response.correlation_id == first_id
            await link.ping(3)
            # The GUI thread has drained its queue (the skipped call included) once the next
            # submitted call has run.
            assert (await link.call("second")).data == "second"
            assert ran == ["first", "second"]
        finally:
            await trio.to_thread.run_sync(runner.stop)


async def test_add_tool_from_another_thread() -> None:
    async with threaded_setup() as (broker, app, _gui, nursery):
        runner, link = await start(app, broker)
        try:

            def later(n: int) -> int:
                return n + 1

            done = trio.Event()

            async def add() -> None:
                await trio.to_thread.run_sync(runner.add_tool, later)
                done.set()

            nursery.start_soon(add)
            message = await link.expect(AddTools)
            assert message.tools[0].name == "later"
            await link.send(ToolsUpdated(tool_names={"later": "Gui__later"}))
            await done.wait()
            assert app.agent_names["later"] == "Gui__later"
            assert (await link.call("later", {"n": 1})).data == 2
        finally:
            await trio.to_thread.run_sync(runner.stop)
        with pytest.raises(RuntimeError, match="not running"):
            runner.add_tool(later)


async def test_wait_connected_raises_the_fatal_error() -> None:
    async with threaded_setup() as (broker, app, _gui, _):
        runner = app.start_in_thread()
        link = await broker.accept()
        register = await link.expect(Register)
        await link.reject(register, "invalid_register", "bad")
        with pytest.raises(RegistrationRejected):
            await trio.to_thread.run_sync(runner.wait_connected, 5)
        await trio.to_thread.run_sync(runner.stop)
        assert isinstance(runner.error, RegistrationRejected)
        assert app.state is ConnectionState.FAILED


def test_stop_before_connecting_and_as_context_manager() -> None:
    app = App("Idle", host="127.0.0.1", port=1, token="x", connector=_never_connects)
    with app.start_in_thread() as runner:
        assert not runner.wait_connected(0.01)
    assert not runner.running and runner.error is None


async def _never_connects(address: object) -> trio.abc.Stream:
    await trio.sleep_forever()
    raise AssertionError("unreachable")


def test_tk_executor_polls_with_after() -> None:
    class FakeRoot:
        def __init__(self) -> None:
            self.pending: list[tuple[int, Callable[[], object]]] = []
            self.destroyed = False

        def after(self, ms: int, func: Callable[[], object], /) -> str:
            if self.destroyed:
                raise RuntimeError("application has been destroyed")
            self.pending.append((ms, func))
            return "after#1"

        def run_pending(self) -> None:
            pending, self.pending = self.pending, []
            for _, func in pending:
                func()

    root = FakeRoot()
    execute = tk_executor(root, poll_interval_ms=5)
    assert [ms for ms, _ in root.pending] == [5]
    calls: list[int] = []

    def submit_three() -> None:
        for n in range(3):
            execute(functools.partial(calls.append, n))

    worker = threading.Thread(target=submit_three)
    worker.start()
    worker.join()
    assert calls == []
    root.run_pending()
    assert calls == [0, 1, 2]
    assert len(root.pending) == 1  # polling continues
    root.destroyed = True
    root.run_pending()  # stops quietly once the window is gone
    assert root.pending == []


def test_gui_call_queue_runs_calls_in_order_on_the_thread_that_asks() -> None:
    calls = GuiCallQueue()
    ran: list[tuple[int, str]] = []

    def record(n: int) -> None:
        ran.append((n, threading.current_thread().name))

    submitter = threading.Thread(
        target=lambda: [calls.submit(functools.partial(record, n)) for n in range(3)], name="other"
    )
    submitter.start()
    submitter.join(5)
    assert calls.pending() == 3
    assert calls.run_pending(max_calls=2) == 2  # a bounded turn leaves the rest for the next one
    assert [n for n, _ in ran] == [0, 1]

    def boom() -> None:
        raise ValueError("a GUI call failed")

    calls.submit(boom)
    calls.submit(functools.partial(record, 3))
    assert calls.run_pending() == 3  # the call that raised is logged; the ones after it still run
    assert ran == [(n, threading.current_thread().name) for n in range(4)]
    assert calls.run_pending() == 0 and calls.pending() == 0


class TimerGui:
    """A GUI loop like Blender's: no way to be woken from another thread, only a periodic
    callback (here every 5 ms on a thread named "timer-gui") that drains a GuiCallQueue."""

    def __init__(self) -> None:
        self.calls = GuiCallQueue()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="timer-gui", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.stopping.wait(0.005):  # the loop's own timer period, not a wait for a result
            self.calls.run_pending()

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(5)


async def test_resources_prompts_and_completions_run_on_the_gui_thread() -> None:
    """A sync resource handler of a GUI program touches the GUI's objects (Blender's bpy), so
    it runs on the GUI thread as sync tools do; before, reads ran in a trio worker thread."""
    gui = TimerGui()
    broker = FakeBroker()
    try:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                port = await broker.serve_tcp(nursery)
                app = App("Gui", host="127.0.0.1", port=port, token=TOKEN, gui_executor=gui.calls.submit)

                @app.resource("gui://thread")
                def thread_name() -> str:
                    return threading.current_thread().name

                def names(value: str) -> list[str]:
                    return [threading.current_thread().name]

                @app.resource_template("gui://objects/{name}", complete={"name": names})
                def one_object(name: str) -> str:
                    return f"{name} on {threading.current_thread().name}"

                @app.prompt
                def describe() -> str:
                    return threading.current_thread().name

                @app.tool
                def where() -> str:
                    return threading.current_thread().name

                runner, link = await start(app, broker)
                try:
                    assert (await link.read("gui://thread")).contents[0]["text"] == "timer-gui"
                    assert (await link.read("gui://objects/Cube")).contents[0]["text"] == "Cube on timer-gui"
                    prompt = await link.get_prompt("describe")
                    assert prompt.messages[0]["content"]["text"] == "timer-gui"
                    assert (await link.call("where")).data == "timer-gui"
                    await link.send(Complete(900, "name", uri_template="gui://objects/{name}"))
                    assert (await link.wait_for(CompleteResponse)).values == ["timer-gui"]
                finally:
                    await trio.to_thread.run_sync(runner.stop)
                    nursery.cancel_scope.cancel()
    finally:
        gui.close()


async def test_an_async_tool_runs_steps_on_the_gui_thread_and_a_cancel_ends_it_between_steps() -> None:
    """ctx.run_on_gui_thread: each step is its own GUI call, so the GUI loop runs between
    steps (here: a call queued from elsewhere runs between them) and a cancel stops the tool
    before its next step."""
    gui = TimerGui()
    broker = FakeBroker()
    steps: list[str] = []
    in_second, release = threading.Event(), threading.Event()

    def step(n: int) -> str:
        steps.append(f"step {n} on {threading.current_thread().name}")
        if n == 2:
            in_second.set()
            release.wait(5)
        return threading.current_thread().name

    try:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                port = await broker.serve_tcp(nursery)
                app = App("Gui", host="127.0.0.1", port=port, token=TOKEN, gui_executor=gui.calls.submit)

                @app.tool
                async def stepwise(ctx: ToolContext, count: int) -> list[str]:
                    names = []
                    for n in range(1, count + 1):
                        names.append(await ctx.run_on_gui_thread(step, n))
                        await ctx.report_progress(n, count)
                    return names

                runner, link = await start(app, broker)
                try:
                    assert (await link.call("stepwise", {"count": 2})).data == ["timer-gui", "timer-gui"]
                    steps.clear()
                    in_second.clear()
                    release.clear()
                    cid = await link.invoke("stepwise", {"count": 5})
                    await trio.to_thread.run_sync(in_second.wait, 5)
                    gui.calls.submit(lambda: steps.append("the GUI loop ran"))  # between steps
                    await link.cancel(cid)
                    await link.ping(1)  # the cancel has been read
                    release.set()
                    # The next call runs after the cancelled one's step 2 returned.
                    assert (await link.call("stepwise", {"count": 1})).data == ["timer-gui"]
                    assert steps == ["step 1 on timer-gui", "step 2 on timer-gui", "the GUI loop ran",
                                     "step 1 on timer-gui"]
                finally:
                    await trio.to_thread.run_sync(runner.stop)
                    nursery.cancel_scope.cancel()
    finally:
        gui.close()


async def test_run_on_gui_thread_without_a_gui_executor_says_so() -> None:
    ctx = ToolContext(correlation_id=1, tool="Demo")
    with pytest.raises(RuntimeError, match="no gui_executor"):
        await ctx.run_on_gui_thread(print)
