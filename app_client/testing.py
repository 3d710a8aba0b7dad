"""A scriptable fake broker, for testing apps (and this library) without the daemon.

Theory of operation
-------------------
:class:`FakeBroker` speaks the broker's side of the wire protocol (v1, and v2's resources
and prompts) one message at a time, as the test tells it to. It accepts connections two ways:

* in-process: pass :attr:`FakeBroker.connector` as ``App(connector=...)``; each connection
  attempt creates a :func:`trio.testing.memory_stream_pair` (works with ``autojump_clock``);
* over real TCP: ``port = await broker.serve_tcp(nursery)`` listens on ``127.0.0.1`` (for an
  app running in another thread or process).

Either way each connection shows up as a :class:`FakeLink` from :meth:`FakeBroker.accept`,
which reads through the broker side's protocol machine
(:class:`app_client.protocol.BrokerConnection`, so an app that breaks the protocol fails the
test) and keeps :meth:`FakeLink.send_raw` for malformed input,
with helpers to receive typed messages, accept or reject the registration, invoke tools and
close the link. Nothing happens behind the test's back except that :meth:`FakeLink.receive`
can answer pings for the test when asked to. Use the helpers under ``trio.fail_after`` (or
the ``autojump_clock``) so a test that waits for a message that never comes fails instead of
hanging.

Protocol v2 (protocol.md section 11): :meth:`FakeLink.accept_registration` answers the version
the app asked for (at most 2), so an app with resources or prompts speaks v2 to it;
:meth:`FakeLink.read` sends a ``resourceRead`` and returns the ``resourceResponse``,
:meth:`FakeLink.get_prompt` the same for ``promptGet``, :meth:`FakeLink.cancel` sends
``toolCancel`` for a call or a read. The messages an app sends without being asked
(``toolProgress``, ``resourceUpdated``, ``setResources``, ``setPrompts``) are kept in
:attr:`FakeLink.progress`, :attr:`FakeLink.resource_updates`, :attr:`FakeLink.resource_sets`
and :attr:`FakeLink.prompt_sets` when met while waiting for an answer, and
:meth:`FakeLink.wait_for` waits for the next one of a kind.

Example::

    broker = FakeBroker()
    app = App("Demo", host="fake", port=1, token="t", connector=broker.connector)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(app.run)
        link = await broker.accept()
        await link.accept_registration()
        result = await link.call("echo", {"text": "hi"})
        nursery.cancel_scope.cancel()

Resources and prompts without a daemon::

    app = App("Notes", host="fake", port=1, token="t", connector=broker.connector)

    @app.resource("notes://today", mime_type="text/markdown")
    async def today() -> str:
        return "# Today"

    async with trio.open_nursery() as nursery:
        nursery.start_soon(app.run)
        link = await broker.accept()
        register = await link.accept_registration()      # answers protocolVersion 2
        assert register.resources[0].uri == "notes://today"
        answer = await link.read("notes://today")
        assert answer.contents == [{"uri": "notes://today", "text": "# Today", "mimeType": "text/markdown"}]
        app.resource_updated("notes://today")
        assert (await link.wait_for(ResourceUpdated)).uri == "notes://today"
        nursery.cancel_scope.cancel()
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any, TypeVar

import trio
import trio.testing

from .channel import LineChannel
from .discovery import DaemonAddress
from .protocol import (
    DEFAULT_MAX_LINE_BYTES,
    BadLine,
    BrokerConnection,
    ConnectionClosed,
    Error,
    LocalProtocolError,
    Message,
    PROTOCOL_VERSION,
    Ping,
    PromptGet,
    PromptResponse,
    Pong,
    Register,
    Registered,
    ResourceRead,
    ResourceResponse,
    ResourceUpdated,
    SetPrompts,
    SetResources,
    ToolCancel,
    ToolInvocation,
    ToolProgress,
    ToolResponse,
    ToolResult,
    decode_message,
    encode_message,
)

__all__ = ["FakeBroker", "FakeLink"]

M = TypeVar("M")


class FakeLink:
    """The broker's end of one connection."""

    def __init__(self, stream: trio.abc.Stream, address: DaemonAddress | None = None) -> None:
        self.stream = stream
        self.address = address
        self.register: Register | None = None
        self.closed = trio.Event()
        self._channel = LineChannel(stream)
        #: The broker side's protocol rules for this link.
        self.protocol = BrokerConnection()
        self._ids = itertools.count(1)
        self.progress: list[ToolProgress] = []
        #: Protocol v2 messages the app sent unasked, kept when met while waiting for an answer.
        self.resource_updates: list[ResourceUpdated] = []
        self.resource_sets: list[SetResources] = []
        self.prompt_sets: list[SetPrompts] = []

    async def send(self, message: Message) -> None:
        """Send ``message``; the protocol machine records it (``registered``, invocations).

        A message the broker's rules refuse now is sent all the same: a fake broker may break
        the protocol on purpose, to test how the app copes.
        """
        try:
            data = self.protocol.send(message)
        except LocalProtocolError:
            data = encode_message(message)
        await self.stream.send_all(data)

    async def send_raw(self, data: bytes) -> None:
        """Send bytes as they are (for malformed-input tests)."""
        await self.stream.send_all(data)

    async def receive(self, *, answer_pings: bool = False) -> Message:
        """The next message from the app; raises ConnectionClosed at end of stream, and
        RemoteProtocolError for a line the broker side's protocol refuses (a bad line, a first
        message other than ``register``, a second ``register``, a message an app never sends).

        With ``answer_pings`` the app's own pings are answered and skipped.
        """
        while True:
            try:
                line = await self._channel.receive_line()
            except ConnectionClosed as exc:
                if exc.__cause__ is not None:
                    raise ConnectionClosed("the app's connection broke") from exc.__cause__
                raise ConnectionClosed("the app closed the connection") from None
            try:
                event = self.protocol.receive_line(line)
            except LocalProtocolError:  # the script went past the rules (it sent a fatal error)
                event = decode_message(line)
            if isinstance(event, BadLine):
                raise event.error
            message = event
            if answer_pings and isinstance(message, Ping):
                await self.send(Pong(id=message.id))
                continue
            return message

    async def expect(self, kind: type[M]) -> M:
        """Receive the next message and check it is a ``kind``."""
        message = await self.receive()
        if not isinstance(message, kind):
            raise AssertionError(f"expected {kind.__name__}, got {message!r}")
        return message

    async def accept_registration(
        self,
        *,
        heartbeat_interval_ms: int = 0,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        check_token: str | None = None,
        protocol_version: int | None = None,
    ) -> Register:
        """Receive ``register`` and answer ``registered`` (agent names ``<app>__<tool>``).

        The answer's ``protocolVersion`` is the lower of the app's and 2 (as a daemon
        negotiates), unless ``protocol_version`` says which version to answer.

        With ``check_token`` a wrong token is answered with a fatal ``unauthorized`` error
        and the link is closed; AssertionError is raised then.
        """
        register = await self.expect(Register)
        self.register = register
        if check_token is not None and register.token != check_token:
            await self.reject(register, "unauthorized", "wrong token")
            raise AssertionError("the app presented the wrong token")
        await self.send(
            Registered(
                app_id=f"{register.app_name}-1",
                instance_id=register.instance_id or "instance",
                app_label=register.app_name,
                tool_names={t.name: f"{register.app_name}__{t.name}" for t in register.tools},
                heartbeat_interval_ms=heartbeat_interval_ms,
                max_line_bytes=max_line_bytes,
                protocol_version=protocol_version
                if protocol_version is not None
                else min(register.protocol_version, PROTOCOL_VERSION),
            )
        )
        return register

    async def reject(self, register: Register | None, code: str, message: str) -> None:
        """Answer with a fatal ``error`` and close the link."""
        del register
        await self.send(Error(code=code, message=message, fatal=True))
        await self.aclose()

    async def invoke(
        self,
        tool: str,
        parameters: dict[str, Any] | None = None,
        *,
        timeout_ms: int | None = None,
        progress: bool = False,
        correlation_id: int | None = None,
    ) -> int:
        """Send a ``toolInvocation``; returns its correlation id."""
        cid = correlation_id if correlation_id is not None else next(self._ids)
        await self.send(
            ToolInvocation(
                correlation_id=cid,
                tool=tool,
                parameters=parameters or {},
                timeout_ms=timeout_ms,
                progress=progress,
            )
        )
        return cid

    def _keep(self, message: Message) -> bool:
        """Record a message the app sends unasked (progress, v2 notices); False for others."""
        if isinstance(message, ToolProgress):
            self.progress.append(message)
        elif isinstance(message, ResourceUpdated):
            self.resource_updates.append(message)
        elif isinstance(message, SetResources):
            self.resource_sets.append(message)
        elif isinstance(message, SetPrompts):
            self.prompt_sets.append(message)
        else:
            return False
        return True

    async def _answer(self, kind: type[M], correlation_id: int | None) -> M:
        """The next ``kind`` message (pings answered, unasked messages kept), optionally for
        ``correlation_id``; AssertionError for anything else."""
        name = str(getattr(getattr(kind, "__struct_config__", None), "tag", kind.__name__))  # the wire's name
        while True:
            message = await self.receive(answer_pings=True)
            if self._keep(message):
                continue
            if not isinstance(message, kind):
                raise AssertionError(f"expected {name}, got {message!r}")
            if correlation_id is not None and getattr(message, "correlation_id", None) != correlation_id:
                raise AssertionError(f"expected the response to {correlation_id}, got {message!r}")
            return message

    async def response(self, correlation_id: int | None = None) -> ToolResponse:
        """Wait for the next ``toolResponse`` (pings answered, progress kept in
        :attr:`progress`, v2 notices in their lists), optionally checking its correlation id."""
        return await self._answer(ToolResponse, correlation_id)

    async def wait_for(self, kind: type[M]) -> M:
        """Wait for the next message of ``kind`` (pings answered); the unasked messages met on
        the way are kept in their lists (a ``kind`` among them is returned, not kept)."""
        while True:
            message = await self.receive(answer_pings=True)
            if isinstance(message, kind):
                return message
            if not self._keep(message):
                name = getattr(getattr(kind, "__struct_config__", None), "tag", kind.__name__)
                raise AssertionError(f"expected {name}, got {message!r}")

    async def cancel(self, correlation_id: int, reason: str = "cancelled") -> None:
        """Send ``toolCancel`` for a call, read or prompt get."""
        await self.send(ToolCancel(correlation_id=correlation_id, reason=reason))

    async def request_read(self, uri: str, *, timeout_ms: int | None = None,
                           correlation_id: int | None = None) -> int:
        """Protocol v2: send a ``resourceRead`` of the app's own ``uri``; returns its correlation id."""
        cid = correlation_id if correlation_id is not None else next(self._ids)
        await self.send(ResourceRead(correlation_id=cid, uri=uri, timeout_ms=timeout_ms))
        return cid

    async def read(self, uri: str, *, timeout_ms: int | None = None) -> ResourceResponse:
        """Protocol v2: read ``uri``; returns the app's ``resourceResponse`` (``contents`` or ``error``)."""
        cid = await self.request_read(uri, timeout_ms=timeout_ms)
        return await self._answer(ResourceResponse, cid)

    async def request_prompt(self, name: str, arguments: dict[str, str] | None = None, *,
                             timeout_ms: int | None = None, correlation_id: int | None = None) -> int:
        """Protocol v2: send a ``promptGet``; returns its correlation id."""
        cid = correlation_id if correlation_id is not None else next(self._ids)
        await self.send(PromptGet(correlation_id=cid, name=name, arguments=arguments or {}, timeout_ms=timeout_ms))
        return cid

    async def get_prompt(self, name: str, arguments: dict[str, str] | None = None, *,
                         timeout_ms: int | None = None) -> PromptResponse:
        """Protocol v2: get the prompt ``name``; returns the app's ``promptResponse``."""
        cid = await self.request_prompt(name, arguments, timeout_ms=timeout_ms)
        return await self._answer(PromptResponse, cid)

    async def call(
        self, tool: str, parameters: dict[str, Any] | None = None, *, timeout_ms: int | None = None
    ) -> ToolResult:
        """Invoke ``tool`` and return its result."""
        cid = await self.invoke(tool, parameters, timeout_ms=timeout_ms)
        return (await self.response(cid)).result

    async def ping(self, ping_id: int = 1) -> None:
        """Send ``ping`` and require ``pong`` with the same id as the next message.

        ``toolProgress`` messages met on the way are kept in :attr:`progress`.
        """
        await self.send(Ping(id=ping_id))
        while True:
            pong = await self.receive()
            if isinstance(pong, ToolProgress):
                self.progress.append(pong)
                continue
            if not isinstance(pong, Pong):
                raise AssertionError(f"expected Pong, got {pong!r}")
            break
        if pong.id != ping_id:
            raise AssertionError(f"pong {pong.id} does not answer ping {ping_id}")

    async def aclose(self) -> None:
        """Close the link (the app sees end of stream)."""
        await trio.aclose_forcefully(self.stream)
        self.closed.set()


