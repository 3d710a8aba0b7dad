"""The sans-IO protocol package (``app_client.protocol``): every rule of both machines, every
error path, in plain synchronous tests (no trio, no socket), as h11 tests its state machine.

The daemon (``broker.daemon``), the app library (``app_client.session``), the fake broker and
the CLI get their rules from these machines; the end-to-end tests (test_protocol_raw.py,
test_app_client_protocol.py, ...) show the same rules over real streams.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

import app_client
import app_client.app
import app_client.errors
import app_client.wire
from app_client.protocol import (
    DEFAULT_MAX_LINE_BYTES,
    FATAL_REGISTRATION_CODES,
    LARGE_LINE,
    NEED_DATA,
    PROTOCOL_VERSION,
    AddTools,
    AdminRequest,
    AdminResponse,
    AgentConnect,
    AgentConnected,
    AgentLinkClient,
    AppConnection,
    BadLine,
    BrokerConnection,
    ConnectionClosed,
    Error,
    Ignored,
    LocalProtocolError,
    Phase,
    Ping,
    Pong,
    ProtocolError,
    Register,
    Registered,
    Rejected,
    RemoteProtocolError,
    RemoveTools,
    Replaced,
    ToolbridgeError,
    ToolCancel,
    ToolInvocation,
    ToolProgress,
    ToolResponse,
    ToolResult,
    ToolSpec,
    ToolsUpdated,
    Unexpected,
    UpdateAnswered,
    decode_message,
    decode_message_in_steps,
    decode_tools_in_steps,
    encode_message,
)

PACKAGE = Path(app_client.__file__).parent / "protocol"


def _line(message: Any) -> bytes:
    """One line (no newline) for a message or a dict."""
    if isinstance(message, dict):
        return json.dumps(message).encode()
    return encode_message(message)[:-1]


def _registered(max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Registered:
    return Registered(app_id="A-1", instance_id="i", app_label="A", tool_names={"t": "A__t"},
                      heartbeat_interval_ms=0, max_line_bytes=max_line_bytes)


def _broker_registered(**options: bool) -> BrokerConnection:
    broker = BrokerConnection(**options)
    assert broker.receive_line(_line(Register(app_name="A", token="t"))) == Register(app_name="A", token="t")
    broker.send(_registered())
    assert broker.phase is Phase.REGISTERED
    return broker


def _app_registered(max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> AppConnection:
    app = AppConnection()
    app.start(Register(app_name="A", token="t"))
    assert isinstance(app.receive_line(_line(_registered(max_line_bytes))), Registered)
    assert app.phase is Phase.REGISTERED
    return app


# --- the package ---------------------------------------------------------------------------


def test_the_protocol_package_imports_msgspec_and_the_standard_library_only() -> None:
    imported: set[str] = set()
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    assert "trio" not in imported
    assert imported <= {"__future__", "msgspec", "re", "typing", "enum", "dataclasses", "collections", "mmap", "functools"}


def test_the_errors_are_the_same_classes_app_client_exports() -> None:
    for name in ("ToolbridgeError", "ProtocolError", "LocalProtocolError", "RemoteProtocolError", "ConnectionClosed"):
        assert getattr(app_client.errors, name) is getattr(app_client.protocol, name)
        assert getattr(app_client, name) is getattr(app_client.protocol, name)
    assert issubclass(LocalProtocolError, ProtocolError) and issubclass(RemoteProtocolError, ProtocolError)
    assert issubclass(ProtocolError, ToolbridgeError) and issubclass(ConnectionClosed, ToolbridgeError)
    with pytest.raises(app_client.ToolbridgeError):
        decode_message(b"{")


def test_wire_is_a_shim_over_the_protocol() -> None:
    for name in app_client.wire.__all__:
        assert getattr(app_client.wire, name) is getattr(app_client.protocol, name)
    assert app_client.app.FATAL_REGISTRATION_CODES is FATAL_REGISTRATION_CODES
    assert {"invalid_tool", "line_too_long", "unsupported_version"} <= FATAL_REGISTRATION_CODES


# --- decoding in steps -----------------------------------------------------------------------


def _big_add_tools() -> bytes:
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(4000)}}
    tools = [{"name": f"t{i}", "inputSchema": schema} for i in range(12)]
    return _line({"type": "addTools", "tools": tools})


def test_a_large_line_of_tools_decodes_in_steps_to_the_same_message() -> None:
    line = _big_add_tools()
    assert len(line) >= LARGE_LINE
    steps = decode_message_in_steps(line)
    pauses = 0
    with pytest.raises(StopIteration) as done:
        while True:
            next(steps)
            pauses += 1
    assert done.value.value == decode_message(line)
    assert pauses >= 2


def test_a_small_line_decodes_without_a_pause_and_errors_are_decode_messages() -> None:
    with pytest.raises(StopIteration) as done:
        next(decode_message_in_steps(_line(Ping(id=3))))
    assert done.value.value == Ping(id=3)
    with pytest.raises(RemoteProtocolError) as error:
        next(decode_message_in_steps(b'{"type": "nope"}'))
    assert error.value.code == "unknown_type"


def test_decode_tools_in_steps_leaves_other_lines_to_decode_message() -> None:
    for line in (b'{"type": "ping"}', b"[1, 2]", b"{not json"):
        with pytest.raises(StopIteration) as done:
            next(decode_tools_in_steps(line))
        assert done.value.value is None


def test_a_bad_tool_in_a_large_line_is_worded_like_decode_message() -> None:
    line = _big_add_tools()[:-2] + b', {"name": 7}]}'
    with pytest.raises(RemoteProtocolError) as expected:
        decode_message(line)
    with pytest.raises(RemoteProtocolError) as got:
        for _ in decode_message_in_steps(line):
            pass
    assert (got.value.code, got.value.message) == (expected.value.code, expected.value.message)


# --- the broker's side -------------------------------------------------------------------------


def test_broker_bytes_in_events_out() -> None:
    broker = BrokerConnection()
    assert broker.next_event() is NEED_DATA
    data = encode_message(Register(app_name="A", token="t"))
    broker.receive_data(data[:10])
    assert broker.next_event() is NEED_DATA
    broker.receive_data(data[10:])
    assert broker.next_event() == Register(app_name="A", token="t")
    assert broker.phase is Phase.REGISTERING
    assert broker.next_event() is NEED_DATA


@pytest.mark.parametrize(
    ("line", "code"),
    [(b"{", "invalid_json"), (b"[1]", "not_an_object"), (b'{"type": "x"}', "unknown_type"),
     (b'{"type": "register"}', "invalid_message"), (b'{"type": "\xff"}', "invalid_utf8")],
)
def test_a_bad_first_line_is_fatal_and_says_register_comes_first(line: bytes, code: str) -> None:
    broker = BrokerConnection()
    with pytest.raises(RemoteProtocolError) as error:
        broker.receive_line(line)
    assert error.value.code == code
    assert error.value.message.endswith("; the first message must be register")
    # The owner sends it as a fatal error; that closes the machine.
    broker.send(Error(error.value.code, error.value.message, fatal=True))
    assert broker.phase is Phase.CLOSED
    with pytest.raises(LocalProtocolError):
        broker.send(Ping(id=1))
    with pytest.raises(LocalProtocolError):
        broker.receive_line(_line(Ping(id=1)))


def test_a_first_line_over_the_limit_is_fatal() -> None:
    broker = BrokerConnection(max_line_bytes=100)
    broker.receive_data(b"x" * 200)
    with pytest.raises(RemoteProtocolError) as error:
        broker.next_event()
    assert error.value.code == "line_too_long"
    assert error.value.message.endswith("it was discarded; the first message must be register")


def test_a_first_message_other_than_register_agent_or_admin_is_not_registered() -> None:
    with pytest.raises(RemoteProtocolError) as error:
        BrokerConnection().receive_line(_line(ToolResponse(correlation_id=1, result=ToolResult())))
    assert error.value.code == "not_registered"
    assert error.value.message == "the first message must be register, not ToolResponse"
    assert error.value.correlation_id is None


def test_agent_connect_turns_the_connection_into_raw_lines() -> None:
    broker = BrokerConnection(max_line_bytes=70)
    with pytest.raises(LocalProtocolError):
        broker.next_line()  # not before agentConnect
    broker.receive_data(encode_message(AgentConnect(token="t", discovery=True)) + b'{"jsonrpc": "2.0"}\n')
    assert broker.next_event() == AgentConnect(token="t", discovery=True)
    assert broker.phase is Phase.AGENT
    assert broker.next_line() == b'{"jsonrpc": "2.0"}'
    assert broker.next_line() is NEED_DATA
    broker.receive_data(b"y" * 80 + b"\n")
    bad = broker.next_line()
    assert isinstance(bad, BadLine) and bad.error.code == "line_too_long"
    assert broker.send(AgentConnected()) == b'{"type":"agentConnected"}\n'
    with pytest.raises(LocalProtocolError):
        broker.send(ToolInvocation(correlation_id=1, tool="t"))


def test_admin_gets_one_answer() -> None:
    broker = BrokerConnection()
    assert broker.receive_line(_line(AdminRequest(token="t", command="status"))) == AdminRequest(token="t", command="status")
    assert broker.phase is Phase.ADMIN
    with pytest.raises(LocalProtocolError):
        broker.send(Registered(app_id="a", instance_id="i", app_label="A", tool_names={}, heartbeat_interval_ms=0))
    assert json.loads(broker.send(AdminResponse(ok=True, result=1))) == {"type": "adminResult", "ok": True, "result": 1}


def test_nothing_but_registered_or_an_error_goes_out_before_registered() -> None:
    broker = BrokerConnection()
    with pytest.raises(LocalProtocolError) as error:
        broker.send(Ping(id=1))  # before the first message: only a (fatal) error
    assert error.value.code == "unexpected_message"
    broker.receive_line(_line(Register(app_name="A")))
    for early in (ToolInvocation(correlation_id=1, tool="t"), Ping(id=1), ToolsUpdated(tool_names={}), AgentConnected()):
        with pytest.raises(LocalProtocolError):
            broker.send(early)
    assert broker.phase is Phase.REGISTERING
    # An app answers the broker's pings before `registered`; nothing else is read then.
    assert broker.receive_line(_line(Pong(id=1))) == Pong(id=1)
    early_call = broker.receive_line(_line(ToolResponse(correlation_id=1, result=ToolResult())))
    assert isinstance(early_call, BadLine) and early_call.error.code == "unexpected_message"
    broker.send(_registered())
    assert broker.phase is Phase.REGISTERED


def test_a_refused_registration_closes() -> None:
    broker = BrokerConnection()
    broker.receive_line(_line(Register(app_name="A")))
    broker.send(Error("unauthorized", "wrong token", fatal=True))
    assert broker.phase is Phase.CLOSED


def test_a_registered_app_may_send_its_messages() -> None:
    broker = _broker_registered()
    for message in (
        ToolResponse(correlation_id=1, result=ToolResult(data=1)),
        ToolProgress(correlation_id=1, progress=0.5),
        AddTools(tools=[ToolSpec(name="u")]),
        RemoveTools(names=["u"]),
        Ping(id=2),
        Pong(id=2),
        Error("oops", "it broke", correlation_id=1),
    ):
        assert broker.receive_line(_line(message)) == message
        assert broker.receive_message(message) == message


def test_a_second_register_is_already_registered() -> None:
    bad = _broker_registered().receive_line(_line(Register(app_name="A")))
    assert isinstance(bad, BadLine)
    assert bad.reply() == Error("already_registered", "this connection is already registered; reconnect to register again")


@pytest.mark.parametrize(
    ("message", "name"),
    [(ToolInvocation(correlation_id=5, tool="t"), "ToolInvocation"), (Registered(app_id="a", instance_id="i",
      app_label="A", tool_names={}, heartbeat_interval_ms=0), "Registered"), (ToolCancel(correlation_id=5), "ToolCancel"),
     (AgentConnect(), "AgentConnect"), (AdminRequest(), "AdminRequest"), (ToolsUpdated(tool_names={}), "ToolsUpdated")],
)
def test_what_an_app_never_sends_is_an_unexpected_message(message: Any, name: str) -> None:
    bad = _broker_registered().receive_line(_line(message))
    assert isinstance(bad, BadLine)
    # No correlation id in the answer, even when the message carries one: it fails no call.
    assert bad.reply() == Error("unexpected_message", f"{name} messages are not accepted from an app")


def test_a_bad_line_once_registered_goes_on_and_names_its_call() -> None:
    broker = _broker_registered()
    bad = broker.receive_line(b'{"type": "toolResponse", "correlationId": 42, "result": 7}')
    assert isinstance(bad, BadLine)
    assert bad.error.code == "invalid_message" and bad.error.correlation_id == 42
    assert bad.reply().correlation_id == 42
    assert broker.phase is Phase.REGISTERED
    broker.receive_data(b"x" * (DEFAULT_MAX_LINE_BYTES + 10) + b"\n" + encode_message(Ping(id=1)))
    too_long = broker.next_event()
    assert isinstance(too_long, BadLine) and too_long.error.code == "line_too_long"
    assert broker.next_event() == Ping(id=1)


def test_a_connection_owns_the_calls_sent_over_it_until_they_end() -> None:
    broker, other = _broker_registered(), _broker_registered()
    broker.send(ToolInvocation(correlation_id=1, tool="t"))
    broker.send(ToolInvocation(correlation_id=2, tool="t"))
    other.send(ToolInvocation(correlation_id=3, tool="t"))
    assert broker.owns(1) and broker.owns(2) and not broker.owns(3) and other.owns(3)
    assert broker.calls_in_flight == 2
    broker.send(ToolCancel(correlation_id=1, reason="timeout"))  # a cancel ends the call
    assert not broker.owns(1)
    broker.call_ended(2)  # answered
    broker.call_ended(99)  # unknown: nothing happens
    assert not broker.owns(2) and broker.calls_in_flight == 0


def test_a_broker_with_its_own_call_records_keeps_no_second_table() -> None:
    broker = _broker_registered(track_calls=False)
    broker.send(ToolInvocation(correlation_id=1, tool="t"))
    assert broker.calls_in_flight == 0  # nothing remembered: the caller's records say who owns 1
    with pytest.raises(RuntimeError, match="track_calls"):
        broker.owns(1)


def test_a_replaced_link_sends_nothing_after_its_fatal_error() -> None:
    broker = _broker_registered()
    broker.send(Error("replaced", "a new connection registered this instance", fatal=True))
    assert broker.phase is Phase.CLOSED
    with pytest.raises(LocalProtocolError):
        broker.send(ToolInvocation(correlation_id=1, tool="t"))
    assert not broker.owns(1)


def test_what_the_broker_may_not_send_to_an_app() -> None:
    broker = _broker_registered()
    for message in (ToolResponse(correlation_id=1, result=ToolResult()), Register(app_name="A"),
                    AddTools(tools=[]), AdminResponse(ok=True), _registered()):
        with pytest.raises(LocalProtocolError) as error:
            broker.send(message)
        assert error.value.code == "unexpected_message"


def test_a_message_that_cannot_be_encoded_is_a_local_error_and_changes_nothing() -> None:
    broker = _broker_registered()
    with pytest.raises(LocalProtocolError) as error:
        broker.send(ToolInvocation(correlation_id=1, tool="t", parameters={"x": object()}))
    assert error.value.code == "invalid_message"
    assert not broker.owns(1)


def test_the_protocol_version_check() -> None:
    BrokerConnection.check_version(Register(app_name="A"))
    with pytest.raises(RemoteProtocolError) as error:
        BrokerConnection.check_version(Register(app_name="A", protocol_version=0))
    assert (error.value.code, error.value.message) == ("unsupported_version", f"protocolVersion must be 1..{PROTOCOL_VERSION}")


# --- the app's side ---------------------------------------------------------------------------


def test_an_app_registers_first() -> None:
    app = AppConnection()
    with pytest.raises(LocalProtocolError):
        app.send(Pong(id=1))  # nothing before register
    register = Register(app_name="A", token="t")
    assert app.start(register) == encode_message(register)
    assert app.phase is Phase.REGISTERING
    with pytest.raises(LocalProtocolError):
        app.start(register)  # once


def test_before_registered_only_pings_are_answered() -> None:
    app = AppConnection()
    app.start(Register(app_name="A"))
    assert app.receive_line(_line(Ping(id=4))) == Ping(id=4)
    assert app.send(Pong(id=4)) == encode_message(Pong(id=4))
    for early in (ToolResponse(correlation_id=1, result=ToolResult()), AddTools(tools=[]), Ping(id=1)):
        with pytest.raises(LocalProtocolError):
            app.send(early)
    ignored = app.receive_line(_line(ToolInvocation(correlation_id=1, tool="t")))
    assert ignored == Ignored(ToolInvocation(correlation_id=1, tool="t"))
    assert app.active_calls == 0


def test_a_bad_line_before_registered_raises() -> None:
    app = AppConnection()
    app.start(Register(app_name="A"))
    with pytest.raises(RemoteProtocolError) as error:
        app.receive_line(b"HTTP/1.1 400 Bad Request")
    assert error.value.code == "invalid_json"


def test_a_refused_registration_is_rejected() -> None:
    app = AppConnection()
    app.start(Register(app_name="A"))
    refusal = Error("unauthorized", "wrong token", fatal=True)
    assert app.receive_line(_line(refusal)) == Rejected(refusal)
    assert app.phase is Phase.CLOSED
    assert isinstance(app.receive_line(_line(Ping(id=1))), Ignored)


def test_registered_sets_the_line_limit_for_what_the_app_sends() -> None:
    app = _app_registered(max_line_bytes=200)
    assert app.peer_max_line_bytes == 200
    app.send(AddTools(tools=[ToolSpec(name="short")]))
    big = AddTools(tools=[ToolSpec(name="x", description="d" * 300)])
    with pytest.raises(LocalProtocolError) as error:
        app.send(big)
    size = len(encode_message(big)) - 1
    assert (error.value.code, error.value.message) == (
        "line_too_long", f"the message is {size} bytes, over the broker's limit of 200 bytes")
    assert _app_registered(max_line_bytes=0).peer_max_line_bytes == DEFAULT_MAX_LINE_BYTES


def test_a_call_is_answered_once() -> None:
    app = _app_registered()
    invocation = ToolInvocation(correlation_id=7, tool="t")
    assert app.receive_line(_line(invocation)) == invocation
    assert app.is_running(7) and app.active_calls == 1
    app.send(ToolProgress(correlation_id=7, progress=1))
    app.send(ToolResponse(correlation_id=7, result=ToolResult()))
    assert not app.is_running(7) and app.active_calls == 0
    with pytest.raises(LocalProtocolError) as error:
        app.send(ToolResponse(correlation_id=7, result=ToolResult()))
    assert error.value.code == "call_not_running"
    with pytest.raises(LocalProtocolError):
        app.send(ToolProgress(correlation_id=8, progress=1))


def test_a_duplicate_correlation_id_is_refused_while_the_call_runs() -> None:
    app = _app_registered()
    app.receive_line(_line(ToolInvocation(correlation_id=7, tool="t")))
    bad = app.receive_line(_line(ToolInvocation(correlation_id=7, tool="u")))
    assert isinstance(bad, BadLine)
    assert bad.reply() == Error("duplicate_correlation_id", "call 7 is already running")


def test_no_response_after_tool_cancel() -> None:
    app = _app_registered()
    app.receive_line(_line(ToolInvocation(correlation_id=7, tool="t")))
    cancel = ToolCancel(correlation_id=7, reason="timeout")
    assert app.receive_line(_line(cancel)) == cancel
    assert not app.is_running(7)
    with pytest.raises(LocalProtocolError) as error:
        app.send(ToolResponse(correlation_id=7, result=ToolResult()))
    assert error.value.code == "call_not_running" and "was cancelled" in error.value.message
    app.send(ToolProgress(correlation_id=7, progress=1))  # still unwinding: progress may go
    assert app.receive_line(_line(cancel)) == Ignored(cancel)  # cancelled already
    # A duplicate while it unwinds is still a duplicate; once it ended, the id is free.
    assert isinstance(app.receive_line(_line(ToolInvocation(correlation_id=7, tool="t"))), BadLine)
    app.call_ended(7)
    assert app.active_calls == 0
    assert isinstance(app.receive_line(_line(ToolInvocation(correlation_id=7, tool="t"))), ToolInvocation)


def test_a_cancel_for_a_call_not_running_is_ignored() -> None:
    cancel = ToolCancel(correlation_id=9)
    assert _app_registered().receive_line(_line(cancel)) == Ignored(cancel)


def test_tool_updates_are_answered_first_in_first_out() -> None:
    app = _app_registered()
    app.send(AddTools(tools=[ToolSpec(name="u")]))
    app.send(RemoveTools(names=["t"]))
    app.send(AddTools(tools=[ToolSpec(name="v")]))
    assert app.receive_line(_line(ToolsUpdated(tool_names={"u": "A__u"}))) == UpdateAnswered(tool_names={"u": "A__u"})
    # An error about a call is not an update's answer.
    call_error = Error("unknown_correlation_id", "no call 3 is pending", correlation_id=3)
    assert app.receive_line(_line(call_error)) == call_error
    refused = Error("too_many_tools", "limit is 2")
    assert app.receive_line(_line(refused)) == UpdateAnswered(error=refused)
    app.update_withdrawn()  # the third never went out
    app.update_withdrawn()  # nothing pending: no effect
    refresh = ToolsUpdated(tool_names={})
    assert app.receive_line(_line(refresh)) == refresh  # unsolicited: a refresh of the names
    assert app.receive_line(_line(Error("x", "y"))) == Error("x", "y")


def test_replaced_ends_the_link() -> None:
    app = _app_registered()
    app.send(AddTools(tools=[]))
    replaced = Error("replaced", "a new connection registered this instance", fatal=True)
    assert app.receive_line(_line(replaced)) == Replaced(replaced)
    assert app.phase is Phase.CLOSED
    with pytest.raises(LocalProtocolError):
        app.send(Pong(id=1))
    assert isinstance(app.receive_line(_line(Ping(id=1))), Ignored)


def test_an_app_receives_pings_pongs_and_errors() -> None:
    app = _app_registered()
    for message in (Ping(id=1), Pong(id=1), Error("shutting_down", "bye", fatal=True)):
        assert app.receive_line(_line(message)) == message
    again = _registered()
    assert app.receive_line(_line(again)) == Ignored(again)


@pytest.mark.parametrize(
    "message",
    [Register(app_name="x"), ToolResponse(correlation_id=1, result=ToolResult()), ToolProgress(correlation_id=1, progress=1),
     AddTools(tools=[]), RemoveTools(names=[]), AgentConnect(), AgentConnected(), AdminRequest(), AdminResponse(ok=True)],
)
def test_what_an_app_never_receives_is_an_unexpected_message(message: Any) -> None:
    bad = _app_registered().receive_line(_line(message))
    assert isinstance(bad, BadLine)
    tag = msgspec.json.decode(_line(message))["type"]
    assert bad.reply() == Error("unexpected_message", f"an app does not accept {tag!r} messages")


def test_what_an_app_may_not_send() -> None:
    app = _app_registered()
    for message in (ToolInvocation(correlation_id=1, tool="t"), ToolCancel(correlation_id=1), _registered(),
                    Register(app_name="A"), AgentConnect(), ToolsUpdated(tool_names={})):
        with pytest.raises(LocalProtocolError) as error:
            app.send(message)
        assert error.value.code == "unexpected_message"


def test_an_app_bad_line_once_registered_goes_on() -> None:
    app = AppConnection(max_line_bytes=150)
    app.start(Register(app_name="A"))
    app.receive_data(encode_message(_registered()))
    assert isinstance(app.next_event(), Registered)
    assert app.next_event() is NEED_DATA
    app.receive_data(b'{"type": "toolInvocation", "correlationId": 5}\n' + b"z" * 200 + b"\n" + encode_message(Ping(id=2)))
    bad = app.next_event()
    assert isinstance(bad, BadLine) and bad.error.code == "invalid_message" and bad.reply().correlation_id == 5
    too_long = app.next_event()
    assert isinstance(too_long, BadLine) and too_long.error.code == "line_too_long"
    assert app.next_event() == Ping(id=2)


# --- the agent link's side ----------------------------------------------------------------------


def test_agent_connect_and_its_reply() -> None:
    client = AgentLinkClient()
    with pytest.raises(LocalProtocolError):
        client.receive_line(_line(AgentConnected()))  # nothing asked yet
    assert decode_message(client.connect("tok", discovery=True)[:-1]) == AgentConnect(token="tok", discovery=True)
    with pytest.raises(LocalProtocolError):
        client.connect("tok")  # once
    assert client.receive_line(_line(AgentConnected())) == AgentConnected()
    assert client.connected
    with pytest.raises(LocalProtocolError):
        client.receive_line(_line(AgentConnected()))  # MCP lines from now on, not ours


def test_agent_connect_refused_unexpected_or_garbled() -> None:
    refused = AgentLinkClient()
    refused.connect("bad")
    error = Error("unauthorized", "wrong token", fatal=True)
    assert refused.receive_line(_line(error)) == Rejected(error)
    assert not refused.connected and refused.phase is Phase.CLOSED
    odd = AgentLinkClient()
    odd.connect("t")
    assert odd.receive_line(_line(Pong(id=1))) == Unexpected(Pong(id=1))
    garbled = AgentLinkClient()
    garbled.connect("t")
    with pytest.raises(RemoteProtocolError):
        garbled.receive_line(b"<html>")


def test_admin_and_its_reply() -> None:
    client = AgentLinkClient()
    line = client.admin("tok", "status")
    assert decode_message(line[:-1]) == AdminRequest(token="tok", command="status", args={})
    answer = AdminResponse(ok=True, result={"pid": 1})
    assert client.receive_line(_line(answer)) == answer
    wrong = AgentLinkClient()
    wrong.admin("tok", "status", {"a": 1})
    assert wrong.receive_line(_line(AgentConnected())) == Unexpected(AgentConnected())
