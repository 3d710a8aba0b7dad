"""A test app that speaks protocol.md with plain JSON over a trio stream: no app_client."""

from __future__ import annotations

import json
from typing import Any

import trio


class JsonLines:
    """Newline-framed JSON off a raw stream: the tests' own peers read with this, not with the
    code under test, so a framing bug there cannot hide itself."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buffer = b""

    async def next(self, timeout: float = 10) -> dict[str, Any] | None:
        """The next message, or None at the end of the stream."""
        with trio.fail_after(timeout):
            while b"\n" not in self._buffer:
                chunk = await self._stream.receive_some(65536)
                if not chunk:
                    return None
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        message: dict[str, Any] = json.loads(line)
        return message


class RawApp:
    #: Every RawApp made, so the test harness can close the ones a test left open.
    opened: list[RawApp] = []

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self._lines = JsonLines(stream)
        RawApp.opened.append(self)

    @classmethod
    async def close_all(cls) -> None:
        """Close every RawApp a test left open (the daemon fixture calls this)."""
        while cls.opened:
            await trio.aclose_forcefully(cls.opened.pop().stream)

    @classmethod
    async def connect(cls, port: int, host: str = "127.0.0.1") -> RawApp:
        return cls(await trio.open_tcp_stream(host, port))

    async def send(self, message: dict[str, Any] | list[Any] | bytes) -> None:
        data = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        await self.stream.send_all(data)

    async def recv(self, timeout: float = 10) -> dict[str, Any]:
        message = await self._lines.next(timeout)
        if message is None:
            raise EOFError("the broker closed the connection")
        return message

    async def recv_type(self, kind: str, timeout: float = 10) -> dict[str, Any]:
        """The next message of type ``kind``, answering pings on the way."""
        while True:
            message = await self.recv(timeout)
            if message["type"] == kind:
                return message
            if message["type"] == "ping":
                await self.send({"type": "pong", "id": message.get("id")})
                continue
            raise AssertionError(f"expected {kind}, got {message}")

    async def closed(self, timeout: float = 10) -> bool:
        """Read until the broker closes the connection; True when it did."""
        with trio.fail_after(timeout):
            while True:
                try:
                    chunk = await self.stream.receive_some(65536)
                except trio.BrokenResourceError:
                    return True
                if not chunk:
                    return True

    async def register(
        self, token: str, app_name: str = "WatchTower", tools: list[dict[str, Any]] | None = None,
        timeout: float = 10, **extra: Any
    ) -> dict[str, Any]:
        await self.send(
            {"type": "register", "appName": app_name, "token": token, "tools": tools or [ECHO_TOOL], **extra}
        )
        return await self.recv(timeout)

    async def aclose(self) -> None:
        await self.stream.aclose()


ECHO_TOOL: dict[str, Any] = {
    "name": "Echo",
    "description": "Return the arguments",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}
CLICK_TOOL: dict[str, Any] = {
    "name": "ClickElement",
    "description": "Click at a point",
    "inputSchema": {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
        "required": ["x", "y"],
    },
}
