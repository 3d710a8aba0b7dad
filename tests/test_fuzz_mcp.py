"""Property tests of the MCP front door without sockets: any JSON-RPC in, valid JSON-RPC out.

Arbitrary bytes and JSON values into :func:`broker.mcp.jsonrpc.parse_message` give a message
or an :class:`RpcError` whose encoding is a valid error response. Sequences of near-valid
requests (right and wrong ids, methods, params, ``_meta`` envelopes, cancellations) into one
:class:`broker.mcp.session.Session` give, for each request, exactly one valid JSON-RPC
response with its id (none when the client cancelled it), and nothing for notifications;
nothing else escapes and nothing stays in flight.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import trio
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from app_client.wire import ToolSpec
from broker.config.settings import Settings
from broker.daemon.connection import PeerClosed
from broker.daemon.broker_core import BrokerCore
from broker.mcp import protocol
from broker.mcp.jsonrpc import Notification, Request, Response, RpcError, parse_message, parse_object
from broker.mcp.server import McpServer
from broker.mcp.session import open_session

FUZZ = settings(max_examples=int(os.environ.get("TOOLBRIDGE_FUZZ_EXAMPLES", "150")), deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=10,
)


def check_response(message: Any, request_id: Any) -> None:
    """A valid JSON-RPC 2.0 response to ``request_id`` (``None``: an id that could not be read)."""
    assert isinstance(message, dict), message
    assert message.get("jsonrpc") == "2.0", message
    assert message.get("id") == request_id, (message, request_id)
    assert ("result" in message) != ("error" in message), message
    if "error" in message:
        error = message["error"]
        assert isinstance(error.get("code"), int) and not isinstance(error.get("code"), bool), error
        assert isinstance(error.get("message"), str) and error["message"], error
    else:
        assert isinstance(message["result"], dict), message


@FUZZ
@given(data=st.binary(max_size=300))
@example(data=b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": ' + b"[" * 5000 + b"]" * 5000 + b"}")
@example(data=b"[" * 100_000)
def test_any_bytes_parse_to_a_message_or_an_error_reply(data: bytes) -> None:
    try:
        parsed = parse_message(data)
    except RpcError as exc:
        check_response(json.loads(exc.encode()), exc.request_id)
    else:
        assert isinstance(parsed, Request | Notification | Response)


@FUZZ
@given(value=json_values)
def test_any_json_value_parses_to_a_message_or_an_error_reply(value: Any) -> None:
    try:
        parsed = parse_object(value)
    except RpcError as exc:
        check_response(json.loads(exc.encode()), exc.request_id)
    else:
        assert isinstance(parsed, Request | Notification | Response)


# --- near-valid requests into one session -------------------------------------------------------

ids = st.one_of(st.integers(-5, 5), st.text(max_size=3), st.none(), st.booleans(), st.floats(0, 1),
                st.lists(st.integers(), max_size=1))
methods = st.one_of(
    st.sampled_from(["initialize", "ping", "tools/list", "tools/call", "server/discover", "subscriptions/listen",
                     "notifications/cancelled", "notifications/initialized", "prompts/list", "bogus", ""]),
    st.text(max_size=10),
)
meta = st.one_of(
    json_values,
    st.fixed_dictionaries({}, optional={
        protocol.PROTOCOL_VERSION_KEY: st.one_of(st.sampled_from(["2026-07-28", "2025-11-25", "1999-01-01"]), json_values),
        protocol.CLIENT_CAPABILITIES_KEY: st.one_of(st.just({}), json_values),
        protocol.CLIENT_INFO_KEY: st.one_of(st.just({"name": "fuzz", "version": "1"}), json_values),
        "progressToken": st.one_of(st.integers(), st.text(max_size=3), json_values),
        protocol.TIMEOUT_KEY: st.one_of(st.integers(-10, 10**9), st.floats(allow_nan=False), json_values),
    }),
)
params = st.one_of(
    st.none(),
    json_values,
    st.fixed_dictionaries({}, optional={
        "_meta": meta,
        "name": st.one_of(st.sampled_from(["Fuzz__echo", "Fuzz__nope", "nope"]), json_values),
        "arguments": st.one_of(st.just({"text": "hi"}), st.just({"text": "../../etc/passwd"}), json_values),
        "protocolVersion": st.one_of(st.sampled_from(["2025-11-25", "2024-11-05", "2026-07-28"]), json_values),
        "capabilities": json_values,
        "clientInfo": json_values,
        "cursor": st.one_of(st.text(max_size=12), json_values),
        "notifications": st.one_of(st.just({"toolsListChanged": True}), json_values),
        "requestId": st.one_of(ids, json_values),
        "reason": json_values,
    }),
)


@st.composite
def near_valid(draw: st.DrawFn) -> Any:
    message: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        message["jsonrpc"] = "2.0"
    else:
        message["jsonrpc"] = draw(json_values)
    if draw(st.booleans()):
        message["id"] = draw(ids)
    if draw(st.integers(0, 9)):
        message["method"] = draw(methods)
    else:
        message[draw(st.sampled_from(["result", "error"]))] = draw(json_values)
    p = draw(params)
    if p is not None or draw(st.booleans()):
        message["params"] = p
    return message


class Collect:
    """The outbox of one message: what the session sends for it."""

    def __init__(self) -> None:
        self.messages: list[tuple[bool, Any]] = []
        self.closed = 0

    async def send(self, data: bytes, *, final: bool = False) -> None:
        self.messages.append((final, json.loads(data)))
        await trio.lowlevel.checkpoint()

    def send_nowait(self, data: bytes) -> bool:
        self.messages.append((False, json.loads(data)))
        return True

    def send_final_nowait(self, data: bytes) -> bool:
        self.messages.append((True, json.loads(data)))
        return True

    def close(self) -> None:
        self.closed += 1


class _DeadConn:
    async def send(self, message: Any) -> None:
        raise PeerClosed("gone")

    def send_nowait(self, message: Any) -> bool:
        return False

    def send_reliable_nowait(self, message: Any) -> bool:
        return False


class _DeadLink:
    id = 10**9
    label = "Fuzz"
    conn = _DeadConn()

    def send_reliable_nowait(self, message: Any) -> bool:  # an AppPort (broker.core.ports)
        return self.conn.send_reliable_nowait(message)

    def replaced(self) -> None:
        pass


#: Settings need a home; nothing is written there (no call log without the daemon).
UNUSED_HOME = Path(tempfile.gettempdir()) / "toolbridge-fuzz-unused"
INIT = {"jsonrpc": "2.0", "id": "init", "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "fuzz"}}}


async def run_session(messages: list[Any]) -> list[tuple[Any, Collect]]:
    core = BrokerCore(Settings(home=UNUSED_HOME), "secret")
    core.registry.register(_DeadLink(), app_name="Fuzz", instance_id=None,  # type: ignore[arg-type]
                           tools=[ToolSpec("echo", input_schema={"type": "object", "properties": {"text": {"type": "string"}}})],
                           max_concurrency=4, app_version=None)
    server = McpServer.of(core)
    notify = Collect()
    outboxes: list[tuple[Any, Collect]] = []
    cancelled: set[Any] = set()
    async with open_session(server, transport="stdio", label="fuzz", notify=notify, reinitialize=True) as session:
        for raw in messages:
            try:
                message = parse_object(raw)
            except RpcError as exc:
                check_response(json.loads(exc.encode()), exc.request_id)
                continue
            outbox = Collect()
            outboxes.append((message, outbox))
            if isinstance(message, Notification) and message.method == "notifications/cancelled":
                cancelled.add(json.dumps(message.params.get("requestId")))
            await session.handle(message, outbox)
            await trio.testing.wait_all_tasks_blocked()
        # In-process, no I/O: once every task is blocked, what is still in flight waits for
        # something that only closing the session (or a deadline) ends; closing ends it now.
        await trio.testing.wait_all_tasks_blocked()
    # The session is closed: everything in flight has ended (listen streams included).
    assert len(core.calls) == 0
    for message, outbox in outboxes:
        finals = [m for final, m in outbox.messages if final]
        if isinstance(message, Request):
            responses = [m for m in (m for _, m in outbox.messages) if "method" not in m]
            assert len(responses) <= 1, (message, outbox.messages)
            for response in responses:
                check_response(response, message.id)
                assert response.get("error", {}).get("code") != -32603, response  # an internal error is a bug
            if not responses:
                # Only a request the client cancelled may go unanswered.
                assert json.dumps(message.id) in cancelled, (message, outbox.messages)
            assert len(finals) <= 1
            for _, note in outbox.messages:
                if "method" in note:
                    assert note["method"].startswith("notifications/") and "id" not in note
        else:
            assert outbox.messages == [], (message, outbox.messages)
        assert outbox.closed >= 1
    for _, note in notify.messages:
        assert note.get("method", "").startswith("notifications/")
    return outboxes


@FUZZ
@given(messages=st.lists(near_valid(), min_size=1, max_size=6), handshake=st.booleans())
@example(messages=[{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "Fuzz__echo", "arguments": {"text": "x"},
                               "_meta": {protocol.PROTOCOL_VERSION_KEY: "2026-07-28",
                                         protocol.CLIENT_CAPABILITIES_KEY: {}}}}], handshake=False)
@example(messages=[{"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
                    "params": {"notifications": {"toolsListChanged": True},
                               "_meta": {protocol.PROTOCOL_VERSION_KEY: "2026-07-28",
                                         protocol.CLIENT_CAPABILITIES_KEY: {}}}},
                   {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}],
         handshake=False)
@example(messages=[{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "Fuzz__echo"}},
                   {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "Fuzz__echo"}}],
         handshake=True)
def test_near_valid_requests_get_one_valid_response_each(messages: list[Any], handshake: bool) -> None:
    trio.run(run_session, [INIT, *messages] if handshake else messages)


def test_the_fuzzed_tool_reaches_the_router_and_fails_cleanly() -> None:
    """The harness itself: a call to the registered tool goes through the whole pipeline."""
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "Fuzz__echo", "arguments": {"text": "x"},
                       "_meta": {protocol.PROTOCOL_VERSION_KEY: "2026-07-28", protocol.CLIENT_CAPABILITIES_KEY: {}}}}
    [(_, outbox)] = trio.run(run_session, [call])
    [(final, response)] = outbox.messages
    assert final and response["result"]["isError"] is True
    assert response["result"]["_meta"]["toolbridge/errorKind"] == "app_disconnected"
