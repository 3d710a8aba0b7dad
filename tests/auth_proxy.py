"""A loopback HTTP/1.1 proxy that adds ``Authorization: Bearer <token>`` to every request.

For MCP clients that cannot send the header (the official conformance suite's ``server``
runner): they talk to the proxy as if it were the daemon, and the daemon keeps requiring its
token. Everything else passes through unchanged, the ``Host`` header included (so the
daemon's DNS-rebinding checks still see what the client sent), and responses stream back as
they arrive (SSE streams stay open as long as the daemon keeps them open).

One upstream connection per client connection, requests in turn (HTTP/1.1 without
pipelining, as clients do); h11 parses both sides. Listens on 127.0.0.1 only.
"""

from __future__ import annotations

from collections.abc import Callable

import h11
import trio

__all__ = ["serve_auth_proxy"]

_MAX_CHUNK = 65536


async def serve_auth_proxy(upstream_port: int, token: str, *,
                           task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve until cancelled; ``task_status.started`` gets the proxy's port."""

    async def handler(client: trio.SocketStream) -> None:
        try:
            await _proxy_connection(client, upstream_port, token.encode())
        except* (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError, OSError):
            pass  # one side went away: this connection ends, the proxy goes on
        finally:
            await client.aclose()

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port: int = listeners[0].socket.getsockname()[1]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, handler, listeners)
        task_status.started(port)


async def _next_event(conn: h11.Connection, stream: trio.SocketStream) -> h11.Event | type[h11.PAUSED]:
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event  # type: ignore[return-value]
        conn.receive_data(await stream.receive_some(_MAX_CHUNK))


async def _send(conn: h11.Connection, stream: trio.SocketStream, event: h11.Event) -> None:
    data = conn.send(event)
    if data:
        await stream.send_all(data)


async def _proxy_connection(client: trio.SocketStream, upstream_port: int, token: bytes) -> None:
    downstream = h11.Connection(h11.SERVER)
    async with await trio.open_tcp_stream("127.0.0.1", upstream_port) as upstream_stream:
        upstream = h11.Connection(h11.CLIENT)
        while True:
            request = await _next_event(downstream, client)
            if not isinstance(request, h11.Request):
                return  # the client closed the connection (or paused at its end)
            headers = [(k, v) for k, v in request.headers if k != b"authorization"]
            headers.append((b"authorization", b"Bearer " + token))
            await _send(upstream, upstream_stream, h11.Request(method=request.method, target=request.target,
                                                               headers=headers))
            closed = False
            async with trio.open_nursery() as nursery:

                async def request_side() -> None:
                    # The body goes up while the response comes down (neither side waits for the
                    # other); then the client is watched, so that when it hangs up on a long
                    # response (an SSE stream) the daemon's end is closed too.
                    nonlocal closed
                    await _pump(downstream, client, upstream, upstream_stream, _same)
                    while data := await client.receive_some(_MAX_CHUNK):
                        downstream.receive_data(data)  # a next request, kept for the next cycle
                    closed = True
                    nursery.cancel_scope.cancel()

                nursery.start_soon(request_side)
                await _pump(upstream, upstream_stream, downstream, client, _response_event)
                nursery.cancel_scope.cancel()
            if closed or downstream.our_state is h11.MUST_CLOSE or upstream.our_state is h11.MUST_CLOSE:
                return
            try:
                downstream.start_next_cycle()
                upstream.start_next_cycle()
            except h11.LocalProtocolError:
                return


def _same(event: h11.Event) -> h11.Event:
    return event


def _response_event(event: h11.Event) -> h11.Event:
    if isinstance(event, h11.Response):
        return h11.Response(status_code=event.status_code, headers=list(event.headers), reason=event.reason)
    return event


async def _pump(source: h11.Connection, source_stream: trio.SocketStream, sink: h11.Connection,
                sink_stream: trio.SocketStream, convert: Callable[[h11.Event], h11.Event]) -> None:
    """Pass one message (a request's body, or a whole response) from ``source`` to ``sink``."""
    while True:
        event = await _next_event(source, source_stream)
        if isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
            raise trio.BrokenResourceError("the peer closed mid-message")
        assert isinstance(event, h11.Event)
        await _send(sink, sink_stream, convert(event))
        if isinstance(event, h11.EndOfMessage):
            return


async def _main(upstream_port: int, token_file: str) -> None:
    with open(token_file, encoding="utf-8") as handle:
        token = handle.read().strip()
    async with trio.open_nursery() as nursery:
        port = await nursery.start(serve_auth_proxy, upstream_port, token)
        print(f"http://127.0.0.1:{port} -> 127.0.0.1:{upstream_port} (adds the bearer token); Ctrl-C stops",
              flush=True)


if __name__ == "__main__":  # python tests/auth_proxy.py <daemon's HTTP port> <token file>
    import sys

    if len(sys.argv) != 3:
        sys.exit("usage: python tests/auth_proxy.py <the daemon's HTTP port> <its token file, e.g. ~/.toolbridge/token>")
    try:
        trio.run(_main, int(sys.argv[1]), sys.argv[2])
    except KeyboardInterrupt:
        pass
