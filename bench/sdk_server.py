"""The official MCP Python SDK's ``MCPServer`` hosting the same echo tool (target (d)).

Usage:
  ``python bench/sdk_server.py stdio``
  ``python bench/sdk_server.py http [--json-response]`` — Streamable HTTP at ``/mcp`` on
  127.0.0.1, a free port, served by uvicorn (the server the SDK itself runs it with); prints
  ``PORT <n>`` on stdout once it listens.

The tool is ``async def echo(text: str) -> str`` (async, so the SDK runs it on its event
loop, not in a worker thread), with the SDK's defaults otherwise. ``--image-bytes N`` adds an
``image`` tool returning a PNG of N bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys

from mcp.server.mcpserver import Image, MCPServer

from raw_echo_app import make_png


def build(image_bytes: int) -> MCPServer:
    server: MCPServer = MCPServer("bench-sdk", log_level="WARNING")

    @server.tool()
    async def echo(text: str) -> str:
        """Return the text."""
        return text

    if image_bytes:
        png = make_png(image_bytes)

        @server.tool()
        async def image() -> Image:
            """Return a PNG image."""
            return Image(data=png, format="png")

    return server


def serve_http(server: MCPServer, json_response: bool) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    app = server.streamable_http_app(json_response=json_response)
    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
    uv = uvicorn.Server(config)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    asyncio.run(uv.serve(sockets=[sock]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--json-response", action="store_true")
    parser.add_argument("--image-bytes", type=int, default=0)
    args = parser.parse_args()
    server = build(args.image_bytes)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        serve_http(server, args.json_response)
    sys.exit(0)


if __name__ == "__main__":
    main()
