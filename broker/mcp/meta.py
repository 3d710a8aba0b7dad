"""Discovery mode at the front door: the meta-tools ``search_tools`` and ``call_tool``.

Theory of operation
-------------------
A session in *discovery mode* (``toolbridge stdio --discovery``, or HTTP at ``/mcp/discovery``)
lists only :func:`broker.discovery.meta_tools`; a session in the default mode lists every
app tool. Whatever the mode, the meta-tools can be *called* by name and app tools can be
called directly by their agent-facing name (app tools are always ``<label>__<tool>``, so the
names never collide): discovery mode only decides what ``tools/list`` shows. That keeps a
discovery-mode agent working when it remembers a tool's name, and lets the Python agent
library search from a full-mode connection.

``search_tools`` is answered here, from one :class:`~broker.discovery.ToolIndex` per
:class:`MetaTools` (one per daemon, shared by every session), brought up to date with the
registry lazily, at search time, when the registry's version moved. With the setting
``discovery_rerank = "semantic"`` (or ``"auto"``, the default, when the extra is installed) the
search is hybrid (BM25's best hits plus the tools closest
by embedding, blended) with a small embedding model, which is warmed up in a background thread
when the first discovery-mode session starts (a daemon nobody searches never loads it), and
which embeds new tools in one after each sync, at low priority, reading and writing the
vectors kept on disk in ``cache_dir`` (the home) so a restart does not embed them again; a
search never waits for that thread: a candidate not embedded yet is ordered by BM25 (see
``broker.discovery._semantic``). ``call_tool`` is
unwrapped here (:func:`unwrap_call`) and then runs through the router exactly like a direct
call: validation, guards, admission, deadlines, progress, cancellation and audit. The only
difference is an unknown tool: a direct call gets JSON-RPC -32602 (the MCP rule for an
unknown tool name), ``call_tool`` gets an ``isError`` result of kind ``unknown_tool`` pointing
at ``search_tools``, since there the name is an argument the model can correct.

A search runs in a worker thread (:meth:`MetaTools.search_tools_async`, one at a time through a
``trio.CapacityLimiter``), holding a lock over the index, while another worker thread embeds
the query (semantic search), so a search takes the longer of the two, not their sum: BM25 over 10,000 tools takes ~7 ms
and up to ~40 ms for a long query, an embedding ~20 ms. The registry is read on the trio
thread, and copied only when its version moved; removals after an app leaves take the lock
only if it is free (else the next search's sync drops the tools).
"""

from __future__ import annotations

import threading
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec
import structlog
import trio

from ..discovery import (
    CACHE_FILE,
    CALL_TOOL,
    DEFAULT_LIMIT,
    SEARCH_TOOLS,
    IndexedTool,
    PreparedSearch,
    SearchHit,
    SemanticReranker,
    SemanticUnavailable,
    ToolIndex,
    meta_tools,
    search_result,
    semantic_available,
)
from ..core.validation import compile_schema
from .results import error_result

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..core.registry import Registry, RegisteredTool

log = structlog.get_logger("toolbridge.mcp")

__all__ = ["META_TOOL_NAMES", "MetaTools", "unwrap_call", "unknown_tool_result", "DISCOVERY_INSTRUCTIONS"]

META_TOOL_NAMES: Final = frozenset({SEARCH_TOOLS, CALL_TOOL})
#: A search waits for its query's vector until this long after it started (seconds; BM25 runs
#: meanwhile), then answers in BM25's order: on a busy machine the embedding must not make a
#: search slow (issue 32: p95 <= 50 ms at 10,000 tools). The late embedding finishes in its
#: worker thread (one at a time) and is dropped. 40 ms: a query's embedding after the machine
#: was idle takes ~22-36 ms on the 2-core VM (the two models side by side), so 35 ms left 2-10 %
#: of searches without it even when nothing else ran; at 40 ms, 0-2 of 345 (BENCHMARKS.md,
#: discovery round 10).
QUERY_EMBED_BUDGET: Final = 0.040
#: At most this many departed tools leave the index on the event loop when their app leaves
#: (~28 ms at 10,000 tools); more wait for the next search's sync, in its worker thread.
EAGER_REMOVALS: Final = 500
DISCOVERY_INSTRUCTIONS: Final = (
    "toolbridge connects you to desktop applications that are running on this computer. Their "
    f"tools are not listed: describe what you want to do to {SEARCH_TOOLS}, which returns the best "
    f"matching tools with their name, app, description and inputSchema, then run one with "
    f"{CALL_TOOL} (its exact name and arguments). Apps start and quit at any time: search again "
    "when a tool is unknown. A result with isError explains what went wrong and whether retrying "
    "can help."
)
_encoder: Final = msgspec.json.Encoder()
_SCHEMAS: Final = {tool["name"]: tool["inputSchema"] for tool in meta_tools()}
_validate_search: Final = compile_schema(SEARCH_TOOLS, _SCHEMAS[SEARCH_TOOLS], 1 << 20)
_validate_call: Final = compile_schema(CALL_TOOL, _SCHEMAS[CALL_TOOL], 1 << 20)


