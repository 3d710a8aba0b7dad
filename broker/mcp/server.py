"""What every MCP session shares: the core's parts, our identity, the tool list and its cache.

:class:`McpServer` is built once per daemon (``McpServer.of(core)``); each session
(``session``) holds it. It answers the tool listings (``tools/list``, a one-app scope's list,
the discovery-mode list) from a snapshot rebuilt when the registry changes, the era's
capabilities and ``initialize`` / ``server/discover`` results, and waits for tool-list changes.
"""

from __future__ import annotations

import itertools
import weakref
from typing import TYPE_CHECKING, Any, Final, Protocol

import msgspec
import trio

from ..version import VERSION
from ..discovery import meta_tools
from ..core.registry import RegisteredTool
from ..core.result_store import ResultStore
from . import elicitation, protocol
from .meta import DISCOVERY_INSTRUCTIONS, MetaTools
from .results import DEFAULT_PAGE_SIZE, list_page, tool_entry
from .scope import AppScopes

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..config.tokens import Authenticator
    from ..core.router import Router
    from ..core.registry import Registry

__all__ = ["CoreParts", "McpServer", "OpenSession", "INSTRUCTIONS"]

_entry_encoder: Final = msgspec.json.Encoder()
INSTRUCTIONS: Final = (
    "toolbridge connects you to desktop applications that are running on this computer. "
    "Each tool belongs to one app and is named <App>__<tool>. The list changes as apps start "
    "and quit: list the tools again when told they changed, or when a call says a tool is "
    "unknown. A result with isError explains what went wrong and whether retrying can help."
)


class OpenSession(Protocol):
    """What ``toolbridge status`` and the monitor read of an open ``session.Session``
    (structural: ``session`` imports this module)."""

    label: str | None
    transport: str
    client_name: str | None
    client_version: str | None
    protocol_version: str | None
    discovery: bool
    code: bool
    app: str | None
    last_activity: float

    @property
    def in_flight(self) -> int: ...


class CoreParts(Protocol):
    """The parts of the daemon's core an :class:`McpServer` is built from (``BrokerCore`` has
    them all: ``McpServer.of(core)``). Structural, so this package never imports the daemon."""

    @property
    def router(self) -> Router: ...

    @property
    def registry(self) -> Registry: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def auth(self) -> Authenticator: ...

    @property
    def shutdown_started(self) -> trio.Event: ...


