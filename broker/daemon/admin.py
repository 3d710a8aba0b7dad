"""The daemon's side of admin commands served from a module of their own.

``tools`` (:func:`admin_tools`) answers ``toolbridge tools`` and ``toolbridge codegen``
(``broker.cli.client_commands``, ``broker.cli.codegen_command``): every tool of
``core.router.list_tools()``, sorted by agent-facing name. ``run_daemon`` gives it to the core
(``BrokerCore(admin_handlers=...)``) under TOOLS_COMMAND. The handler lives in the daemon, not next to the
commands that ask for it, so the daemon never imports ``broker.cli``.

``stop`` (:func:`stop_handler`) answers ``toolbridge stop`` / ``restart``: it sets the daemon's
shutdown event, so the daemon stops as on SIGTERM (calls in flight get "shutting down"), on
every OS. The answer may not reach the client before the connection is closed by that
shutdown; the CLI treats a closed connection after ``stop`` as success and waits for the
daemon's ``runtime.json`` to go.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

import structlog
import trio

from app_client.protocol import AdminRequest

if TYPE_CHECKING:
    from .broker_core import BrokerCore

__all__ = ["STOP_COMMAND", "TOOLS_COMMAND", "admin_tools", "stop_handler"]

log = structlog.get_logger("toolbridge.admin")

#: The admin command :func:`stop_handler` answers.
STOP_COMMAND: Final = "stop"

#: The admin command :func:`admin_tools` answers.
TOOLS_COMMAND: Final = "tools"


async def admin_tools(core: BrokerCore, request: AdminRequest) -> list[dict[str, Any]]:
    """The ``tools`` admin command: every registered tool, sorted by agent-facing name."""
    rows: list[dict[str, Any]] = []
    for tool in core.router.list_tools():
        spec = tool.spec
        rows.append(
            {
                "name": tool.agent_name,
                "app": tool.instance.app_name,
                "label": tool.instance.label,
                "tool": tool.name,
                "description": spec.description,
                "title": spec.title,
                "inputSchema": spec.input_schema,
                "outputSchema": spec.output_schema,
                "annotations": spec.annotations,
                # for the app's author to check what the search reads (agents never see them)
                "exampleRequests": spec.example_requests,
            }
        )
    return rows


def stop_handler(shutdown: trio.Event) -> Callable[[BrokerCore, AdminRequest], Awaitable[dict[str, Any]]]:
    """The ``stop`` admin command: begin the graceful shutdown (as SIGTERM does)."""

    async def stop(core: BrokerCore, request: AdminRequest) -> dict[str, Any]:
        await trio.lowlevel.checkpoint()
        log.info("stop_requested")
        shutdown.set()
        return {"pid": os.getpid(), "stopping": True}

    return stop
