"""The session's resources and prompts (apps' wire protocol v2, ``broker.core.resources``).

``resources/list``, ``resources/templates/list`` and ``prompts/list`` are answered inline from
the directory's lists, prepared once per change (``broker.core.listing``); ``resources/read``
and ``prompts/get`` run as tasks of the session (so a cancel reaches them and the app gets
``toolCancel``) that await the owning app's link, and write a call-log row (``resource_read`` /
``prompt_get``, :func:`audit_request`). Handshake era: ``resources/subscribe`` (a task too:
matching an app's templates takes turns with the loop) keeps URIs per session; the
notifications are ``session_watch``'s. In a one-app scope ``session.resources`` is a
``ScopedResources`` view (``scope``) with the directory's face, so these serve both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol

import structlog
import trio

from ..core.outcome import CallOutcome, OutcomeKind
from ..core.resources import RESOURCE_NOT_FOUND, ResourceDirectory, ResourceError, agent_uri, prompt_name
from ..core.result_store import is_result_uri
from . import bigresults, protocol
from .jsonrpc import INVALID_PARAMS, Request, RpcError
from .request_context import InFlight, Outbox, RequestContext, audit_request
from .results import list_page
from .scope import ScopedResources
from .server import McpServer

log = structlog.get_logger("toolbridge.mcp")

#: Default deadline of a ``resources/read`` (the request's own ``_meta`` timeout wins).
RESOURCE_READ_TIMEOUT: Final = 30.0
#: Resource URIs one session may subscribe to (handshake era, or one listen stream).
MAX_SUBSCRIPTIONS: Final = 1000


class ResourceSession(Protocol):
    """What this module uses of ``session.Session`` (structural: ``session`` imports this one)."""

    @property
    def server(self) -> McpServer: ...

    @property
    def label(self) -> str | None: ...

    @property
    def token(self) -> str | None: ...

    @property
    def client_name(self) -> str | None: ...

    @property
    def resources(self) -> ResourceDirectory | ScopedResources: ...

    @property
    def resource_subs(self) -> set[str]: ...

    def finish_request(self, outbox: Any, data: bytes) -> None: ...


def list_resources(session: ResourceSession, request: Request, context: RequestContext) -> dict[str, Any]:
    listing = session.resources.resource_listing()  # prepared once per change: a page is a slice
    return resource_page(session, "resources", listing.names, listing.entries, request, context)


def list_resource_templates(session: ResourceSession, request: Request, context: RequestContext) -> dict[str, Any]:
    listing = session.resources.template_listing()
    return resource_page(session, "resourceTemplates", listing.names, listing.entries, request, context)


def resource_page(session: ResourceSession, key: str, names: list[str], entries: list[dict[str, Any]], request: Request,
                   context: RequestContext) -> dict[str, Any]:
    page, next_cursor = list_page(names, entries, request.params.get("cursor"), session.server.page_size)
    result: dict[str, Any] = {key: page}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    if context.modern:
        result.update(session.server._modern_fields(ttl=True))
    return result


async def read_resource(
    session: ResourceSession, request: Request, context: RequestContext, outbox: Outbox, entry: InFlight
) -> dict[str, Any]:
    """``resources/read``: relayed to the owning app (a task, so a cancel reaches it)."""
    uri = request.params.get("uri")
    if not isinstance(uri, str):
        raise RpcError(INVALID_PARAMS, 'Invalid params: resources/read needs a string "uri"')
    if is_result_uri(uri):  # a large result held as a link (bigresults)
        return bigresults.read_link(session, uri, context)
    started = trio.current_time()
    label = "?"
    logged = uri  # the call log's row: the agent-facing URI, in a one-app scope too
    outcome = CallOutcome(OutcomeKind.CANCELLED, "cancelled by the agent")  # unless it ends otherwise
    try:
        timeout = protocol.timeout_of(request.params) or RESOURCE_READ_TIMEOUT
        timeout = await through_grace(session.resources.wait_for_uri, uri, started, timeout)
        app, own = await session.resources.resolve(uri)
        label = app.label
        logged = agent_uri(label, own)
        contents = await app.port.read_resource(own, timeout)
        outcome = CallOutcome(OutcomeKind.OK)
    except ResourceError as exc:
        outcome = CallOutcome(exc.kind, exc.message)
        # 2026-07-28 (SEP-2164) answers an unknown resource with -32602; older eras, -32002.
        code = INVALID_PARAMS if context.modern and exc.code == RESOURCE_NOT_FOUND else exc.code
        raise RpcError(code, exc.message, {"uri": uri[:2048]}) from None
    finally:
        audit_request(session, "resource_read", {"uri": logged[:2048]}, label, context, outcome, started)
    if isinstance(session.resources, ScopedResources):  # the app's own URIs, as it listed them
        contents = session.resources.own_contents(label, contents)
    result: dict[str, Any] = {"contents": contents}
    if context.modern:  # 2026-07-28 requires caching hints here too (SEP-2549): never cache
        result.update(session.server._modern_fields(ttl=True))
    return result


def list_prompts(session: ResourceSession, request: Request, context: RequestContext) -> dict[str, Any]:
    listing = session.resources.prompt_listing()
    return resource_page(session, "prompts", listing.names, listing.entries, request, context)


async def get_prompt(
    session: ResourceSession, request: Request, context: RequestContext, outbox: Outbox, entry: InFlight
) -> dict[str, Any]:
    """``prompts/get``: arguments checked against the prompt's, then relayed to its app."""
    params = request.params
    name = params.get("name")
    if not isinstance(name, str):
        raise RpcError(INVALID_PARAMS, 'Invalid params: prompts/get needs a string "name"')
    arguments = params.get("arguments") or {}
    if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
        raise RpcError(INVALID_PARAMS, 'Invalid params: prompts/get "arguments" maps names to strings')
    started = trio.current_time()
    label = "?"
    logged = name  # the call log's row: the agent-facing name, in a one-app scope too
    outcome = CallOutcome(OutcomeKind.CANCELLED, "cancelled by the agent")
    try:
        timeout = protocol.timeout_of(params) or RESOURCE_READ_TIMEOUT
        timeout = await through_grace(session.resources.wait_for_prompt, name, started, timeout)
        label, port, spec = session.resources.resolve_prompt(name)
        logged = prompt_name(label, spec.name)
        declared = {arg.name for arg in spec.arguments}
        missing = sorted(arg.name for arg in spec.arguments if arg.required and arg.name not in arguments)
        unknown = sorted(set(arguments) - declared)
        if missing or unknown:
            raise ResourceError(
                f"invalid arguments for the prompt {name!r}: "
                + "; ".join(([f"missing {', '.join(missing)}"] if missing else [])
                            + ([f"unknown {', '.join(unknown)}"] if unknown else []))
                + f" (it takes: {', '.join(sorted(declared)) or 'no arguments'})",
                code=INVALID_PARAMS, kind="invalid_arguments")
        result = await port.get_prompt(spec.name, arguments, timeout)
        if isinstance(session.resources, ScopedResources):  # embedded resources under own URIs
            result = session.resources.own_prompt(label, result)
        outcome = CallOutcome(OutcomeKind.OK)
    except ResourceError as exc:
        outcome = CallOutcome(exc.kind, exc.message)
        raise RpcError(exc.code, exc.message) from None
    finally:
        audit_request(session, "prompt_get", {"name": logged[:256]}, label, context, outcome, started)
    if context.modern:
        result.update(session.server._modern_fields(ttl=False))
    return result