class McpServer:
    """What every session shares: the core's parts it uses, our identity, the tool list and its cache.

    ``router`` runs the calls, ``registry`` holds the tools, ``settings`` and ``auth`` serve the
    HTTP front door (TLS, allowed hosts, bearer tokens), ``shutdown`` is set when a graceful stop
    begins (long-lived streams end).
    """

    def __init__(
        self,
        *,
        router: Router,
        registry: Registry,
        settings: Settings,
        auth: Authenticator,
        shutdown: trio.Event,
        page_size: int = DEFAULT_PAGE_SIZE,
        coalesce: float = 0.05,
    ) -> None:
        self.router = router
        self.registry = registry
        self.settings = settings
        self.auth = auth
        self.page_size = page_size
        self.coalesce = coalesce
        self.server_info: dict[str, Any] = {"name": "toolbridge", "version": VERSION}
        self.shutdown = shutdown
        self._tools: tuple[int, list[str], list[Any]] | None = None
        # Weak keys: a tool the registry dropped takes its encoded entry with it.
        self._encoded_entries: weakref.WeakKeyDictionary[RegisteredTool, msgspec.Raw] = weakref.WeakKeyDictionary()
        self._session_labels = itertools.count(1)
        #: Discovery mode's search index, shared by every session.
        self.meta = MetaTools(registry, rerank=settings.discovery_rerank, cache_dir=settings.home)
        # The list is rebuilt lazily (at the next tools/list), but dropped at once when the registry
        # changes: a departed app's encoded tools (their schemas) must not outlive it.
        registry.on_change(self._drop_snapshot)
        meta_list = sorted(meta_tools(), key=lambda tool: str(tool["name"]))
        self._meta_list = ([str(tool["name"]) for tool in meta_list], meta_list)
        #: More ``prometheus_client`` collectors for ``/metrics``, from the layers below that the
        #: MCP front door does not import (the daemon's loop watchdog; ``broker.daemon.run``).
        self.metrics_collectors: list[Any] = []
        #: The stateful sessions open now (stdio, handshake-era HTTP), for ``toolbridge status``.
        self.open_sessions: set[OpenSession] = set()
        #: One-app scopes' views of the registry (``scope``), shared by every scoped session.
        self.app_scopes = AppScopes(registry)
        #: 2026-07-28 calls paused for an elicitation's retry (``elicitation``); the daemon runs
        #: ``paused.run`` to expire them.
        self.paused = elicitation.PausedCalls(router, settings)
        #: Large results held as links (``bigresults``, ``broker.core.result_store``).
        self.result_store = ResultStore(max_bytes=settings.result_link_store_bytes, ttl=settings.result_link_ttl)

    @classmethod
    def of(cls, core: CoreParts, *, page_size: int = DEFAULT_PAGE_SIZE, coalesce: float = 0.05) -> McpServer:
        """The server for a core that has every part (the daemon's ``BrokerCore``)."""
        return cls(router=core.router, registry=core.registry, settings=core.settings, auth=core.auth,
                   shutdown=core.shutdown_started, page_size=page_size, coalesce=coalesce)

    def next_label(self, transport: str) -> str:
        return f"{transport}-{next(self._session_labels)}"

    @property
    def capabilities(self) -> dict[str, Any]:
        return self.capabilities_for(discovery=False)

    def capabilities_for(self, *, discovery: bool) -> dict[str, Any]:
        # In discovery mode the listed tools (the meta-tools) never change.
        # Resources (apps' protocol v2) are listed alike in every mode; they come and go with apps.
        # Completions and logging (apps' protocol v2, section 12) are relayed in every mode.
        return {"tools": {"listChanged": not discovery}, "resources": {"subscribe": True, "listChanged": True},
                "prompts": {"listChanged": True}, "completions": {}, "logging": {}}

    def _drop_snapshot(self) -> None:
        self._tools = None

    def _snapshot(self) -> tuple[list[str], list[Any]]:
        """Names and list entries, rebuilt when the registry changes.

        Each entry is encoded to JSON once, when its tool is first listed, and kept as
        ``msgspec.Raw`` while the tool lives: a change to one app re-encodes only its tools,
        and a page of ``tools/list`` is a concatenation of ready bytes.
        """
        version = self.registry.version
        if self._tools is None or self._tools[0] != version:
            tools = self.router.list_tools()
            cached = self._encoded_entries
            entries = []
            for tool in tools:
                entry = cached.get(tool)
                if entry is None:
                    entry = cached[tool] = msgspec.Raw(_entry_encoder.encode(tool_entry(tool)))
                entries.append(entry)
            self._tools = (version, [t.agent_name for t in tools], entries)
        return self._tools[1], self._tools[2]

    def list_tools(self, params: dict[str, Any], *, modern: bool, discovery: bool = False) -> dict[str, Any]:
        names, entries = self._meta_list if discovery else self._snapshot()
        return self._tools_page(names, entries, params, modern=modern)

    def list_app_tools(self, label: str, params: dict[str, Any], *, modern: bool) -> dict[str, Any]:
        """``tools/list`` in the one-app scope of ``label`` (empty while no app has that label)."""
        view = self.app_scopes.view(label)
        entries: list[Any] = view.entries  # encoded entries, as in ``_snapshot``
        return self._tools_page(view.names, entries, params, modern=modern)

    def _tools_page(self, names: list[str], entries: list[Any], params: dict[str, Any], *,
                    modern: bool) -> dict[str, Any]:
        page, next_cursor = list_page(names, entries, params.get("cursor"), self.page_size)
        result: dict[str, Any] = {"tools": page}
        if next_cursor is not None:
            result["nextCursor"] = next_cursor
        if modern:
            # Apps come and go at any time, so a cached list is soon wrong: never cache.
            result.update(self._modern_fields(ttl=True))
        return result

    def _modern_fields(self, *, ttl: bool) -> dict[str, Any]:
        fields: dict[str, Any] = {"resultType": "complete", "_meta": {protocol.SERVER_INFO_KEY: self.server_info}}
        if ttl:
            fields["ttlMs"] = 0
            fields["cacheScope"] = "private"
        return fields

    def discover_result(self, *, discovery: bool = False) -> dict[str, Any]:
        return {
            "supportedVersions": list(protocol.SUPPORTED_VERSIONS),
            "capabilities": self.capabilities_for(discovery=discovery),
            "instructions": DISCOVERY_INSTRUCTIONS if discovery else INSTRUCTIONS,
            **self._modern_fields(ttl=True),
        }

    def initialize_result(self, version: str, *, discovery: bool = False) -> dict[str, Any]:
        return {
            "protocolVersion": version,
            "capabilities": self.capabilities_for(discovery=discovery),
            "serverInfo": self.server_info,
            "instructions": DISCOVERY_INSTRUCTIONS if discovery else INSTRUCTIONS,
        }

    async def next_change(self, seen: int) -> int | None:
        """Wait until the tool set changes (the new version) or the daemon stops (None)."""
        if self.shutdown.is_set():
            return None
        found: list[int] = []
        async with trio.open_nursery() as nursery:

            async def changed() -> None:
                found.append(await self.router.wait_tools_changed(seen))
                nursery.cancel_scope.cancel()

            async def stopping() -> None:
                await self.shutdown.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(changed)
            nursery.start_soon(stopping)
        return found[0] if found and not self.shutdown.is_set() else None

    async def coalesced_change(self, seen: int) -> int | None:
        """:meth:`next_change`, then a short wait so a burst of changes is reported once."""
        if await self.next_change(seen) is None:
            return None
        with trio.move_on_after(self.coalesce):
            await self.shutdown.wait()
        return None if self.shutdown.is_set() else self.registry.version

