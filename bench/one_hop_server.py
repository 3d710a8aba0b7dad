"""The one-hop limit: a minimal stdio MCP server that answers ``tools/call`` itself (target (c)).

Usage: ``python bench/one_hop_server.py [--image-bytes N]``

Reads whatever stdin has, answers every complete line, writes all answers with one write.
Handshake-era only (``initialize``, ``tools/list``, ``tools/call`` of ``echo`` / ``image``).
"""

from __future__ import annotations

import argparse
import base64
import os

import msgspec

from raw_echo_app import ECHO, IMAGE, make_png


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image-bytes", type=int, default=0)
    args = parser.parse_args()
    tools = [ECHO] + ([IMAGE] if args.image_bytes else [])
    image = {"content": [{"type": "image", "data": base64.b64encode(make_png(args.image_bytes)).decode(),
                          "mimeType": "image/png"}], "isError": False} if args.image_bytes else None
    decode, encode = msgspec.json.decode, msgspec.json.Encoder().encode
    buffer = b""
    while True:
        data = os.read(0, 1 << 18)
        if not data:
            return
        *lines, buffer = (buffer + data).split(b"\n")
        out = []
        for line in lines:
            if not line.strip():
                continue
            message = decode(line)
            method, rid = message.get("method"), message.get("id")
            if rid is None:
                continue  # a notification
            params = message.get("params") or {}
            if method == "initialize":
                result = {"protocolVersion": params.get("protocolVersion", "2025-11-25"),
                          "capabilities": {"tools": {}}, "serverInfo": {"name": "one-hop", "version": "1"}}
            elif method == "tools/list":
                result = {"tools": tools}
            elif method == "tools/call" and params.get("name") == "image" and image:
                result = image
            elif method == "tools/call":
                text = (params.get("arguments") or {}).get("text", "")
                result = {"content": [{"type": "text", "text": text}], "isError": False}
            else:
                out.append(encode({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}}))
                continue
            out.append(encode({"jsonrpc": "2.0", "id": rid, "result": result}))
        if out:
            out.append(b"")
            view = memoryview(b"\n".join(out))
            while view:
                view = view[os.write(1, view):]


if __name__ == "__main__":
    main()
