"""app_client's hooks for relays: tools given as specs, register/registered hooks (FakeBroker)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import trio

from app_client import App, ConnectionState, ToolContext, ToolDefinitionError, define_remote_tool
from app_client.errors import RegistrationRejected
from app_client.testing import FakeBroker
from app_client.wire import AddTools, Register, Registered, RemoveTools, ToolResult, ToolSpec, ToolsUpdated

SPEC = ToolSpec("Demo__echo", "Echo", {"type": "object", "properties": {"text": {"type": "string"}}})


async def handler(parameters: dict[str, Any], ctx: ToolContext) -> Any:
    if ctx.tool == "Demo__echo":
        return {"tool": ctx.tool, "parameters": parameters, "timeout_ms": ctx.timeout_ms}
    return ToolResult(success=False, error=f"no {ctx.tool} here")


def test_define_remote_tool_keeps_the_spec() -> None:
    definition = define_remote_tool(SPEC, handler)
    assert definition.spec is SPEC and definition.is_async
    args, kwargs = definition.bind({"text": 5}, ToolContext(correlation_id=1, tool="Demo__echo"))
    assert args[0] == {"text": 5} and kwargs == {}  # not validated here: the broker did
    with pytest.raises(ToolDefinitionError):
        define_remote_tool(ToolSpec("bad\nname"), handler)


async def test_set_tool_specs_relays_calls_and_follows_changes() -> None:
    broker = FakeBroker()
    seen: list[Registered] = []

    def prepare(register: Register) -> Register:
        return msgspec.structs.replace(register, via=["me"])

    app = App("Relay", host="fake", port=1, token="t", connector=broker.connector,
              prepare_register=prepare, check_registered=seen.append)
    await app.set_tool_specs([SPEC], handler)  # not connected: the next register carries it
    with pytest.raises(ToolDefinitionError):
        await app.set_tool_specs([SPEC, SPEC], handler)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(app.run)
        with trio.fail_after(10):
            link = await broker.accept()
            register = await link.accept_registration()
            assert register.via == ["me"] and [t.name for t in register.tools] == ["Demo__echo"]
            await app.wait_connected()
            assert len(seen) == 1

            result = await link.call("Demo__echo", {"text": "hi"}, timeout_ms=5000)
            assert result.data == {"tool": "Demo__echo", "parameters": {"text": "hi"}, "timeout_ms": 5000}
            # A name not (or no longer) in the table reaches the handler too.
            missing = await link.call("Gone__tool", {})
            assert (missing.success, missing.error) == (False, "no Gone__tool here")

            changed = msgspec.structs.replace(SPEC, description="Echo, better")
            other = ToolSpec("Other__ping")

            updated = trio.Event()

            async def update() -> None:
                await app.set_tool_specs([changed, other], handler)
                updated.set()

            nursery.start_soon(update)
            removed = await link.expect(RemoveTools)
            assert removed.names == ["Demo__echo"]
            await link.send(ToolsUpdated(tool_names={}))
            added = await link.expect(AddTools)
            assert [t.name for t in added.tools] == ["Demo__echo", "Other__ping"]
            assert added.tools[0].description == "Echo, better"
            await link.send(ToolsUpdated(tool_names={}))
            await updated.wait()
            assert app.tools["Demo__echo"].spec == changed
        nursery.cancel_scope.cancel()


async def test_check_registered_can_refuse_a_broker() -> None:
    broker = FakeBroker()

    def refuse(registered: Registered) -> None:
        raise RegistrationRejected("loop_detected", "not this one")

    reconnecting = trio.Event()

    def on_state_change(state: ConnectionState) -> None:
        if state is ConnectionState.RECONNECTING:
            reconnecting.set()

    app = App("Relay", host="fake", port=1, token="t", connector=broker.connector, check_registered=refuse,
              on_state_change=on_state_change)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(app.run)
        with trio.fail_after(10):
            link = await broker.accept()
            await link.accept_registration()
            await reconnecting.wait()  # the app refused the broker and went back to dialling
            assert "loop_detected: not this one" in (app.last_error or "")
            await broker.accept()  # it tries again, with backoff
        nursery.cancel_scope.cancel()