class FakeBroker:
    """Accepts app connections and hands them to the test as :class:`FakeLink` objects.

    ``refuse_connections`` makes :attr:`connector` fail like a daemon that is not listening.
    ``addresses`` records each address the app dialled (token included).
    """

    def __init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[FakeLink](math.inf)
        self.refuse_connections = False
        self.addresses: list[DaemonAddress] = []
        self.attempts = 0

    async def connector(self, address: DaemonAddress) -> trio.abc.Stream:
        """An ``App(connector=...)`` that connects over an in-memory stream pair."""
        self.attempts += 1
        self.addresses.append(address)
        if self.refuse_connections:
            raise ConnectionRefusedError(111, "Connection refused (fake)")
        client, server = trio.testing.memory_stream_pair()
        self._send.send_nowait(FakeLink(server, address))
        return client

    async def serve_tcp(self, nursery: trio.Nursery) -> int:
        """Listen on 127.0.0.1, port chosen by the OS; returns the port."""

        async def handle(stream: trio.SocketStream) -> None:
            link = FakeLink(stream)
            self.attempts += 1
            self._send.send_nowait(link)
            await link.closed.wait()

        listeners = await nursery.start(functools.partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
        port: int = listeners[0].socket.getsockname()[1]
        return port

    async def accept(self) -> FakeLink:
        """The next connection."""
        return await self._receive.receive()
