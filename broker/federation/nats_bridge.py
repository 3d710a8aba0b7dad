"""An asyncio event loop on its own thread, for nats-py, driven from trio without blocking it.

Theory of operation
-------------------
nats-py is an asyncio library; the daemon runs on trio. :class:`AsyncioThread` starts one
thread that runs one asyncio loop (:func:`asyncio.run`) until :meth:`AsyncioThread.close`.
trio code runs a coroutine there with :meth:`AsyncioThread.run`: the coroutine is handed over
with :func:`asyncio.run_coroutine_threadsafe`, and trio waits on a :class:`trio.Event` that the
future's done-callback sets through the trio token (``run_sync_soon`` is thread-safe and never
blocks), so the trio loop never waits on the other thread. Cancelling the trio side cancels
the asyncio task.

The other direction (a NATS message arrives in an asyncio callback) goes through
:meth:`AsyncioThread.to_trio`: a plain function handed to the trio loop with ``run_sync_soon``;
callers use it to ``send_nowait`` into a bounded trio memory channel, and answer "busy" when it
is full, so neither loop ever blocks on the other.

:func:`open_asyncio_thread` is the async context manager that owns the thread: on exit (also
when cancelled) it stops the loop, gives the coroutines a moment to finish, and joins the
thread without blocking trio (shielded, bounded by :data:`CLOSE_SECONDS`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, Final, TypeVar

import trio

T = TypeVar("T")

#: How long closing waits for the asyncio loop's last coroutines (a NATS close) and the thread.
CLOSE_SECONDS: Final = 3.0


class AsyncioThread:
    """One asyncio loop on one thread (see the module docstring)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._trio_token = trio.lowlevel.current_trio_token()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._finished = concurrent.futures.Future[None]()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)

    def _main(self) -> None:
        async def body() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            self._ready.set()
            await self._stop.wait()

        try:
            asyncio.run(body())
        finally:
            self._ready.set()
            self._finished.set_result(None)

    async def start(self) -> None:
        self._thread.start()
        # A thread start and an empty loop's start take well under a millisecond: not worth a
        # worker thread, but do not wait on the trio loop if the machine is slow either.
        await trio.to_thread.run_sync(self._ready.wait)
        if self._loop is None:
            raise RuntimeError(f"the asyncio thread {self._name} did not start")

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the asyncio loop and return its result (or raise its exception)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            coro.close()
            raise RuntimeError(f"the asyncio thread {self._name} is not running")
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        await _wait_future(future, self._trio_token)
        return future.result()

    def submit(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Start ``coro`` on the asyncio loop without waiting for it (e.g. a reply nobody awaits)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            coro.close()
            return
        try:
            asyncio.run_coroutine_threadsafe(coro, loop)
        except RuntimeError:  # the loop closed meanwhile
            coro.close()

    def to_trio(self, fn: Callable[[], object]) -> bool:
        """Call ``fn`` on the trio loop soon (from the asyncio thread); False if trio has ended."""
        try:
            self._trio_token.run_sync_soon(fn)
        except trio.RunFinishedError:
            return False
        return True

    async def close(self) -> None:
        """Stop the loop (its pending coroutines are cancelled) and wait for the thread."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:
                pass  # the loop closed in the meantime
        with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_SECONDS):
            await _wait_future(self._finished, self._trio_token)


async def _wait_future(future: concurrent.futures.Future[Any], token: trio.lowlevel.TrioToken) -> None:
    """Wait for a concurrent future without blocking trio; cancel it if trio cancels us."""
    done = trio.Event()

    def on_done(_: object) -> None:
        try:
            token.run_sync_soon(done.set)
        except trio.RunFinishedError:
            pass

    future.add_done_callback(on_done)
    try:
        await done.wait()
    except BaseException:
        future.cancel()
        raise


@asynccontextmanager
async def open_asyncio_thread(name: str) -> AsyncIterator[AsyncioThread]:
    thread = AsyncioThread(name)
    await thread.start()
    try:
        yield thread
    finally:
        await thread.close()
