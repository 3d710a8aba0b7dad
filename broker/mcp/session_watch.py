"""The session's change notifications: tool, resource and prompt lists, and resource updates.

Handshake era: :func:`watch_tools`, :func:`watch_resources` and :func:`watch_prompts` run in a
stateful session's nursery (``open_session`` starts them) and send one ``list_changed`` per
burst of changes (``coalesce`` apart) on ``notify_outbox`` once initialized. 2026-07-28:
``subscriptions/listen`` (:func:`listen`, a task of the session) acknowledges what it honours
and then streams ``toolsListChanged``, ``resourcesListChanged``, ``resourceSubscriptions`` and
``promptsListChanged`` on its own response stream until the daemon stops. Discovery and code
modes list tools that never change: nothing is sent for tools there. A one-app scope notifies
only when its own list changed (its digest, compared after each registry change).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol

import trio

from ..core.resources import ResourceDirectory
from . import protocol
from .jsonrpc import INVALID_PARAMS, Request, RpcError, encode_notification
from .request_context import InFlight, Outbox, RequestContext
from .scope import ScopedResources
from .server import McpServer
from .session_resources import MAX_SUBSCRIPTIONS

LIST_CHANGED: Final = encode_notification("notifications/tools/list_changed")
RESOURCES_LIST_CHANGED: Final = encode_notification("notifications/resources/list_changed")
PROMPTS_LIST_CHANGED: Final = encode_notification("notifications/prompts/list_changed")


class WatchSession(Protocol):
    """What this module uses of ``session.Session`` (structural: ``session`` imports this one)."""

    @property
    def server(self) -> McpServer: ...

    @property
    def discovery(self) -> bool: ...

    @property
    def app(self) -> str | None: ...

    @property
    def initialized(self) -> trio.Event: ...

    @property
    def notify_outbox(self) -> Outbox | None: ...

    @property
    def resources(self) -> ResourceDirectory | ScopedResources: ...

    @property
    def update_sinks(self) -> dict[Callable[[str], None], frozenset[str]]: ...

    @property
    def tools_seen(self) -> int: ...

    @property
    def scope_seen(self) -> bytes | None: ...

    def scope_digest(self) -> bytes | None: ...


#: What a session's agent has heard of the tool list: the registry's version, and (in a
#: one-app scope) the digest of the scope's own list.
_Seen = tuple[int, bytes | None]


async def watch_tools(session: WatchSession) -> None:
    """Handshake era: one ``list_changed`` on ``notify_outbox`` per burst of changes."""
    if session.discovery:
        return  # the meta-tool list never changes
    await session.initialized.wait()
    seen = (session.tools_seen, session.scope_seen)
    while (heard := await next_tool_list_change(session, seen)) is not None:
        seen = heard
        outbox = session.notify_outbox
        if outbox is not None:
            outbox.send_nowait(LIST_CHANGED)



async def next_tool_list_change(session: WatchSession, seen: _Seen) -> _Seen | None:
    """Wait for the next burst of tool-list changes the agent should hear of — in a one-app
    scope, only one that changed the scope's own list — and return what it has heard then;
    None when the daemon is stopping."""
    version, digest = seen
    while True:
        new = await session.server.coalesced_change(version)
        if new is None:
            return None
        version = new
        if session.app is None:
            return version, digest
        now = session.scope_digest()
        if now != digest:
            return version, now


async def watch_resources(session: WatchSession) -> None:
    """Handshake era: one ``notifications/resources/list_changed`` per burst of changes."""
    directory = session.resources
    await watch_list(session, lambda: directory.version, directory.wait_changed, RESOURCES_LIST_CHANGED)


async def watch_prompts(session: WatchSession) -> None:
    """Handshake era: one ``notifications/prompts/list_changed`` per burst of changes."""
    directory = session.resources
    await watch_list(session, lambda: directory.prompts_version, directory.wait_prompts_changed,
                           PROMPTS_LIST_CHANGED)


async def watch_list(session: WatchSession, version: Callable[[], int], wait_changed: Callable[[int], Awaitable[int]],
                      notification: bytes) -> None:
    """Send ``notification`` once per burst of changes (``coalesce`` apart) until shutdown."""
    await session.initialized.wait()
    seen = version()
    while True:
        seen = await wait_changed(seen)
        with trio.move_on_after(session.server.coalesce):
            await session.server.shutdown.wait()
        if session.server.shutdown.is_set():
            return
        seen = version()
        if session.notify_outbox is not None:
            session.notify_outbox.send_nowait(notification)


async def listen(
    session: WatchSession, request: Request, context: RequestContext, outbox: Outbox, entry: InFlight
) -> dict[str, Any]:
    wanted = request.params.get("notifications")
    if not isinstance(wanted, dict):
        raise RpcError(INVALID_PARAMS, 'Invalid params: subscriptions/listen needs a "notifications" object')
    # Discovery mode: the listed tools (the meta-tools) never change, so nothing is honoured.
    honored: dict[str, Any] = (
        {"toolsListChanged": True} if wanted.get("toolsListChanged") is True and not session.discovery else {})
    # Resources (apps' protocol v2): their list changes, and updates of the URIs asked for
    # (in a one-app scope: its app's, by their own URIs; see ``scope``).
    resources_changed = wanted.get("resourcesListChanged") is True
    prompts_changed = wanted.get("promptsListChanged") is True
    if prompts_changed:
        honored["promptsListChanged"] = True
    asked = wanted.get("resourceSubscriptions")
    uris = frozenset(u for u in asked[:MAX_SUBSCRIPTIONS] if isinstance(u, str)) if isinstance(asked, list) else frozenset()
    if resources_changed:
        honored["resourcesListChanged"] = True
    if uris:
        honored["resourceSubscriptions"] = sorted(uris)
    meta = {protocol.SUBSCRIPTION_ID_KEY: request.id}
    seen = (session.server.registry.version, session.scope_digest())
    await outbox.send(
        encode_notification("notifications/subscriptions/acknowledged", {"notifications": honored, "_meta": meta})
    )
    changed = encode_notification("notifications/tools/list_changed", {"_meta": meta})
    tools_honored = "toolsListChanged" in honored
    async with trio.open_nursery() as nursery:
        if resources_changed or uris:
            nursery.start_soon(listen_resources, session, outbox, meta, resources_changed, uris)
        if prompts_changed:
            nursery.start_soon(listen_prompts, session, outbox, meta)
        while (heard := await next_tool_list_change(session, seen)) is not None:
            seen = heard
            if tools_honored:
                await outbox.send(changed)
        nursery.cancel_scope.cancel()  # the daemon is stopping: end the subscription gracefully
    return {"resultType": "complete", "_meta": meta}


async def listen_resources(session: WatchSession, outbox: Outbox, meta: dict[str, Any], list_changed: bool,
                            uris: frozenset[str]) -> None:
    """The resource part of a ``subscriptions/listen`` stream (runs beside the tools' part)."""
    directory = session.resources

    def updated(uri: str) -> None:
        if uri in uris:
            outbox.send_nowait(encode_notification("notifications/resources/updated", {"uri": uri, "_meta": meta}))

    session.update_sinks[updated] = uris
    try:
        seen = directory.version
        while True:
            seen = await directory.wait_changed(seen)
            await trio.sleep(session.server.coalesce)
            seen = directory.version
            if list_changed:
                await outbox.send(encode_notification("notifications/resources/list_changed", {"_meta": meta}))
    finally:
        session.update_sinks.pop(updated, None)


async def listen_prompts(session: WatchSession, outbox: Outbox, meta: dict[str, Any]) -> None:
    directory = session.resources
    seen = directory.prompts_version
    while True:
        seen = await directory.wait_prompts_changed(seen)
        await trio.sleep(session.server.coalesce)
        seen = directory.prompts_version
        await outbox.send(encode_notification("notifications/prompts/list_changed", {"_meta": meta}))
