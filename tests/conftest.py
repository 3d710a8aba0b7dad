from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from broker.config.settings import Settings
from broker.daemon.run import DaemonInfo, run_daemon
from rawapp import RawApp



@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[DaemonInfo]:
    """A real daemon in this test's trio loop, on free ports, with its own home."""
    shutdown = trio.Event()
    async with trio.open_nursery() as nursery:
        info = await nursery.start(
            lambda task_status: run_daemon(
                Settings(home=tmp_path / "home", port=0, http_port=None), shutdown=shutdown, task_status=task_status
            )
        )
        yield info
        await RawApp.close_all()
        shutdown.set()
