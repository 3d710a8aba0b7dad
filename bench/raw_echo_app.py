"""A minimal app speaking protocol.md over a plain blocking socket (benchmark target (b)).

Usage: ``python bench/raw_echo_app.py --home H [--name RawApp] [--image-bytes N]``

One thread: read what the socket has, answer every complete ``toolInvocation`` in it, write all
the answers with one ``sendall``. The ``echo`` tool returns its ``text`` argument. With
``--image-bytes N`` the tool ``image`` also exists and returns a PNG of exactly N bytes as an
MCP image block (the response line is built once; each call only splices in its id).
"""

from __future__ import annotations

import argparse
import base64
import json
import socket
import struct
import zlib
from pathlib import Path

import msgspec


class Invocation(msgspec.Struct):
    type: str
    correlationId: int | None = None
    tool: str = ""
    parameters: dict[str, object] = {}
    id: int | None = None


ECHO = {"name": "echo", "description": "Return the text.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}
IMAGE = {"name": "image", "description": "Return a PNG image.", "inputSchema": {"type": "object"}}


def make_png(size: int, seed: int = 1) -> bytes:
    """A valid PNG of exactly ``size`` bytes: noise pixels, padded with a private chunk."""
    import random

    width = 1024
    row = 1 + width * 3
    overhead = 8 + 25 + 12 + 12 + 12  # signature, IHDR, IDAT framing, padding chunk, IEND
    height = max(1, (size - overhead - 64) // (row + 5))
    rng = random.Random(seed)
    raw = b"".join(b"\x00" + rng.randbytes(width * 3) for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    head = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    body = chunk(b"IDAT", zlib.compress(raw, 0))
    pad = size - len(head) - len(body) - 12 - 12
    if pad < 0:
        raise ValueError(f"cannot make a PNG of {size} bytes")
    png = head + body + chunk(b"pdDi", b"\x00" * pad) + chunk(b"IEND", b"")
    assert len(png) == size
    return png


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", required=True)
    parser.add_argument("--name", default="RawApp")
    parser.add_argument("--max-concurrency", type=int, default=64)
    parser.add_argument("--image-bytes", type=int, default=0)
    args = parser.parse_args()
    home = Path(args.home)
    runtime = json.loads((home / "runtime.json").read_text())
    token = (home / "token").read_text().strip()

    tools = [ECHO] + ([IMAGE] if args.image_bytes else [])
    image_prefix = image_suffix = b""
    if args.image_bytes:
        data = base64.b64encode(make_png(args.image_bytes)).decode()
        result = {"success": True, "content": [{"type": "image", "data": data, "mimeType": "image/png"}]}
        image_prefix = b'{"type":"toolResponse","correlationId":'
        image_suffix = b',"result":' + msgspec.json.encode(result) + b"}\n"

    sock = socket.create_connection((runtime.get("host", "127.0.0.1"), runtime["port"]))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    register = {"type": "register", "appName": args.name, "token": token, "tools": tools,
                "maxConcurrency": args.max_concurrency, "instanceId": "bench"}
    sock.sendall(json.dumps(register).encode() + b"\n")
    decoder = msgspec.json.Decoder(Invocation)
    encode = msgspec.json.Encoder().encode
    buffer = b""
    while True:
        data = sock.recv(1 << 18)
        if not data:
            return
        buffer += data
        if b"\n" not in buffer:
            continue
        *lines, buffer = buffer.split(b"\n")
        out = []
        for line in lines:
            if not line:
                continue
            message = decoder.decode(line)
            if message.type == "toolInvocation":
                cid = message.correlationId
                if message.tool == "image":
                    out.append(image_prefix + str(cid).encode() + image_suffix)
                else:
                    result = {"success": True, "data": message.parameters.get("text")}
                    out.append(encode({"type": "toolResponse", "correlationId": cid, "result": result}) + b"\n")
            elif message.type == "ping":
                out.append(encode({"type": "pong", "id": message.id}) + b"\n")
            elif message.type == "error" and line.find(b'"fatal":true') >= 0:
                raise SystemExit(f"the broker refused the app: {line[:300]!r}")
        if out:
            sock.sendall(b"".join(out))


if __name__ == "__main__":
    main()
