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

``POST /api/inspect/mcp`` with ``{"app": <label>, "method": ..., "params": {...}}`` lists,
reads and gets an app's resources and prompts (:data:`MCP_METHODS`): the request runs in a
stateless 2026-07-28 MCP session in that app's one-app scope (:func:`mcp_request`), the very
code an agent's ``/mcp/apps/<label>`` request runs (argument checks, timeouts, audit, the call
log), and the JSON-RPC response comes back as it is.

Access is the status page's: the session cookie, the Origin and the CSRF token (checked by
``StatusPages``), plus the session's grant for the tool's (or resource's) app.
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
from ..version import VERSION
from .jsonrpc import Request, RpcError
from .protocol import CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, MODERN_VERSIONS, PROTOCOL_VERSION_KEY
from .results import call_result, error_result
from .server import McpServer
from .session import open_session

log = structlog.get_logger("toolbridge.inspector")

__all__ = ["AGENT", "MAX_CALL_BODY", "MCP_METHODS", "catalog", "mcp_request", "parse_call", "parse_mcp", "run_call"]

#: The agent name the call log and the audit show for calls made from the page.
AGENT: Final = "status-page"
#: The largest call request (name and arguments as JSON) the page may send.
MAX_CALL_BODY: Final = 1024 * 1024
_PROGRESS_BUFFER: Final = 16
#: What the page may ask an app's one-app scope (nothing that changes a thing).
MCP_METHODS: Final = frozenset({"resources/list", "resources/templates/list", "resources/read", "prompts/list",
                                "prompts/get"})
_encoder = msgspec.json.Encoder()

Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]


def may_call(grant: Grant, tool: RegisteredTool) -> bool:
    """Whether a page logged in with ``grant`` may see and call ``tool``."""
    return grant.allows_agent_to(tool.instance.label)


def catalog(tools: list[RegisteredTool], apps: list[str], grant: Grant) -> dict[str, Any]:
    """The app labels ``grant`` may use and the tools it may call, as the inspector shows them."""
    return {"apps": sorted({app for app in apps if grant.allows_agent_to(app)}), "tools": [
        {"name": tool.agent_name, "app": tool.instance.label, "tool": tool.name, "title": tool.spec.title,
         "description": tool.spec.description, "inputSchema": tool.spec.input_schema}
        for tool in sorted(tools, key=lambda t: t.agent_name) if may_call(grant, tool)
    ]}


def _json_object(body: bytes | None, shape: str) -> dict[str, Any] | str:
    """The request body's JSON object, or what is wrong with the body (``shape``: the object wanted)."""
    if body is None:
        return f"the request is missing or over {MAX_CALL_BODY} bytes"
    try:
        request = json.loads(body)
    except ValueError:
        return "the request is not JSON"
    return request if isinstance(request, dict) else f"the request needs {shape}"


def parse_call(body: bytes | None) -> tuple[str, dict[str, Any]] | str:
    """``(name, arguments)`` from a call request's body, or what is wrong with it."""
    shape = '{"name": <tool>, "arguments": {...}}'
    request = _json_object(body, shape)
    if isinstance(request, str):
        return request
    if not isinstance(request.get("name"), str):
        return f"the request needs {shape}"
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


def parse_mcp(body: bytes | None) -> tuple[str, str, dict[str, Any]] | str:
    """``(app label, method, params)`` from an MCP request's body, or what is wrong with it."""
    shape = f'{{"app": <label>, "method": one of {sorted(MCP_METHODS)}, "params": {{...}}}}'
    request = _json_object(body, shape)
    if isinstance(request, str):
        return request
    if not isinstance(request.get("app"), str) or request.get("method") not in MCP_METHODS \
            or not isinstance(request.get("params", {}), dict):
        return f"the request needs {shape}"
    return request["app"], request["method"], request.get("params", {})


class _Answer:
    """An ``Outbox`` that keeps the request's response (notifications are not wanted here)."""

    def __init__(self) -> None:
        self.response: bytes | None = None
        self.done = trio.Event()

    async def send(self, data: bytes, *, final: bool = False) -> None:
        if final:
            self.send_final_nowait(data)

    def send_nowait(self, data: bytes) -> bool:
        return True

    def send_final_nowait(self, data: bytes) -> bool:
        self.response = data
        self.done.set()
        return True

    def close(self) -> None:
        self.done.set()


async def mcp_request(server: McpServer, app: str, method: str, params: dict[str, Any], session_label: str,
                      receive: Receive) -> Any:
    """One request in a stateless 2026-07-28 session scoped to the app ``app``: its JSON-RPC
    response (``result`` or ``error``). Leaving the page cancels it."""
    meta = {PROTOCOL_VERSION_KEY: MODERN_VERSIONS[-1], CLIENT_CAPABILITIES_KEY: {},
            CLIENT_INFO_KEY: {"name": AGENT, "version": VERSION}}
    answer = _Answer()
    async with open_session(server, transport="http", label=session_label, stateful=False, app=app,
                            principal=f"status-page:{session_label}") as session, trio.open_nursery() as nursery:
        nursery.start_soon(_close_if_the_browser_leaves, session, answer, receive)
        await session.handle(Request(1, method, {**params, "_meta": meta}), answer)
        await answer.done.wait()
        nursery.cancel_scope.cancel()
    if answer.response is None:
        return {"error": {"code": -32603, "message": "the request ended without an answer"}}
    return json.loads(answer.response)


async def _close_if_the_browser_leaves(session: Any, answer: _Answer, receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    session.close()  # its request is cancelled (the app is told)
    answer.done.set()
