"""The status page's tool inspector: what a logged-in browser may call, and the calls themselves.

Theory of operation
-------------------
``GET /api/inspect/catalog`` lists the tools the page's login may call (a login made with a
scoped token sees only the apps its ``agent:<label>`` scopes name), each with its app label,
description and input schema, for the page to build a form from.

``POST /api/inspect/call`` with ``{"name": <agent-facing name>, "arguments": {...}}`` runs one
call through the router's whole pipeline (:meth:`Router.start_call`: validation, guards,
admission, audit, the call log) as the agent ``status-page``, exactly as an agent's call runs.
The answer streams as NDJSON, one object a line: ``{"id": N}`` once the call has its
correlation id (the page's Cancel posts to ``/api/calls/N/cancel``, as the in-flight table's
button does), ``{"progress": p, "total": t, "message": m}`` for each progress report, and last
``{"result": <CallToolResult>}``: the very result an MCP agent gets (``results.call_result``).
If the browser goes away the call is cancelled. The request handler owns the call: a pending
call is a record in the router, the handler waits on a :class:`trio.Event` and a memory channel
of at most :data:`_PROGRESS_BUFFER` reports (older reports are dropped, only the newest matters).

Access is the status page's: the session cookie, the Origin and the CSRF token (checked by
``StatusPages``), plus the session's grant for the tool's app.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any, Final

import attrs
import msgspec
import structlog
import trio

from ..config.tokens import Grant
from ..core.calls import Call
from ..core.outcome import CallerInfo, CallOutcome, OutcomeKind
from ..core.registry import RegisteredTool
from ..core.router import Router
from .jsonrpc import RpcError
from .results import call_result, error_result

log = structlog.get_logger("toolbridge.inspector")

__all__ = ["AGENT", "MAX_CALL_BODY", "catalog", "run_call", "parse_call"]

#: The agent name the call log and the audit show for calls made from the page.
AGENT: Final = "status-page"
#: The largest call request (name and arguments as JSON) the page may send.
MAX_CALL_BODY: Final = 1024 * 1024
_PROGRESS_BUFFER: Final = 16
_encoder = msgspec.json.Encoder()

Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]


def may_call(grant: Grant, tool: RegisteredTool) -> bool:
    """Whether a page logged in with ``grant`` may see and call ``tool``."""
    return grant.allows_agent_to(tool.instance.label)


def catalog(tools: list[RegisteredTool], grant: Grant) -> dict[str, Any]:
    """The tools ``grant`` may call, as the inspector shows them."""
    return {"tools": [
        {"name": tool.agent_name, "app": tool.instance.label, "tool": tool.name, "title": tool.spec.title,
         "description": tool.spec.description, "inputSchema": tool.spec.input_schema}
        for tool in sorted(tools, key=lambda t: t.agent_name) if may_call(grant, tool)
    ]}


def parse_call(body: bytes | None) -> tuple[str, dict[str, Any]] | str:
    """``(name, arguments)`` from a call request's body, or what is wrong with it."""
    if body is None:
        return f"the request is missing or over {MAX_CALL_BODY} bytes"
    try:
        request = json.loads(body)
    except ValueError:
        return "the request is not JSON"
    if not isinstance(request, dict) or not isinstance(request.get("name"), str):
        return 'the request needs {"name": <tool>, "arguments": {...}}'
    arguments = request.get("arguments", {})
    if not isinstance(arguments, dict):
        return "arguments must be a JSON object"
    return request["name"], arguments


@attrs.define(eq=False)
class _PageCall:
    """The call's origin (``CallOrigin``): progress into a bounded channel, the end into an event."""

    progress: trio.MemorySendChannel[dict[str, Any]]
    finished: trio.Event = attrs.Factory(trio.Event)
    outcome: CallOutcome | None = None

    def call_progress(self, call: Call, progress: float, total: float | None, message: str | None) -> None:
        try:
            self.progress.send_nowait({"progress": progress, "total": total, "message": message})
        except trio.WouldBlock:  # the browser reads slowly: the next report supersedes this one
            pass

    def call_done(self, call: Call, outcome: CallOutcome) -> None:
        self.outcome = outcome
        self.finished.set()


async def run_call(router: Router, name: str, arguments: dict[str, Any], session_label: str,
                   receive: Receive, send: Send, headers: Sequence[tuple[bytes, bytes]]) -> None:
    """Run one call from the page and stream its progress and result (see the module docstring);
    ``headers``: the page's security headers."""
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/x-ndjson"), *headers]})

    async def line(value: dict[str, Any]) -> None:
        await send({"type": "http.response.body", "body": _encoder.encode(value) + b"\n", "more_body": True})

    sender, progress = trio.open_memory_channel[dict[str, Any]](_PROGRESS_BUFFER)
    origin = _PageCall(sender)
    caller = CallerInfo(client_name=AGENT, session=session_label, transport="http")
    started = router.start_call(name, arguments, origin=origin, deadlines=None, caller=caller, progress=True)
    if isinstance(started, CallOutcome):
        outcome = started
    else:
        call = started
        await line({"id": call.correlation_id})
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_cancel_if_the_browser_leaves, router, call, receive)
            nursery.start_soon(_forward_progress, progress, line)
            with trio.move_on_at(call.gives_up_at):
                await origin.finished.wait()
            if origin.outcome is None:
                router.expire(call)
            nursery.cancel_scope.cancel()
        assert origin.outcome is not None
        outcome = origin.outcome
    log.info("status_page_call", tool=name, outcome=outcome.kind.value)
    await send({"type": "http.response.body", "body": _encoder.encode({"result": _result(outcome, name)}) + b"\n"})


async def _forward_progress(reports: trio.MemoryReceiveChannel[dict[str, Any]],
                            line: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
    async with reports:
        async for report in reports:
            await line(report)


async def _cancel_if_the_browser_leaves(router: Router, call: Call, receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    router.cancel(call, "cancelled: the status page that made the call was closed")


def _result(outcome: CallOutcome, name: str) -> Any:
    try:
        return msgspec.json.decode(_encoder.encode(call_result(outcome, name)))
    except RpcError as exc:  # an unknown tool: MCP answers it as a JSON-RPC error
        return error_result(OutcomeKind.UNKNOWN_TOOL.value, exc.message)
