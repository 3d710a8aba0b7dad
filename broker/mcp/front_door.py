"""Placeholder front door (replaced by the MCP implementation)."""

from __future__ import annotations

import trio

from ..core import BrokerCore


async def _no_http(core: BrokerCore, host: str, port: int, *, task_status: trio.TaskStatus[int | None] = trio.TASK_STATUS_IGNORED) -> None:
    task_status.started(None)


def install(core: BrokerCore):  # type: ignore[no-untyped-def]
    return _no_http
