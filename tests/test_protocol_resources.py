"""Protocol v2 (resources) in both sans-IO machines, synchronously: the new messages, their
version gate (a v1 connection never sends nor accepts them), reads as calls (ids, cancel,
one answer), and the resources' own bounds (in the style of test_protocol_state.py)."""

from __future__ import annotations

import json

import pytest

from app_client.protocol import (
    MAX_RESOURCES,
    AppConnection,
    BadLine,
    BrokerConnection,
    Ignored,
    LocalProtocolError,
    Register,
    Registered,
    RemoteProtocolError,
    ResourceRead,
    ResourceResponse,
    ResourceSpec,
    ResourceTemplateSpec,
    ResourceUpdated,
    SetResources,
    ToolCancel,
    decode_message,
    encode_message,
)


def _registered(version: int | None) -> Registered:
    return Registered("A-1", "i", "A", {}, 5000, protocol_version=version)


def _broker(version: int) -> BrokerConnection:
    machine = BrokerConnection()
    machine.receive_message(Register("A", protocol_version=version))
    machine.send(_registered(min(version, 2)))
    return machine


def _app(version: int | None) -> AppConnection:
    machine = AppConnection()
    machine.start(Register("A", protocol_version=2))
    assert isinstance(machine.receive_message(_registered(version)), Registered)
    return machine


def test_register_carries_resources_and_round_trips() -> None:
    register = Register(
        "Notes", protocol_version=2,
        resources=[ResourceSpec("notes://readme", "readme", title="Read me", mime_type="text/plain", size=12,
                                annotations={"audience": ["user"]})],
        resource_templates=[ResourceTemplateSpec("file:///docs/{name}", "doc")],
    )
    line = encode_message(register)
    wire = json.loads(line)
    assert wire["resources"][0] == {"uri": "notes://readme", "name": "readme", "title": "Read me",
                                    "mimeType": "text/plain", "size": 12, "annotations": {"audience": ["user"]}}
    assert wire["resourceTemplates"] == [{"uriTemplate": "file:///docs/{name}", "name": "doc"}]
    assert decode_message(line[:-1]) == register
    # A v1 register (no fields) decodes with none.
    plain = decode_message(b'{"type":"register","appName":"A"}')
    assert isinstance(plain, Register) and plain.resources == [] and plain.protocol_version == 1


@pytest.mark.parametrize("line", [
    b'{"type":"register","appName":"A","resources":[{"uri":"","name":"x"}]}',
    b'{"type":"register","appName":"A","resources":[{"uri":"a://b"}]}',
    b'{"type":"setResources","resourceTemplates":[{"uriTemplate":"a://{x}","name":""}]}',
    b'{"type":"resourceResponse","contents":[]}',
])
def test_malformed_resource_messages_are_invalid_message(line: bytes) -> None:
    with pytest.raises(RemoteProtocolError) as caught:
        decode_message(line)
    assert caught.value.code == "invalid_message"


def test_too_many_resources_is_invalid_message() -> None:
    resources = [{"uri": f"a://{n}", "name": "n"} for n in range(MAX_RESOURCES + 1)]
    with pytest.raises(RemoteProtocolError) as caught:
        decode_message(json.dumps({"type": "setResources", "resources": resources}).encode())
    assert caught.value.code == "invalid_message"


def test_broker_accepts_v2_messages_only_from_a_v2_app() -> None:
    v2 = _broker(2)
    for message in (SetResources(), ResourceUpdated("a://b")):
        assert v2.receive_message(message) == message
    v1 = _broker(1)
    for message in (SetResources(), ResourceUpdated("a://b"), ResourceResponse(1)):
        event = v1.receive_message(message)
        assert isinstance(event, BadLine) and event.error.code == "unexpected_message"
        assert "protocol version 2" in event.error.message


def test_broker_never_sends_a_read_to_a_v1_app() -> None:
    with pytest.raises(LocalProtocolError):
        _broker(1).send(ResourceRead(1, "a://b"))
    v2 = _broker(2)
    v2.send(ResourceRead(7, "a://b", timeout_ms=1000))
    assert v2.owns(7)  # a read is a call of this connection until it ends
    v2.send(ToolCancel(7))
    assert not v2.owns(7)


def test_app_answers_a_read_once_and_not_after_cancel() -> None:
    app = _app(2)
    assert isinstance(app.receive_message(ResourceRead(3, "a://b")), ResourceRead)
    duplicate = app.receive_message(ResourceRead(3, "a://b"))
    assert isinstance(duplicate, BadLine) and duplicate.error.code == "duplicate_correlation_id"
    line = app.send(ResourceResponse(3, contents=[{"uri": "a://b", "text": "x"}]))
    assert json.loads(line)["contents"] == [{"uri": "a://b", "text": "x"}]
    with pytest.raises(LocalProtocolError, match="not running"):
        app.send(ResourceResponse(3))
    assert isinstance(app.receive_message(ResourceRead(4, "a://b")), ResourceRead)
    assert isinstance(app.receive_message(ToolCancel(4)), ToolCancel)
    with pytest.raises(LocalProtocolError, match="cancelled"):
        app.send(ResourceResponse(4))
    assert isinstance(app.receive_message(ToolCancel(4)), Ignored)


def test_app_on_a_v1_broker_sends_and_accepts_no_v2_message() -> None:
    for version in (1, None):  # None: a broker from before negotiation
        app = _app(version)
        assert app.version == 1
        with pytest.raises(LocalProtocolError, match="protocol version 2"):
            app.send(SetResources())
        with pytest.raises(LocalProtocolError, match="protocol version 2"):
            app.send(ResourceUpdated("a://b"))
        event = app.receive_message(ResourceRead(1, "a://b"))
        assert isinstance(event, BadLine) and event.error.code == "unexpected_message"
    assert _app(2).send(ResourceUpdated("a://b")).startswith(b'{"type":"resourceUpdated"')


def test_prompt_messages_are_v2_calls() -> None:
    from app_client.protocol import PromptArgument, PromptGet, PromptResponse, PromptSpec, SetPrompts

    register = Register("A", protocol_version=2, prompts=[PromptSpec("review", arguments=[PromptArgument("path", required=True)])])
    wire = json.loads(encode_message(register))
    assert wire["prompts"] == [{"name": "review", "arguments": [{"name": "path", "required": True}]}]
    v1 = _broker(1)
    with pytest.raises(LocalProtocolError):
        v1.send(PromptGet(1, "review"))
    event = v1.receive_message(SetPrompts())
    assert isinstance(event, BadLine) and event.error.code == "unexpected_message"
    app = _app(2)
    assert isinstance(app.receive_message(PromptGet(5, "review", {"path": "x"})), PromptGet)
    app.send(PromptResponse(5, messages=[{"role": "user", "content": {"type": "text", "text": "hi"}}]))
    with pytest.raises(LocalProtocolError, match="not running"):
        app.send(PromptResponse(5))
    with pytest.raises(LocalProtocolError, match="protocol version 2"):
        _app(1).send(SetPrompts())
