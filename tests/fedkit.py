"""Helpers for the federation tests: several real daemons in one trio loop, each killable."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from broker.config.settings import Settings
from broker.daemon.broker_core import BrokerCore
from broker.daemon.run import DaemonInfo, run_daemon


@attrs.define
class Daemon:
    info: DaemonInfo
    home: Path
    shutdown: trio.Event
    scope: trio.CancelScope
    stopped: trio.Event

    @property
    def core(self) -> BrokerCore:
        return self.info.core

    @property
    def port(self) -> int:
        return self.info.port

    @property
    def token(self) -> str:
        return self.info.token

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.info.port}"

    def kill(self) -> None:
        """Stop at once, like a killed process: every task cancelled, sockets closed."""
        self.scope.cancel()

    async def stop(self) -> None:
        self.shutdown.set()
        with trio.fail_after(10):
            await self.stopped.wait()


async def start_daemon(nursery: trio.Nursery, home: Path, **settings: Any) -> Daemon:
    """A daemon on free ports (HTTP off unless ``http_port`` is given) with its own home."""
    shutdown = trio.Event()
    stopped = trio.Event()
    scope = trio.CancelScope()
    options: dict[str, Any] = {"port": 0, "http_port": None, **settings}

    async def run(task_status: trio.TaskStatus[DaemonInfo]) -> None:
        try:
            with scope:
                await run_daemon(Settings(home=home, **options), shutdown=shutdown, task_status=task_status)
        finally:
            stopped.set()

    info: DaemonInfo = await nursery.start(run)
    return Daemon(info, home, shutdown, scope, stopped)


async def wait_until(core: BrokerCore, predicate: Callable[[], bool], timeout: float = 10) -> None:
    """Wait until ``predicate()`` holds, re-checking at each registry change (and every 50 ms)."""
    with trio.fail_after(timeout):
        while not predicate():
            with trio.move_on_after(0.05):
                await core.registry.wait_changed(core.registry.version)


def tool_names(core: BrokerCore) -> set[str]:
    return {tool.agent_name for tool in core.registry.tools()}