async def subscribe(
    session: ResourceSession, request: Request, context: RequestContext, outbox: Outbox, entry: InFlight
) -> dict[str, Any]:
    """A task, not inline: matching the URI against an app's templates may take turns."""
    uri = request.params.get("uri")
    if not isinstance(uri, str):
        raise RpcError(INVALID_PARAMS, 'Invalid params: resources/subscribe needs a string "uri"')
    try:
        await session.resources.resolve(uri)
    except ResourceError as exc:
        raise RpcError(exc.code, exc.message, {"uri": uri[:2048]}) from None
    if len(session.resource_subs) >= MAX_SUBSCRIPTIONS:
        raise RpcError(INVALID_PARAMS, f"Invalid params: at most {MAX_SUBSCRIPTIONS} resource subscriptions "
                       "per session; unsubscribe from some first")
    session.resource_subs.add(uri)
    return {}


def unsubscribe(session: ResourceSession, request: Request, context: RequestContext) -> dict[str, Any]:
    uri = request.params.get("uri")
    if not isinstance(uri, str):
        raise RpcError(INVALID_PARAMS, 'Invalid params: resources/unsubscribe needs a string "uri"')
    session.resource_subs.discard(uri)
    return {}


async def through_grace(wait: Callable[[str], Awaitable[bool]], name: str, started: float,
                         timeout: float) -> float:
    """Wait, within ``timeout``, while the app offering ``name`` (a resource's URI or a prompt's
    name, as the session's agent sees them) is in its reconnect grace period; the time left of
    ``timeout`` (counted from ``started``) once it is back, else ``timeout``."""
    with trio.move_on_after(timeout):
        if await wait(name):
            return max(started + timeout - trio.current_time(), 0.001)
    return timeout
