"""A token-less flood of the daemon's app port, as another local user could run it.

``python tests/flood.py PORT [--idle 500] [--slowloris 8] [--seconds 30] [--max-connections N]``

* ``--idle`` tasks each hold one connection open without sending a byte; when the daemon
  closes it (first-byte deadline, eviction), the task connects again at once — the
  "keeps reconnecting" attack;
* ``--slowloris`` tasks each connect and then either dribble the start of a register line
  one byte at a time, send a garbage line, or send half a line and stop, round and round.

Loopback only; bounded by ``--seconds`` and by ``--max-connections`` in all. Prints
``ready`` once all ``--idle`` connections have been opened the first time, and at the end a
line of JSON with how many connections it made. Runs in its own process so that it competes
with the daemon for the CPU like a real attacker, not for the test's event loop.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys

import trio

HOST = "127.0.0.1"
PARTIAL = b'{"type": "register", "appName": "Flood", "token": "'


class Stats:
    def __init__(self, limit: int) -> None:
        self.connections = 0
        self.failed = 0
        self.limit = limit

    def more(self) -> bool:
        return self.connections < self.limit


async def open_one(port: int, stats: Stats) -> trio.SocketStream | None:
    try:
        stream = await trio.open_tcp_stream(HOST, port)
    except OSError:
        stats.failed += 1
        await trio.sleep(0.01)
        return None
    stats.connections += 1
    return stream


async def drain(stream: trio.SocketStream) -> None:
    """Read (and ignore) until the daemon closes the connection."""
    try:
        while await stream.receive_some(4096):
            pass
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


async def idle(port: int, stats: Stats, opened: trio.Semaphore | None) -> None:
    while stats.more():
        stream = await open_one(port, stats)
        if stream is None:
            continue
        if opened is not None:
            opened.release()
            opened = None
        async with stream:
            await drain(stream)


async def slowloris(port: int, stats: Stats, number: int) -> None:
    for round_ in itertools.count(number):
        if not stats.more():
            return
        stream = await open_one(port, stats)
        if stream is None:
            continue
        async with stream:
            try:
                kind = round_ % 3
                if kind == 0:  # dribble: never silent, never complete
                    for byte in PARTIAL:
                        await stream.send_all(bytes([byte]))
                        await trio.sleep(0.05)
                elif kind == 1:  # garbage
                    await stream.send_all(b"\x00garbage, not JSON\n")
                else:  # half a line, then nothing more
                    await stream.send_all(PARTIAL)
                await drain(stream)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass


async def main(args: argparse.Namespace) -> None:
    stats = Stats(args.max_connections)
    opened = trio.Semaphore(0, max_value=args.idle) if args.idle else None
    with trio.move_on_after(args.seconds):
        async with trio.open_nursery() as nursery:
            for _ in range(args.idle):
                nursery.start_soon(idle, args.port, stats, opened)
            if opened is not None:
                for _ in range(args.idle):
                    await opened.acquire()
            print("ready", flush=True)
            for number in range(args.slowloris):
                nursery.start_soon(slowloris, args.port, stats, number)
    print(json.dumps({"connections": stats.connections, "failed": stats.failed}), flush=True)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--idle", type=int, default=500)
    parser.add_argument("--slowloris", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--max-connections", type=int, default=200_000)
    return parser.parse_args(argv)


if __name__ == "__main__":
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and soft < 4096:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    except (ImportError, ValueError, OSError):
        pass  # Windows, or not allowed: 500 connections fit the usual limits anyway
    trio.run(main, parse(sys.argv[1:]))
