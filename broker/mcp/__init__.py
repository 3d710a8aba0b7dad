"""The MCP front door: agents reach the router only through here.

``install(server)`` (``front_door``) wires it into the daemon; an :class:`McpServer` is built
from the core's parts (router, registry, settings, auth, shutdown event), and nothing here
imports ``broker.daemon``. It serves the daemon's end of
``toolbridge stdio`` relay links, and Streamable HTTP (``http``). The relay itself is a client
program, ``broker.cli.stdio_relay``; nothing here imports ``broker.cli``. ``session`` holds the
protocol logic both transports share; ``jsonrpc``, ``protocol``, ``results``, ``gate`` and
``headers`` are its sans-IO pieces. The HTTP port also serves the status page and ``/metrics``
(``status_page``, with ``monitor`` reading and counting what they show, and ``static/``).
``bigresults`` answers large results as links or writes them without a copy.
"""

from .front_door import install, serve_agent
from .server import McpServer
from .session import Session, open_session

__all__ = ["install", "serve_agent", "McpServer", "Session", "open_session"]
