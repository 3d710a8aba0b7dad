"""What the tests of the real-program integrations (Blender, FreeCAD, LibreOffice) share: the
agent over ``toolbridge stdio``, waiting for a program's tool, and a call's JSON answer."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from mcp import Client, StdioServerParameters

from mcp_testkit import relay_command, relay_env


@asynccontextmanager
async def agent(home: Path) -> AsyncIterator[Client]:
    """The MCP SDK over `toolbridge stdio` (which starts the daemon when there is none)."""
    command = relay_command(home)
    params = StdioServerParameters(command=command[0], args=command[1:], env=relay_env(TOOLBRIDGE_HOME=str(home)))
    async with Client(params) as client:
        yield client


def still_running(program: str, process: subprocess.Popen[bytes] | None) -> Callable[[], None]:
    """A check for :func:`wait_for_tool`: fails once ``process`` has exited."""
    def check() -> None:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"{program} exited with status {process.returncode}; see its log")
    return check


async def wait_for_tool(client: Client, name: str, *, present: bool = True,
                        alive: Callable[[], None] | None = None) -> dict[str, Any]:
    """Polled: the program is another process; the agent sees it (un)register only by listing.
    ``alive`` runs before each look (it fails the wait when the program has ended)."""
    with trio.fail_after(120):
        while True:
            if alive is not None:
                alive()
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            if (name in tools) == present:
                return tools
            await trio.sleep(0.2)


def data(result: Any) -> Any:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)
