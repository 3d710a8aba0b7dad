"""The MCP session driven directly: messages in, messages out, no sockets."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from app_client.wire import ToolResult, ToolSpec
from broker.config.settings import Settings
from broker.core.calls import Call
from broker.daemon.broker_core import BrokerCore
from broker.mcp.jsonrpc import parse_message
from broker.mcp.server import McpServer
from broker.mcp.session import Session, open_session

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "tester", "version": "9"},
}


class Outbox:
    """Collects what a session sends; ``next()`` waits for the next message."""

    def __init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[tuple[bool, dict[str, Any]]](math.inf)
        self.closes = 0

    async def send(self, data: bytes, *, final: bool = False) -> None:
        self._send.send_nowait((final, json.loads(data)))

    def send_nowait(self, data: bytes) -> bool:
        self._send.send_nowait((False, json.loads(data)))
        return True

    def send_final_nowait(self, data: bytes) -> bool:
        self._send.send_nowait((True, json.loads(data)))
        return True

    def close(self) -> None:
        self.closes += 1

    async def next(self, timeout: float = 5) -> tuple[bool, dict[str, Any]]:
        with trio.fail_after(timeout):
            return await self._receive.receive()

    def empty(self) -> bool:
        return self._receive.statistics().current_buffer_used == 0


def request(request_id: Any, method: str, params: dict[str, Any] | None = None, *, modern: bool = False) -> Any:
    params = dict(params or {})
    if modern:
        params["_meta"] = {**MODERN_META, **params.get("_meta", {})}
    return parse_message(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))


def notification(method: str, params: dict[str, Any] | None = None) -> Any:
    return parse_message(json.dumps({"jsonrpc": "2.0", "method": method, "params": params or {}}))


@pytest.fixture
def core(tmp_path: Path) -> BrokerCore:
    return BrokerCore(Settings(home=tmp_path), "secret")


@asynccontextmanager
async def session_for(core: BrokerCore, **kwargs: Any) -> AsyncIterator[tuple[Session, Outbox]]:
    outbox = Outbox()
    server = McpServer.of(core, **kwargs)
    async with open_session(server, transport="stdio", label="test", notify=outbox, reinitialize=True) as session:
        yield session, outbox


async def ask(session: Session, outbox: Outbox, message: Any) -> dict[str, Any]:
    await session.handle(message, outbox)
    final, reply = await outbox.next()
    assert final
    return reply


def add_app(core: BrokerCore, name: str, tools: list[str]) -> None:
    core.registry.register(
        object(),  # type: ignore[arg-type]  # the registry only keeps the link
        app_name=name, instance_id=None, tools=[ToolSpec(t) for t in tools], max_concurrency=1, app_version=None,
    )


async def test_the_handshake_comes_first(core: BrokerCore) -> None:
    async with session_for(core) as (session, outbox):
        early = await ask(session, outbox, request(1, "tools/list"))
        assert early["error"]["code"] == -32600
        assert "not initialized" in early["error"]["message"]
        assert (await ask(session, outbox, request(2, "ping")))["result"] == {}
        init = await ask(session, outbox, request(3, "initialize", {
            "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}))
        assert init["result"]["protocolVersion"] == "2025-03-26"
        assert init["result"]["capabilities"] == {"tools": {"listChanged": True}, "resources": {"subscribe": True, "listChanged": True}, "prompts": {"listChanged": True}, "completions": {}, "logging": {}}
        assert init["result"]["serverInfo"]["name"] == "toolbridge"
        await session.handle(notification("notifications/initialized"), outbox)
        listed = await ask(session, outbox, request(4, "tools/list"))
        assert listed["result"] == {"tools": []}  # no modern-only fields in the handshake era
        assert (session.client_name, session.client_version) == ("c", "1")


@pytest.mark.parametrize(("offered", "answered"), [
    ("2024-11-05", "2024-11-05"), ("2025-11-25", "2025-11-25"), ("1999-01-01", "2025-11-25"),
    ("2026-07-28", "2025-11-25"),
])
async def test_initialize_negotiates_the_version(core: BrokerCore, offered: str, answered: str) -> None:
    async with session_for(core) as (session, outbox):
        reply = await ask(session, outbox, request(1, "initialize", {"protocolVersion": offered, "capabilities": {}}))
        assert reply["result"]["protocolVersion"] == answered


async def test_initialize_needs_a_version(core: BrokerCore) -> None:
    async with session_for(core) as (session, outbox):
        reply = await ask(session, outbox, request(1, "initialize", {"capabilities": {}}))
        assert reply["error"]["code"] == -32602
        assert not session.initialized.is_set()


async def test_modern_requests_carry_their_envelope(core: BrokerCore) -> None:
    async with session_for(core) as (session, outbox):
        discover = (await ask(session, outbox, request(1, "server/discover", modern=True)))["result"]
        assert discover["supportedVersions"][0] == "2026-07-28"
        assert "2025-11-25" in discover["supportedVersions"]
        assert discover["capabilities"] == {"tools": {"listChanged": True}, "resources": {"subscribe": True, "listChanged": True}, "prompts": {"listChanged": True}, "completions": {}, "logging": {}}
        assert (discover["resultType"], discover["ttlMs"], discover["cacheScope"]) == ("complete", 0, "private")
        assert discover["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "toolbridge"
        listed = (await ask(session, outbox, request(2, "tools/list", modern=True)))["result"]
        assert (listed["tools"], listed["resultType"], listed["ttlMs"], listed["cacheScope"]) == (
            [], "complete", 0, "private")

        unsupported = await ask(session, outbox, request(3, "tools/list", {
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}}, modern=True))
        assert unsupported["error"]["code"] == -32022
        assert unsupported["error"]["data"]["requested"] == "2099-01-01"
        assert "2026-07-28" in unsupported["error"]["data"]["supported"]

        no_caps = await ask(session, outbox, request(4, "tools/list", {
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}))
        assert no_caps["error"]["code"] == -32602
        assert "clientCapabilities" in no_caps["error"]["message"]

        bare = await ask(session, outbox, request(5, "server/discover"))
        assert bare["error"]["code"] == -32602

        ping = await ask(session, outbox, request(6, "ping", modern=True))
        assert ping["error"]["code"] == -32601
        assert not session.initialized.is_set()  # modern requests never initialize the session


@pytest.mark.parametrize(("method", "words"), [("logging/setLevel", "does not exist in protocol 2026-07-28"), ("frobnicate", "frobnicate")])
async def test_unknown_methods(core: BrokerCore, method: str, words: str) -> None:
    async with session_for(core) as (session, outbox):
        reply = await ask(session, outbox, request(1, method, modern=True))
        assert reply["error"]["code"] == -32601
        assert words in reply["error"]["message"]


async def test_bad_params(core: BrokerCore) -> None:
    async with session_for(core) as (session, outbox):
        no_name = await ask(session, outbox, request(1, "tools/call", {"arguments": {}}, modern=True))
        assert no_name["error"]["code"] == -32602
        bad_cursor = await ask(session, outbox, request(2, "tools/list", {"cursor": "nope"}, modern=True))
        assert bad_cursor["error"]["code"] == -32602
        bad_filter = await ask(session, outbox, request(3, "subscriptions/listen", {"notifications": 1}, modern=True))
        assert bad_filter["error"]["code"] == -32602


async def test_unknown_tool_is_minus_32602(core: BrokerCore) -> None:
    async with session_for(core) as (session, outbox):
        reply = await ask(session, outbox, request(1, "tools/call", {"name": "App__nope", "arguments": {}}, modern=True))
        assert reply["error"]["code"] == -32602
        assert reply["error"]["data"] == {"name": "App__nope"}


async def test_listen_stream_acknowledges_coalesces_and_cancels(core: BrokerCore, autojump_clock: Any) -> None:
    async with session_for(core) as (session, outbox):
        await session.handle(request("listen-1", "subscriptions/listen", {
            "notifications": {"toolsListChanged": True, "promptsListChanged": True}}, modern=True), outbox)
        final, ack = await outbox.next()
        assert not final
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        # Prompts (apps' protocol v2) are honoured too; an unknown kind would not be.
        assert ack["params"] == {"notifications": {"toolsListChanged": True, "promptsListChanged": True},
                                 "_meta": {"io.modelcontextprotocol/subscriptionId": "listen-1"}}

        duplicate = await ask(session, outbox, request("listen-1", "tools/list", modern=True))
        assert duplicate["error"]["code"] == -32600

        for name in ("A", "B", "C"):  # one burst
            add_app(core, name, ["t"])
        final, changed = await outbox.next()
        assert changed == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                           "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": "listen-1"}}}
        await trio.sleep(1)
        assert outbox.empty()
        add_app(core, "D", ["t"])
        assert (await outbox.next())[1]["method"] == "notifications/tools/list_changed"

        await session.handle(notification("notifications/cancelled", {"requestId": "listen-1"}), outbox)
        await trio.sleep(1)
        assert session.in_flight == 0
        assert outbox.empty()  # a cancelled request gets no response


async def test_shutdown_ends_a_listen_stream_gracefully(core: BrokerCore) -> None:
    async with session_for(core) as (session, outbox):
        await session.handle(request(1, "subscriptions/listen", {"notifications": {"toolsListChanged": True}},
                                     modern=True), outbox)
        await outbox.next()
        core.begin_shutdown()
        final, reply = await outbox.next()
        assert final
        assert reply["result"] == {"resultType": "complete", "_meta": {"io.modelcontextprotocol/subscriptionId": 1}}


async def test_a_closing_session_still_answers_what_is_in_flight(core: BrokerCore) -> None:
    async with session_for(core) as (session, outbox):
        await session.handle(request(1, "subscriptions/listen", {"notifications": {}}, modern=True), outbox)
        await outbox.next()
    final, reply = await outbox.next()
    assert reply["id"] == 1
    assert reply["error"]["code"] == -32000
    assert "session ended" in reply["error"]["message"]


async def test_handshake_list_changed_is_coalesced(core: BrokerCore, autojump_clock: Any) -> None:
    async with session_for(core) as (session, outbox):
        add_app(core, "Before", ["t"])  # before initialize: not announced
        await ask(session, outbox, request(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}}))
        await trio.sleep(1)
        assert outbox.empty()
        for name in ("A", "B", "C"):
            add_app(core, name, ["t", "u"])
        assert (await outbox.next()) == (False, {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        await trio.sleep(1)
        assert outbox.empty()
        add_app(core, "D", ["t"])
        assert (await outbox.next())[1]["method"] == "notifications/tools/list_changed"


async def test_tools_list_pages(core: BrokerCore) -> None:
    for name in ("E", "D", "C", "B", "A"):
        add_app(core, name, ["t"])
    async with session_for(core, page_size=2) as (session, outbox):
        names: list[str] = []
        cursor = None
        for request_id in range(1, 10):
            params: dict[str, Any] = {} if cursor is None else {"cursor": cursor}
            result = (await ask(session, outbox, request(request_id, "tools/list", params, modern=True)))["result"]
            names += [tool["name"] for tool in result["tools"]]
            cursor = result.get("nextCursor")
            if cursor is None:
                break
        assert names == ["A__t", "B__t", "C__t", "D__t", "E__t"]
        assert request_id == 3


# --- tools/call without a task: the router's Call record answers through the session ------------


class RecordingConn:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    def send_reliable_nowait(self, message: Any) -> bool:
        self.sent.append(message)
        return True


@attrs.define(eq=False)
class FakeLink:
    id: int = 424242
    label: str = "Desk"
    conn: RecordingConn = attrs.Factory(RecordingConn)

    def send_reliable_nowait(self, message: Any) -> bool:  # an AppPort (broker.core.ports)
        return self.conn.send_reliable_nowait(message)

    def replaced(self) -> None:
        pass


class TightOutbox(Outbox):
    """An outbox with no room for a response right now: the session must wait for room."""

    def __init__(self) -> None:
        super().__init__()
        self.refused = 0

    def send_final_nowait(self, data: bytes) -> bool:
        self.refused += 1
        return False


def linked_app(core: BrokerCore) -> FakeLink:
    link = FakeLink()
    core.registry.register(link, app_name="Desk", instance_id=None,  # type: ignore[arg-type]
                           tools=[ToolSpec("Echo")], max_concurrency=4, app_version=None)
    return link


async def start_call(session: Session, outbox: Outbox, link: FakeLink, request_id: int, **params: Any) -> Any:
    await session.handle(request(request_id, "tools/call", {"name": "Desk__Echo", "arguments": {}, **params},
                                 modern=True), outbox)
    invocation = link.conn.sent[-1]
    assert type(invocation).__name__ == "ToolInvocation"
    return invocation


async def test_a_response_with_no_room_waits_for_room(core: BrokerCore) -> None:
    link = linked_app(core)
    outbox = TightOutbox()
    async with open_session(McpServer.of(core), transport="stdio", label="t", reinitialize=True) as session:
        invocation = await start_call(session, outbox, link, 7)
        assert session.in_flight == 1
        call = core.calls.get(invocation.correlation_id)
        assert call is not None
        core.router.resolve(call, ToolResult(success=True, data="done"))
        final, reply = await outbox.next()
    assert outbox.refused == 1 and final
    assert reply["id"] == 7 and reply["result"]["content"][0]["text"] == "done"
    assert outbox.closes == 1 and session.in_flight == 0 and len(core.calls) == 0


async def test_an_origin_that_raises_on_its_outcome_breaks_neither_the_call_nor_the_next(core: BrokerCore) -> None:
    """The router tells an origin its outcome inside the app link's reader: a bug there is
    logged, the call still ends once and releases its slot, and the next call goes out."""
    link = linked_app(core)

    class Broken:
        told = 0

        def call_progress(self, call: Call, progress: float, total: float | None, message: str | None) -> None:
            pass

        def call_done(self, call: Call, outcome: Any) -> None:
            self.told += 1
            raise RuntimeError("a bug in the caller")

    origin = Broken()
    call = core.router.start_call("Desk__Echo", {}, origin=origin, deadlines=None)
    assert isinstance(call, Call) and call.sent
    assert core.router.resolve(call, ToolResult(success=True, data="ok"))  # does not raise
    assert call.done and origin.told == 1 and len(core.calls) == 0
    assert not core.router.resolve(call, ToolResult(success=True, data="again"))  # once only
    sent_before = len(link.conn.sent)
    following = core.router.start_call("Desk__Echo", {}, origin=origin, deadlines=None)
    assert isinstance(following, Call) and following.sent and len(link.conn.sent) == sent_before + 1


async def test_one_record_per_call_owns_its_ids_and_every_table_holds_it(core: BrokerCore) -> None:
    """The session's request in flight, the correlation map's entry and the deadline heap's are
    one object, the router's Call, which owns the request id, the correlation id and the deadline."""
    link = linked_app(core)
    async with session_for(core) as (session, outbox):
        invocation = await start_call(session, outbox, link, 11, _meta={"toolbridge/timeoutMs": 5000})
        call = core.calls.get(invocation.correlation_id)
        assert call is not None
        assert call.request_id == 11 and call.correlation_id == invocation.correlation_id
        assert session.requests[11] is call
        assert session._deadlines is not None and session._deadlines._heap == [call]
        assert call.deadline - trio.current_time() <= 5
        core.router.resolve(call, ToolResult(success=True, data="ok"))
        final, reply = await outbox.next()
    assert final and reply["id"] == 11
    assert session.in_flight == 0 and len(core.calls) == 0


