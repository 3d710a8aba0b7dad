"""The daemon's HTTP/1.1 server (``broker.mcp.http_server``): framing, keep-alive, pipelining,
the head and body deadlines, size limits, disconnects, errors and shutdown.

Most tests drive one connection over ``trio.testing.memory_stream_pair`` with raw HTTP bytes
(so the deadlines run on ``autojump_clock``); a few use real TCP through ``serve_app``.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from broker.mcp.http_server import Limits, Receive, Scope, Send, serve_app, serve_connection

LIMITS = Limits(head_seconds=5.0, body_seconds=10.0, max_head_bytes=2048, drain_seconds=1.0)


class EchoApp:
    """Answers with the method, path and body it got; records what it saw."""

    def __init__(self) -> None:
        self.scopes: list[Scope] = []
        self.disconnects = 0
        self.waiting = trio.Event()
        self.disconnected = trio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scopes.append(scope)
        body = b""
        if scope["method"] == "POST":
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    self.disconnects += 1
                    return
                body += message["body"]
                if not message["more_body"]:
                    break
        if scope["path"] == "/wait":  # wait (a while) for the client to go away
            self.waiting.set()
            with trio.move_on_after(1):
                while (await receive())["type"] != "http.disconnect":  # a GET's empty body first
                    pass
                self.disconnects += 1
                self.disconnected.set()
                return
        if scope["path"] == "/fail":
            raise ValueError("boom")
        if scope["path"] == "/stream":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            for part in (b"one,", b"two,", b"three"):
                await send({"type": "http.response.body", "body": part, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        text = f"{scope['method']} {scope['path']} ".encode() + body
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": text})


class Client:
    """The far end of a memory stream: raw bytes in, responses parsed just enough."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.buffer = b""

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def _fill(self) -> bool:
        data = await self.stream.receive_some(65536)
        self.buffer += data
        return bool(data)

    async def response(self, to_head: bool = False) -> tuple[int, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self.buffer:
            if not await self._fill():
                raise EOFError(self.buffer)
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if to_head:  # the answer to a HEAD request has no body, whatever its Content-Length
            body = b""
        elif "content-length" in headers:
            size = int(headers["content-length"])
            while len(self.buffer) < size:
                if not await self._fill():
                    raise EOFError(self.buffer)
            body, self.buffer = self.buffer[:size], self.buffer[size:]
        elif headers.get("transfer-encoding") == "chunked":
            body = b""
            while True:
                while b"\r\n" not in self.buffer:
                    await self._fill()
                size_line, _, self.buffer = self.buffer.partition(b"\r\n")
                size = int(size_line, 16)
                while len(self.buffer) < size + 2:
                    await self._fill()
                body += self.buffer[:size]
                self.buffer = self.buffer[size + 2:]
                if size == 0:
                    break
        else:
            body = b""
        return int(status_line.split()[1]), headers, body

    async def closed(self) -> bool:
        """True once the server has closed the connection (nothing more to read)."""
        while await self._fill():
            pass
        return True


@asynccontextmanager
async def connection(app: Any, limits: Limits = LIMITS) -> AsyncIterator[Client]:
    client_end, server_end = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: serve_connection(app, server_end, limits=limits))
        yield Client(client_end)
        nursery.cancel_scope.cancel()


def post(path: str, body: bytes, extra: str = "") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n{extra}\r\n").encode() + body


GET = b"GET /page HTTP/1.1\r\nHost: x\r\n\r\n"


async def test_keep_alive_serves_requests_one_after_another() -> None:
    app = EchoApp()
    async with connection(app) as client:
        for n in range(3):
            await client.send(post("/mcp", b"body %d" % n))
            status, headers, body = await client.response()
            assert (status, body) == (200, b"POST /mcp body %d" % n)
            assert headers["content-length"] == str(len(body)) and "date" in headers
        await client.send(GET)
        assert (await client.response())[2] == b"GET /page "  # a GET's (empty) body is skipped
    assert [s["path"] for s in app.scopes] == ["/mcp"] * 3 + ["/page"]
    assert app.scopes[0]["headers"][0] == (b"host", b"x")  # lowercase names, as ASGI has them


async def test_pipelined_requests_are_answered_in_order() -> None:
    async with connection(EchoApp()) as client:
        await client.send(post("/a", b"1") + GET + post("/b", b"22"))
        bodies = [(await client.response())[2] for _ in range(3)]
    assert bodies == [b"POST /a 1", b"GET /page ", b"POST /b 22"]


