"""Protocol v2, section 12 (completions and log messages) in both sans-IO machines, synchronously:
the new messages, their version gate, ``complete`` as a call (ids, cancel, one answer), and what
the app-side helpers build (bounded log data, completion functions)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
import trio

from app_client.applog import LogBucket, level_of, log_message
from app_client.protocol import (
    MAX_LOG_DATA_BYTES,
    AppConnection,
    BadLine,
    BrokerConnection,
    Complete,
    CompleteResponse,
    LocalProtocolError,
    LogMessage,
    Register,
    Registered,
    RemoteProtocolError,
    ToolCancel,
    decode_message,
    encode_message,
)
from app_client.resources import Completer, complete, define_prompt, define_template


def _registered(version: int) -> Registered:
    return Registered("A-1", "i", "A", {}, 5000, protocol_version=version)


def _broker(version: int) -> BrokerConnection:
    machine = BrokerConnection()
    machine.receive_message(Register("A", protocol_version=version))
    machine.send(_registered(version))
    return machine


def _app(version: int) -> AppConnection:
    machine = AppConnection()
    machine.start(Register("A", protocol_version=2))
    assert isinstance(machine.receive_message(_registered(version)), Registered)
    return machine


def test_the_messages_round_trip_as_protocol_md_shows_them() -> None:
    lines = [
        b'{"type":"log","level":"warning","data":{"file":"a.md","error":"locked"},"logger":"sync"}',
        b'{"type":"log","level":"info","data":"Exporting page 2","correlationId":41}',
        b'{"type":"complete","correlationId":47,"argument":"path","value":"src/a","prompt":"review",'
        b'"arguments":{"focus":"bugs"},"timeoutMs":5000}',
        b'{"type":"complete","correlationId":48,"argument":"name","value":"pl","uriTemplate":"notes://pages/{name}"}',
        b'{"type":"completeResponse","correlationId":47,"values":["src/app.py"],"total":12,"hasMore":true}',
        b'{"type":"completeResponse","correlationId":48,"error":"the index is not ready"}',
        b'{"type":"register","appName":"Notes","protocolVersion":2,"completions":true}',
    ]
    for line in lines:
        message = decode_message(line)
        assert json.loads(encode_message(message)) == json.loads(line)
    log = decode_message(lines[0])
    assert isinstance(log, LogMessage) and bytes(log.data) == b'{"file":"a.md","error":"locked"}'
    assert decode_message(b'{"type":"register","appName":"A"}').completions is False  # type: ignore[union-attr]


@pytest.mark.parametrize("line", [
    b'{"type":"log","level":"verbose","data":"x"}',  # not one of MCP's levels
    b'{"type":"log","level":"info"}',  # data is required
    b'{"type":"log","level":"info","data":1,"logger":""}',
    b'{"type":"log","level":"info","data":1,"logger":"' + b"x" * 129 + b'"}',
    b'{"type":"completeResponse","correlationId":1,"values":[1,2]}',
    b'{"type":"complete","correlationId":1,"value":"x"}',  # no argument
])
def test_malformed_messages_are_invalid_message(line: bytes) -> None:
    with pytest.raises(RemoteProtocolError) as caught:
        decode_message(line)
    assert caught.value.code == "invalid_message"


def test_broker_takes_log_and_answers_only_from_a_v2_app() -> None:
    log = LogMessage("info", msgspec.Raw(b'"hi"'))
    v1 = _broker(1)
    for message in (log, CompleteResponse(3)):
        refused = v1.receive_message(message)
        assert isinstance(refused, BadLine) and refused.error.code == "unexpected_message"
        assert "protocol version 2" in refused.error.message
    with pytest.raises(LocalProtocolError):
        v1.send(Complete(3, "path"))
    v2 = _broker(2)
    assert v2.receive_message(log) is log
    v2.send(Complete(3, "path", prompt="review"))
    assert v2.owns(3)  # a completion is a call of this connection until it ends


def test_app_answers_a_completion_once_and_not_after_cancel() -> None:
    app = _app(2)
    request = Complete(7, "path", "a", prompt="review")
    assert app.receive_message(request) is request
    duplicate = app.receive_message(request)
    assert isinstance(duplicate, BadLine) and duplicate.error.code == "duplicate_correlation_id"
    app.send(CompleteResponse(7, values=["a.py"]))
    with pytest.raises(LocalProtocolError, match="is not running"):
        app.send(CompleteResponse(7))
    app.receive_message(Complete(8, "path", prompt="review"))
    app.receive_message(ToolCancel(8))
    with pytest.raises(LocalProtocolError, match="was cancelled"):
        app.send(CompleteResponse(8, values=["late"]))


def test_app_on_a_v1_broker_sends_no_log_and_takes_no_completion() -> None:
    app = _app(1)
    with pytest.raises(LocalProtocolError, match="protocol version 2"):
        app.send(LogMessage("info", msgspec.Raw(b"1")))
    refused = app.receive_message(Complete(1, "path", prompt="review"))
    assert isinstance(refused, BadLine) and refused.error.code == "unexpected_message"


# --- what app_client builds -----------------------------------------------------------------


def test_log_message_levels_and_bounds() -> None:
    with pytest.raises(ValueError, match="not one of debug, info"):
        log_message("verbose", "x")
    message = log_message("warning", {"n": 1, "when": object()}, logger="sync", correlation_id=4)
    assert message.level == "warning" and message.logger == "sync" and message.correlation_id == 4
    assert json.loads(bytes(message.data))["n"] == 1  # what JSON cannot hold became its str
    cut = log_message("info", "é" * 200_000)  # escapes count: it still fits
    assert len(bytes(cut.data)) <= MAX_LOG_DATA_BYTES and "cut: the log data was" in json.loads(bytes(cut.data))
    note = log_message("info", {"blob": "x" * 100_000})
    assert json.loads(bytes(note.data)).startswith("[log data of")
    assert log_message("info", "x", logger="").logger is None
    assert [level_of(n) for n in (50, 40, 30, 20, 10, 5)] == ["critical", "error", "warning", "info", "debug", "debug"]


async def test_log_bucket_keeps_the_brokers_rate(autojump_clock: trio.testing.MockClock) -> None:
    bucket = LogBucket(burst=3, rate=2.0, tokens=3.0)
    assert [bucket.take() for _ in range(5)] == [True, True, True, False, False]
    await trio.sleep(1)
    assert [bucket.take() for _ in range(3)] == [True, True, False]
    assert bucket.dropped == 3


async def test_completion_functions() -> None:
    limiter = trio.CapacityLimiter(1)

    def prompt(language: str, framework: str = "") -> str:
        return ""

    definition = define_prompt(prompt, complete={
        "language": ["Python", "PyTorch", "Rust"],
        "framework": lambda value, chosen: [f"{chosen.get('language', '?')}-{value}"],
    })
    fixed, by_context = definition.completers["language"], definition.completers["framework"]
    assert await complete(fixed, "py", {}, limiter) == (["Python", "PyTorch"], 2, False)
    assert by_context.with_arguments
    assert await complete(by_context, "fl", {"language": "python"}, limiter) == (["python-fl"], 1, False)

    async def many(value: str) -> list[str]:
        return [f"{value}{n}" for n in range(250)]

    values, total, more = await complete(Completer.of(many, "x"), "v", {}, limiter)
    assert (len(values), total, more) == (100, 250, True)
    shaped = Completer.of(lambda value: {"values": ["a"], "total": 9, "hasMore": True}, "x")
    assert await complete(shaped, "", {}, limiter) == (["a"], 9, True)
    with pytest.raises(TypeError, match="list of strings"):
        await complete(Completer.of(lambda value: 3, "x"), "", {}, limiter)
    with pytest.raises(ValueError, match="complete= names nope"):
        define_prompt(prompt, complete={"nope": ["x"]})
    with pytest.raises(ValueError, match="which the template"):
        define_template(lambda name: "", "notes://{name}", complete={"title": ["x"]})
    with pytest.raises(TypeError, match="list of strings or a function"):
        Completer.of("python", "language")


def test_agent_log_handler_passes_records_on_and_never_recurses() -> None:
    import logging

    from app_client import AgentLogHandler

    class FakeApp:
        def __init__(self) -> None:
            self.sent: list[tuple[str, Any, str | None]] = []

        def log(self, level: str, data: Any, logger: str | None = None) -> None:
            self.sent.append((level, data, logger))
            logging.getLogger("compl.test").error("logged while sending")  # must not loop

    app = FakeApp()
    logger = logging.getLogger("compl.test")
    handler = AgentLogHandler(app)
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("disk %s is full", "C:")
    finally:
        logger.removeHandler(handler)
    assert app.sent == [("warning", "disk C: is full", "compl.test")]
