"""The daemon's side of admin commands served from a module of their own.

``tools`` (:func:`admin_tools`) answers ``toolbridge tools`` and ``toolbridge codegen``
(``broker.cli.client_commands``, ``broker.cli.codegen_command``): every tool of
``core.router.list_tools()``, sorted by agent-facing name. ``run_daemon`` gives it to the core
(``BrokerCore(admin_handlers=...)``) under TOOLS_COMMAND. The handler lives in the daemon, not next to the
commands that ask for it, so the daemon never imports ``broker.cli``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from app_client.protocol import AdminRequest

if TYPE_CHECKING:
    from .broker_core import BrokerCore

__all__ = ["TOOLS_COMMAND", "admin_tools"]

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
            }
        )
    return rows