async def test_the_correlation_map_holds_queued_calls_but_status_counts_only_sent_ones(core: BrokerCore) -> None:
    """A call waiting for an admission slot is live (shutdown ends it, the limit counts it) but
    has no link: the app cannot answer it, and ``callsInFlight`` counts only calls sent."""
    link = FakeLink()
    core.registry.register(link, app_name="Desk", instance_id=None,  # type: ignore[arg-type]
                           tools=[ToolSpec("Echo")], max_concurrency=1, app_version=None)
    async with session_for(core) as (session, outbox):
        sent = await start_call(session, outbox, link, 1)
        await session.handle(request(2, "tools/call", {"name": "Desk__Echo", "arguments": {}}, modern=True), outbox)
        queued = session.requests[2]
        assert isinstance(queued, Call) and queued.link is None and queued.correlation_id
        assert len(core.calls) == 2 and core.status()["callsInFlight"] == 1
        assert core.calls.get(queued.correlation_id) is None  # not given to the app: not answerable
        assert core.begin_shutdown() == 2
        replies = {(await outbox.next())[1]["id"] for _ in range(2)}
    assert replies == {1, 2} and len(core.calls) == 0 and core.status()["callsInFlight"] == 0
    del sent


async def test_the_session_deadline_queue_times_calls_out(core: BrokerCore, autojump_clock: Any) -> None:
    link = linked_app(core)
    async with session_for(core) as (session, outbox):
        invocation = await start_call(session, outbox, link, 8, _meta={"toolbridge/timeoutMs": 2000})
        final, reply = await outbox.next(timeout=10)
    assert final and reply["result"]["isError"] is True
    assert "timed out after 2 s" in reply["result"]["content"][0]["text"]
    cancel = link.conn.sent[-1]
    assert type(cancel).__name__ == "ToolCancel" and cancel.correlation_id == invocation.correlation_id
    assert cancel.reason == "timeout"
    assert len(core.calls) == 0 and core.registry.lookup("Desk__Echo").instance.admission.active == 0


async def test_calls_in_flight_when_the_session_ends_get_an_error_and_are_cancelled(core: BrokerCore) -> None:
    link = linked_app(core)
    async with session_for(core) as (session, outbox):
        invocation = await start_call(session, outbox, link, 9)
        cancelled = await start_call(session, outbox, link, 10)
        await session.handle(notification("notifications/cancelled", {"requestId": 10}), outbox)
    final, reply = await outbox.next()
    assert reply["id"] == 9 and reply["error"]["code"] == -32000 and "session ended" in reply["error"]["message"]
    assert outbox.empty()  # the request the client cancelled gets no answer at all
    cancels = {m.correlation_id for m in link.conn.sent if type(m).__name__ == "ToolCancel"}
    assert cancels == {invocation.correlation_id, cancelled.correlation_id}
    assert len(core.calls) == 0