def _invalid(tool: str, errors: list[str]) -> dict[str, Any]:
    return error_result("invalid_arguments", f"invalid arguments for {tool}: " + "; ".join(errors))


class MetaTools:
    """The search index every session shares, and the ``search_tools`` answer."""

    def __init__(self, registry: Registry, *, rerank: str = "off", reranker: SemanticReranker | None = None,
                 cache_dir: Path | None = None, query_budget: float | None = None) -> None:
        """``rerank``: the ``discovery_rerank`` setting ("off", "semantic" or "auto": semantic
        when the extra is installed); ``reranker``: one to use instead (tests give one with
        their own embedder); ``cache_dir``: where tool embeddings are kept across restarts
        (the daemon's home; None: in memory only); ``query_budget``: how long a search waits
        for its query's vector (None: :data:`QUERY_EMBED_BUDGET` with the daemon's own model, as
        long as it takes with a ``reranker`` given)."""
        self.query_budget = query_budget if query_budget is not None else (
            QUERY_EMBED_BUDGET if reranker is None else None)
        self.registry = registry
        self._index: ToolIndex | None = None
        self._reranker = reranker
        #: "auto" chose semantic: a model that fails to load means BM25 only, not an error.
        self._optional = False
        #: Searches run in worker threads, one at a time (CPU work; the model has one lock anyway).
        self._limiter: trio.CapacityLimiter | None = None
        #: The query's embedding runs in a thread of its own, alongside BM25's (one at a time).
        self._query_limiter: trio.CapacityLimiter | None = None
        #: Guards the index: held by a search (worker thread) and by syncs and removals.
        self._lock = threading.Lock()
        # Syncing (adding) is lazy, at search time (or when the first discovery session starts);
        # letting go of departed tools is not, up to EAGER_REMOVALS at a time.
        registry.on_change(self._forget_departed)
        if reranker is None and (rerank == "semantic" or (rerank == "auto" and semantic_available())):
            self._optional = rerank == "auto"
            self._reranker = SemanticReranker(background=True,
                                              cache_path=cache_dir / CACHE_FILE if cache_dir is not None else None)
        self._warming = False
        #: The thread building the index when the first discovery session starts (tests join it).
        self._building: threading.Thread | None = None

    def discovery_session_started(self) -> None:
        """Ready what a search needs, once, in background threads: the model (if any: only a
        daemon that serves discovery mode pays its load time and memory) and the index of the
        tools registered so far (~0.6 s at 10,000 tools), so the first search waits for neither.
        The registry is read here, on the event loop, as a search reads it."""
        if self._warming:
            return
        self._warming = True
        if self._reranker is not None:
            self._reranker.warm_up_in_background()
        if self._index is None:
            version = self.registry.version
            tools = self.registry.tools()
            self._building = threading.Thread(target=self._build, args=(version, tools),
                                              name="toolbridge-index-build", daemon=True)
            self._building.start()

    def _build(self, version: int, tools: Sequence[RegisteredTool]) -> None:
        """The index of ``tools`` (the registry at ``version``), unless a search built it first."""
        try:
            with self._lock:
                self._synced(version, tools)
        except Exception as exc:  # noqa: BLE001 - the first search builds it again and reports it
            log.warning("discovery_index_build_failed", error=type(exc).__name__)

    @property
    def index(self) -> ToolIndex:
        """The index, created on first use and synced with the registry (cheap when unchanged).

        Takes the index lock: waits, at most one search long, for a search in a worker thread."""
        with self._lock:
            index = self._ensure_index()
            index.sync(self.registry)
        return index

    def _ensure_index(self) -> ToolIndex:  # with self._lock held
        if self._index is None:
            self._index = ToolIndex(reranker=self._reranker)
            weakref.finalize(self, self._index.close)
        return self._index

    def _forget_departed(self) -> None:
        """Drop indexed tools the registry no longer has (their specs, rows and vectors).

        Skipped while a search holds the index (never wait on the event loop), and when more
        than :data:`EAGER_REMOVALS` tools left (~55 µs each on the loop): the next search's
        sync drops them, since the registry's version moved. Until then the index holds no
        more than the registry held at the last search."""
        index = self._index
        if index is None or not self._lock.acquire(blocking=False):
            return
        try:
            gone = [tool.agent_name for tool in index if self.registry.lookup(tool.agent_name) is None]
            if len(gone) <= EAGER_REMOVALS:  # more: the next search's sync, in its worker thread
                index.remove_many(gone)  # all at once: one transaction, each app's row rewritten once
        finally:
            self._lock.release()

    @property
    def reranks(self) -> bool:
        """Searches embed the query (semantic re-ranking)."""
        return self._reranker is not None

    @property
    def threaded(self) -> bool:
        """Run searches with :meth:`search_tools_async` (always: a BM25 search takes ~2.5 ms at
        10,000 tools, up to ~40 ms for a long query whose words no earlier search had, and an
        embedding ~17-36 ms)."""
        return True

    def search_tools(self, arguments: Any, *, session: str | None = None) -> dict[str, Any]:
        """The ``CallToolResult`` of ``search_tools``: the hits as structuredContent and as JSON
        text, computed in the calling thread (the agent library, tests; the daemon uses
        :meth:`search_tools_async`)."""
        checked = _check(arguments)
        if isinstance(checked, dict):
            return checked
        with self._lock:
            index = self._ensure_index()
            index.sync(self.registry)
            prepared = index.prepare(*checked)
        return self._answer(prepared, prepared.finish(), session)

    async def search_tools_async(self, arguments: Any, *, session: str | None = None) -> dict[str, Any]:
        """:meth:`search_tools` in a worker thread (one search at a time), so the event loop —
        every other call — does not wait for it. The registry is read here, on the event loop,
        and only when it changed since the index last saw it."""
        checked = _check(arguments)
        if isinstance(checked, dict):
            return checked
        version = self.registry.version
        index = self._index
        tools = None
        if index is None or index.version != version:
            tools = self.registry.tools()  # a list the registry never changes (a new one per change)
        if self._limiter is None:
            self._limiter = trio.CapacityLimiter(1)
            self._query_limiter = trio.CapacityLimiter(1)
        reranker = self._reranker
        vectors: list[Any] = []
        failed: list[bool] = []
        started = trio.current_time()
        text = checked[0]
        if reranker is not None:
            # What the search embeds: the query with its typos corrected, found first (in a
            # worker thread: the index syncs first) so that it is embedded once, alongside BM25.
            text = await trio.to_thread.run_sync(self._embed_text, checked[0], version, tools, limiter=self._limiter)
            tools = None

        async def embed_query() -> None:
            # The query's embedding runs alongside BM25 (both release the GIL), so a search
            # takes the longer of the two, not their sum. A failure here is not reported:
            # finish() embeds the query itself and reports it (the "auto" fallback included).
            assert reranker is not None
            try:
                # abandoned if late (see QUERY_EMBED_BUDGET): its limiter slot is freed when it ends
                vectors.append(await trio.to_thread.run_sync(reranker.embed_query, text,
                                                             limiter=self._query_limiter, abandon_on_cancel=True))
            except Exception:  # noqa: BLE001 - see above
                failed.append(True)

        async with trio.open_nursery() as nursery:
            if reranker is not None:
                nursery.start_soon(embed_query)
            prepared = await trio.to_thread.run_sync(self._prepare, checked, version, tools, limiter=self._limiter)
            if self.query_budget is not None:
                nursery.cancel_scope.deadline = started + self.query_budget
        if reranker is not None and not vectors and not failed and self.query_budget is not None:
            # the vector is late: BM25's order now (the same as without the extra)
            return self._answer(prepared, prepared.rate(prepared.hits[: prepared.limit]), session)
        # The vector is of the text the search embeds, unless the index changed in between
        # (then finish embeds it).
        vector = vectors[0] if vectors and prepared.embedded_as == text else None
        prepared, hits = await trio.to_thread.run_sync(self._finish, prepared, vector, limiter=self._limiter)
        if hits is None:
            # "auto" found the extra but its model does not load: BM25 from now on.
            log.warning("semantic_search_off", reason="the semantic models did not load")
            hits = prepared.rate(prepared.hits[: prepared.limit])
        return self._answer(prepared, hits, session)

    def _embed_text(self, query: str, version: int, tools: Sequence[RegisteredTool] | None) -> str:
        """What a hybrid search of ``query`` embeds (``ToolIndex.embed_text``), in a worker thread,
        holding the index (synced first, as :meth:`_prepare` does)."""
        with self._lock:
            return self._synced(version, tools).embed_text(query)

    def _prepare(self, checked: tuple[str, int], version: int, tools: Sequence[RegisteredTool] | None) -> PreparedSearch:
        """A search's BM25 step, in a worker thread, holding the index."""
        with self._lock:
            return self._synced(version, tools).prepare(*checked)

    def _synced(self, version: int, tools: Sequence[RegisteredTool] | None) -> ToolIndex:  # with self._lock held
        """The index, synced with ``tools`` (the registry at ``version``; None: nothing to sync)
        unless it already holds that version."""
        index = self._ensure_index()
        if tools is not None and index.version != version:
            index.sync_tools(version, _indexed(tools))
        return index

    def _finish(self, prepared: PreparedSearch,
                query_vector: Any) -> tuple[PreparedSearch, list[SearchHit] | None]:
        """A search's semantic step, in a worker thread; None for the hits: the optional model
        failed to load."""
        try:
            return prepared, prepared.finish(query_vector)
        except SemanticUnavailable:
            if not self._optional:
                raise
            with self._lock:
                self._reranker = None
                if self._index is not None:
                    self._index.reranker = None
            return prepared, None

    def _answer(self, prepared: PreparedSearch, hits: list[SearchHit], session: str | None) -> dict[str, Any]:
        structured = search_result(hits, prepared.match if hits else None,
                                   prepared.no_clear_fit if hits else None)
        log.info("tool_search", session=session, query_chars=len(prepared.query), limit=prepared.limit,
                 hits=[hit.agent_name for hit in hits], match=prepared.match if hits else None,
                 no_clear_fit=prepared.no_clear_fit if hits else None)
        return {
            "content": [{"type": "text", "text": _encoder.encode(structured).decode()}],
            "structuredContent": structured,
            "isError": False,
        }


