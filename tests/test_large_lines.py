"""Large ``register`` / ``addTools`` lines are decoded in steps, with the same result and errors.

A line of megabytes of schemas decoded in one go kept the daemon's loop busy ~80 ms (10 MB);
``Connection.receive_message`` decodes such a line a tool at a time with checkpoints between.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing

from app_client.errors import RemoteProtocolError
from app_client.wire import decode_message
from broker.daemon.connection import Connection


def _schema(index: int) -> dict[str, Any]:
    return {"type": "object", "properties": {f"p{index}_{i}": {"type": "string", "minLength": 1} for i in range(3000)}}


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode()


async def _receive(line: bytes) -> tuple[Any, int]:
    """The message ``Connection.receive_message`` makes of ``line``, and how many times another
    task got to run while it was decoded."""
    ours, theirs = trio.testing.memory_stream_pair()
    conn = Connection(ours, max_line_bytes=64 * 1024 * 1024, outbound_queue=4, write_timeout=10)
    ran = 0
    decoded: list[Any] = []

    async def other_task() -> None:
        nonlocal ran
        while not decoded:
            ran += 1
            await trio.lowlevel.checkpoint()

    # The whole line is in the buffer already: only decoding can give other tasks a turn.
    conn._framer.receive_data(line + b"\n")
    async with trio.open_nursery() as nursery:

        async def receive() -> None:
            try:
                decoded.append(await conn.receive_message())
            except RemoteProtocolError as exc:
                decoded.append(exc)

        nursery.start_soon(receive)
        nursery.start_soon(other_task)
    return decoded[0], ran


@pytest.mark.parametrize("kind", ["register", "addTools"])
async def test_a_large_line_of_tools_decodes_in_steps_to_the_same_message(kind: str) -> None:
    tools = [{"name": f"t{i}", "description": "d", "inputSchema": _schema(i), "timeoutMs": 500} for i in range(20)]
    fields = {"appName": "Big", "token": "t", "instanceId": "x", "maxConcurrency": 3} if kind == "register" else {}
    line = _line({"type": kind, **fields, "tools": tools, "someFutureField": [1, 2]})
    assert len(line) > 2 * 1024 * 1024
    message, ran = await _receive(line)
    assert message == decode_message(line)
    assert ran >= 3  # other tasks ran between the steps


async def test_errors_in_a_large_line_are_the_same_as_for_any_line() -> None:
    good = [{"name": f"t{i}", "inputSchema": _schema(i)} for i in range(10)]
    cases = [
        {"type": "addTools", "tools": [*good, {"name": 7}]},  # a tool of the wrong shape
        {"type": "register", "tools": good},  # no appName
        {"type": "register", "appName": "A", "tools": good, "maxConcurrency": "many"},
    ]
    for case in cases:
        line = _line(case)
        with pytest.raises(RemoteProtocolError) as expected:
            decode_message(line)
        got, _ = await _receive(line)
        assert isinstance(got, RemoteProtocolError)
        assert (got.code, got.message) == (expected.value.code, expected.value.message)
    broken = _line({"type": "addTools", "tools": good})[:-5]  # not JSON
    got, _ = await _receive(broken)
    assert isinstance(got, RemoteProtocolError) and got.code == "invalid_json"