async def test_a_request_pipelined_while_the_app_watches_for_a_disconnect_is_served_next(
        autojump_clock: Any) -> None:
    app = EchoApp()
    async with connection(app) as client:
        await client.send(GET.replace(b"/page", b"/wait") + GET)  # /wait reads on: the GET is not a disconnect
        assert (await client.response())[2] == b"GET /wait "
        assert (await client.response())[2] == b"GET /page "
    assert app.disconnects == 0


async def test_the_app_learns_that_the_client_went_away() -> None:
    app = EchoApp()
    async with connection(app) as client:
        await client.send(GET.replace(b"/page", b"/wait"))
        await app.waiting.wait()
        await client.stream.aclose()
        with trio.fail_after(1):
            await app.disconnected.wait()


async def test_the_body_arrives_in_pieces_and_a_chunked_body_too() -> None:
    async with connection(EchoApp()) as client:
        request = post("/mcp", b"0123456789")
        await client.send(request[:-6])
        await trio.testing.wait_all_tasks_blocked()  # the server has read the first part
        await client.send(request[-6:])
        assert (await client.response())[2] == b"POST /mcp 0123456789"
        await client.send(b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
        assert (await client.response())[2] == b"POST /c abcde"


class RefusingApp(EchoApp):
    """Answers ``/refuse`` with a 403 before reading the request's body (as the token and Host
    checks do); everything else as EchoApp."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["path"] != "/refuse":
            return await super().__call__(scope, receive, send)
        await send({"type": "http.response.start", "status": 403, "headers": []})
        await send({"type": "http.response.body", "body": b"no"})


async def test_a_body_sent_after_an_early_answer_is_dropped_and_the_connection_reused() -> None:
    # Node's fetch writes the head and the body separately: the answer can come between them.
    # The body must be read and dropped, not the connection closed under the next request.
    async with connection(RefusingApp()) as client:
        request = post("/refuse", b"0123456789")
        head, body = request[:-10], request[-10:]
        await client.send(head)
        assert (await client.response())[:1] == (403,)
        await client.send(body + post("/a", b"next"))
        assert (await client.response())[2] == b"POST /a next"


async def test_a_huge_unread_body_closes_the_connection() -> None:
    async with connection(RefusingApp(), attrs.evolve(LIMITS, max_drain_bytes=1024 * 1024)) as client:
        size = 4 * 1024 * 1024  # over what the server drops to keep a connection
        await client.send(f"POST /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: {size}\r\n\r\n".encode())
        assert (await client.response())[:1] == (403,)
        with pytest.raises(trio.BrokenResourceError):
            for _ in range(size // 65536):
                await client.send(b"x" * 65536)
        assert await client.closed()


async def test_an_answer_before_100_continue_closes_at_once_without_waiting_for_a_body(autojump_clock: Any) -> None:
    # The client waits for 100 Continue; a final answer instead means it sends no body, so
    # waiting to drain one would hold the connection until the body deadline.
    async with connection(RefusingApp()) as client:
        await client.send(b"POST /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n")
        start = trio.current_time()
        assert (await client.response())[:1] == (403,)
        assert await client.closed()
        assert trio.current_time() - start < LIMITS.body_seconds


async def test_a_streamed_response_is_chunked() -> None:
    async with connection(EchoApp()) as client:
        await client.send(GET.replace(b"/page", b"/stream"))
        status, headers, body = await client.response()
    assert (status, headers["transfer-encoding"], body) == (200, "chunked", b"one,two,three")


async def test_head_gets_no_body() -> None:
    async with connection(EchoApp()) as client:
        await client.send(b"HEAD /page HTTP/1.1\r\nHost: x\r\n\r\n" + GET)
        status, headers, body = await client.response(to_head=True)
        assert (status, body) == (200, b"")
        assert (await client.response())[2] == b"GET /page "


async def test_expect_100_continue_is_answered_before_the_body() -> None:
    async with connection(EchoApp()) as client:
        await client.send(b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
        interim = await client.response()
        assert interim[0] == 100
        await client.send(b"hi")
        assert (await client.response())[2] == b"POST /mcp hi"


async def test_an_oversized_head_is_431_and_a_malformed_one_400() -> None:
    async with connection(EchoApp()) as client:
        await client.send(b"GET /page HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 4096 + b"\r\n\r\n")
        status, headers, _ = await client.response()
        assert (status, headers["connection"]) == (431, "close"), headers
        assert await client.closed()
    async with connection(EchoApp()) as client:
        await client.send(b"GARBAGE\r\n\r\n")
        assert (await client.response())[0] == 400
        assert await client.closed()


async def test_a_slow_head_is_408_and_an_idle_connection_just_closes(autojump_clock: Any) -> None:
    app = EchoApp()
    async with connection(app) as client:
        await client.send(b"POST /mcp HTTP/1.1\r\nHost: x\r\n")  # and then nothing
        start = trio.current_time()
        status, headers, _ = await client.response()
        assert (status, headers["connection"]) == (408, "close")
        assert trio.current_time() - start == pytest.approx(LIMITS.head_seconds)
        assert await client.closed()
    async with connection(app) as client:
        await client.send(GET)
        await client.response()
        start = trio.current_time()
        assert await client.closed()  # keep-alive idle: closed without a response
        assert trio.current_time() - start == pytest.approx(LIMITS.head_seconds)
        assert client.buffer == b""
    assert len(app.scopes) == 1


async def test_a_slow_body_is_408(autojump_clock: Any) -> None:
    app = EchoApp()
    async with connection(app) as client:
        await client.send(post("/mcp", b"0123456789")[:-5])
        status, headers, _ = await client.response()
        assert (status, headers["connection"]) == (408, "close")
        assert await client.closed()
    assert app.disconnects == 1  # the app saw the request end


async def test_an_app_error_is_500_and_closes(caplog: Any) -> None:
    async with connection(EchoApp()) as client:
        await client.send(GET.replace(b"/page", b"/fail"))
        assert (await client.response())[0] == 500
        assert await client.closed()


async def test_connection_close_is_honoured() -> None:
    async with connection(EchoApp()) as client:
        await client.send(b"GET /page HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert (await client.response())[0] == 200
        assert await client.closed()


async def test_a_non_ascii_target_is_400() -> None:
    async with connection(EchoApp()) as client:
        await client.send(b"GET /%ff%fe HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await client.response())[0] == 400


# --- real TCP: serve_app ---------------------------------------------------------------------


def _listening() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    return sock


async def test_shutdown_closes_idle_connections_and_drains_exchanges() -> None:
    release = trio.Event()
    in_slow = trio.Event()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["path"] == "/slow":
            in_slow.set()
            await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"done"})

    shutdown = trio.Event()
    sock = _listening()
    port = sock.getsockname()[1]
    async with trio.open_nursery() as nursery:
        await nursery.start(lambda task_status: serve_app(app, sock, shutdown=shutdown, limits=LIMITS,
                                                          task_status=task_status))
        idle = Client(await trio.open_tcp_stream("127.0.0.1", port))
        await idle.send(GET)
        assert (await idle.response())[2] == b"done"
        busy = Client(await trio.open_tcp_stream("127.0.0.1", port))
        await busy.send(GET.replace(b"/page", b"/slow"))
        await in_slow.wait()
        shutdown.set()
        with trio.fail_after(1):
            assert await idle.closed()  # at once, not after the keep-alive time
        release.set()
        status, headers, body = await busy.response()
        assert (status, body, headers["connection"]) == (200, b"done", "close")
        with pytest.raises(OSError):
            await trio.open_tcp_stream("127.0.0.1", port)  # the listener is closed
        await idle.stream.aclose()
        await busy.stream.aclose()


async def test_an_exchange_that_outlives_the_drain_is_cancelled() -> None:
    cancelled = trio.Event()
    started = trio.Event()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()

    shutdown = trio.Event()
    sock = _listening()
    async with trio.open_nursery() as nursery:
        await nursery.start(lambda task_status: serve_app(app, sock, shutdown=shutdown, limits=LIMITS,
                                                          task_status=task_status))
        stream = await trio.open_tcp_stream("127.0.0.1", sock.getsockname()[1])
        await stream.send_all(GET)
        await started.wait()
        shutdown.set()
        stopping = trio.current_time()
    assert cancelled.is_set()
    assert trio.current_time() - stopping >= LIMITS.drain_seconds
    await stream.aclose()