def _indexed(tools: Sequence[RegisteredTool]) -> list[IndexedTool]:
    """The registry's tools as the index takes them (made in a worker thread: ~6-9 ms at 10,000
    tools that the event loop no longer spends)."""
    return [IndexedTool(t.agent_name, t.instance.label, t.spec) for t in tools]


def _check(arguments: Any) -> tuple[str, int] | dict[str, Any]:
    """``search_tools``'s ``(query, limit)``, or the error result for bad arguments."""
    if arguments is None:
        arguments = {}
    errors = _validate_search(arguments) if isinstance(arguments, dict) else ["arguments: must be an object"]
    if errors:
        return _invalid(SEARCH_TOOLS, errors)
    return arguments["query"], int(arguments.get("limit", DEFAULT_LIMIT))


def unwrap_call(arguments: Any) -> tuple[str, Any] | dict[str, Any]:
    """``call_tool``'s ``(tool name, tool arguments)``, or the error result for bad arguments."""
    if arguments is None:
        arguments = {}
    errors = _validate_call(arguments) if isinstance(arguments, dict) else ["arguments: must be an object"]
    if errors:
        return _invalid(CALL_TOOL, errors)
    return arguments["name"], arguments.get("arguments")


def unknown_tool_result(registry: Registry, name: str) -> dict[str, Any]:
    """The ``isError`` result of ``call_tool`` for a tool name nobody offers."""
    candidates = registry.candidates(name)
    hint = f" Did you mean one of: {', '.join(candidates)}?" if candidates else ""
    return error_result(
        "unknown_tool",
        f"unknown tool {name!r}: no connected app offers it. Find tools with {SEARCH_TOOLS} "
        f"and use a name it returns.{hint}",
    )
