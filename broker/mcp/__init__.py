"""The MCP front door: agents reach the router only through here.

``install(core)`` (``front_door``) wires it into the daemon: the daemon's end of
``toolbridge stdio`` relay links, and Streamable HTTP (``http``). The relay itself is a client
program, ``broker.cli.stdio_relay``; nothing here imports ``broker.cli``. ``session`` holds the
protocol logic both transports share; ``jsonrpc``, ``protocol``, ``results``, ``gate`` and
``headers`` are its sans-IO pieces. The HTTP port also serves the status page and ``/metrics``
(``status_page``, with ``monitor`` reading and counting what they show, and ``static/``).
"""

from .front_door import install, serve_agent
from .session import McpServer, Session, open_session

__all__ = ["install", "serve_agent", "McpServer", "Session", "open_session"]
