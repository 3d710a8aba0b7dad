"""Agent code in Python: the tools of toolbridge's apps as async functions, errors as exceptions.

::

    from broker.agent import ToolCallError, ToolTimeout, connect

    async with connect() as tb:            # through `toolbridge stdio` (starts the daemon if needed)
        for match in await tb.search("click a button"):
            print(match.name, match.description)
        await tb.call("WatchTower__ClickElement", {"x": 100, "y": 50})
        await tb.apps.WatchTower.click_element(x=100, y=50)   # the same call
        try:
            await tb.call("WatchTower__Export", {"path": "a.pdf"}, timeout=60, on_progress=print)
        except ToolTimeout:
            ...

``connect("http://127.0.0.1:47701/mcp", token=...)`` goes over Streamable HTTP instead. The
stubs written by ``toolbridge codegen --lang python`` take ``tb`` as their client:
``Apps(tb).WatchTower.click_element(x=100, y=50)``, typed. Runs under trio or asyncio; needs
the MCP SDK (the ``agent`` extra; ``toolbridge doctor`` prints the command that adds it).

Every exception here derives from :class:`AgentError`; a failed call raises a
:class:`ToolCallError` (a subclass per kind). ``ToolbridgeError`` and ``ToolError`` are the
older names of these two, kept as aliases (the same classes) so existing imports keep working.
"""

from ._apps import Apps, AppTools, ToolMethod
from ._client import ProgressCallback, Toolbridge, ToolMatch, connect
from ._errors import (
    ERROR_TYPES,
    AgentError,
    AppDisconnected,
    ConnectError,
    ConnectionLost,
    ToolAppError,
    ToolbridgeError,
    ToolBusy,
    ToolCallError,
    ToolCancelled,
    ToolError,
    ToolGuardRejected,
    ToolInvalidArguments,
    ToolNotFound,
    ToolTimeout,
)

__all__ = [
    "connect",
    "Toolbridge",
    "ToolMatch",
    "ProgressCallback",
    "Apps",
    "AppTools",
    "ToolMethod",
    "AgentError",
    "ConnectError",
    "ToolCallError",
    "ToolbridgeError",  # alias of AgentError (the old name)
    "ToolError",  # alias of ToolCallError (the old name)
    "ToolNotFound",
    "ToolInvalidArguments",
    "ToolGuardRejected",
    "ToolBusy",
    "ToolTimeout",
    "ToolCancelled",
    "AppDisconnected",
    "ToolAppError",
    "ConnectionLost",
    "ERROR_TYPES",
]
