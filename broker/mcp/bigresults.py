"""Large ``tools/call`` results at the MCP side: written without a copy, or answered as links.

Theory of operation
-------------------
Two things happen to a result on its way to the agent, both from
``session_tools.tool_call_done``:

1. **Links** (:func:`linked`, issue 17): a successful result whose content is
   ``result_link_bytes`` or more is kept in the server's :class:`~broker.core.result_store.ResultStore`
   and the agent gets a short text summary and a ``resource_link`` to it instead (see that
   module). Not when the setting is 0, when the call's ``_meta`` asked for the result inline
   (``toolbridge/inlineResult: true``), or when the result is larger than the store's whole
   budget. The link's creation is logged (``result_linked``) and written to the call log
   (tool ``result_link``); a read (:func:`read_link`) writes a ``result_read`` row like any
   ``resources/read``.

2. **Passthrough** (:func:`response_parts`, issue 18): a result whose content is still the app's
   raw bytes (``msgspec.Raw``, :mod:`broker.core.passthrough`) and large is encoded as three
   parts — the response's envelope before the content, the content itself (a view of the line the
   app sent), the rest and the newline — and handed to an outbox that can write parts
   (``send_final_parts_nowait``: the stdio relay's connection writes them in order, never
   joined). Any other outbox (HTTP) gets them joined into one ``bytes``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Protocol

import msgspec
import structlog
import trio

from ..core.outcome import CallOutcome, OutcomeKind
from ..core.passthrough import PassthroughResult, content_size
from ..core.result_store import INLINE_KEY, LINK_KEY
from ..core.resources import ResourceError
from .jsonrpc import RequestId, RpcError, encode_result
from .request_context import audit_request

if TYPE_CHECKING:
    from app_client.protocol import ToolResult

    from ..config.settings import Settings
    from ..core.result_store import ResultStore
    from ..core.router import Router


class _Outbox(Protocol):
    def close(self) -> None: ...


class _Server(Protocol):
    """The parts of ``server.McpServer`` used here."""

    @property
    def settings(self) -> Settings: ...

    @property
    def router(self) -> Router: ...

    @property
    def result_store(self) -> ResultStore: ...

    def _modern_fields(self, *, ttl: bool) -> dict[str, Any]: ...


class _Request(Protocol):
    """What this module reads and sets on a ``tools/call`` in flight (``session._ToolRequest``)."""

    inline: bool

    @property
    def session(self) -> LinkSession: ...


class _Context(Protocol):
    @property
    def modern(self) -> bool: ...

    @property
    def client_name(self) -> str | None: ...


class LinkSession(Protocol):
    """The parts of ``session.Session`` used here (a protocol: ``session`` imports this module)."""

    @property
    def server(self) -> _Server: ...

    @property
    def label(self) -> str | None: ...

    @property
    def token(self) -> str | None: ...

    @property
    def client_name(self) -> str | None: ...

    def finish_request(self, outbox: Any, data: bytes) -> None: ...

log = structlog.get_logger("toolbridge.mcp")

__all__ = ["SPLIT_BYTES", "linked", "prepare", "read_link", "response_parts", "send_parts"]

#: Raw content at least this large is written as its own part (below it, one encode is cheaper).
SPLIT_BYTES: Final = 256 * 1024
_MARK: Final = msgspec.Raw(b"null")
_CONTENT_KEY: Final = b'"content":'


def prepare(request: _Request, params: dict[str, Any]) -> None:
    """Note on a starting ``tools/call`` whether it wants its result inline (a link is its
    session's token's alone: ``Session.token``)."""
    meta = params.get("_meta")
    request.inline = isinstance(meta, dict) and meta.get(INLINE_KEY) is True


# --- passthrough ---------------------------------------------------------------------------------


def response_parts(request_id: RequestId, result: dict[str, Any]) -> list[bytes | msgspec.Raw] | None:
    """The response for ``result`` in three parts, if its content is large raw JSON; else None."""
    content = result.get("content")
    if not isinstance(content, msgspec.Raw) or len(content) < SPLIT_BYTES:
        return None
    shell = encode_result(request_id, {**result, "content": _MARK})  # the key keeps its place: first
    # "content": is the result's first key; neither "jsonrpc" nor the id (an escaped string or a
    # number) can hold that sequence, so its first occurrence is the one.
    at = shell.index(_CONTENT_KEY + b"null") + len(_CONTENT_KEY)
    return [shell[:at], content, shell[at + 4:] + b"\n"]


def send_parts(session: LinkSession, outbox: _Outbox, parts: list[bytes | msgspec.Raw]) -> None:
    """Send a response given as parts: as they are where the outbox takes parts, else joined."""
    send = getattr(outbox, "send_final_parts_nowait", None)
    if send is not None and send(parts):
        outbox.close()
        return
    last = parts[-1]
    assert isinstance(last, bytes)
    session.finish_request(outbox, b"".join([*parts[:-1], last[:-1]]))  # (the outbox adds its newline)


# --- links -----------------------------------------------------------------------------------


def _kind(block: dict[str, msgspec.Raw]) -> str:
    try:
        kind = msgspec.json.decode(block.get("type") or b'""')
    except msgspec.DecodeError:  # pragma: no cover - checked by call_result already
        return "?"
    return kind if isinstance(kind, str) else "?"


def _mime(block: dict[str, msgspec.Raw]) -> str | None:
    raw = block.get("mimeType")
    if raw is None or len(raw) > 256:
        return None
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError:  # pragma: no cover
        return None
    return value if isinstance(value, str) else None


def _raw_blocks(result: ToolResult) -> list[dict[str, msgspec.Raw]]:
    if isinstance(result, PassthroughResult):
        return result.raw_blocks
    return [{key: msgspec.Raw(msgspec.json.encode(value)) for key, value in block.items()}
            for block in result.content or []]


def _size_text(size: int) -> str:
    if size >= 1 << 20:
        return f"{size / (1 << 20):.1f} MiB"
    return f"{size / 1024:.0f} KiB"


def linked(session: LinkSession, request: _Request, tool: str, outcome: CallOutcome,
           result: dict[str, Any]) -> dict[str, Any]:
    """``result`` (the agent's ``CallToolResult``), or its linked form if it is large (see the
    module docstring)."""
    settings = session.server.settings
    threshold = settings.result_link_bytes
    app_result = outcome.result
    if (threshold <= 0 or request.inline or outcome.kind is not OutcomeKind.OK or app_result is None
            or result.get("isError")):
        return result
    size = content_size(app_result)
    if size < threshold:
        return result
    blocks = _raw_blocks(app_result)
    moved = [block for block in blocks if _kind(block) != "resource_link"]
    kept = [block for block in blocks if _kind(block) == "resource_link"]
    store = session.server.result_store
    entry = store.put(request.session.token, tool, moved, size) if moved else None
    if entry is None:  # nothing to move, or larger than the whole store: inline, as without links
        return result
    kinds: dict[str, int] = {}
    for block in moved:
        kinds[_kind(block)] = kinds.get(_kind(block), 0) + 1
    mimes = {_mime(block) for block in moved} - {None}
    what = ", ".join(f"{count} {kind}{'s' if count > 1 else ''}" for kind, count in sorted(kinds.items()))
    if mimes:
        what += f" ({', '.join(sorted(m for m in mimes if m))})"
    minutes = settings.result_link_ttl / 60
    summary = (f"{tool} returned {what}, {_size_text(size)}: too large to show here, so toolbridge holds it as "
               f"the resource {entry.uri} for {minutes:.0f} min. Read it with resources/read if you need it.")
    link: dict[str, Any] = {"type": "resource_link", "uri": entry.uri, "name": f"result of {tool}",
                            "description": f"{what}, {_size_text(size)}"}
    if len(mimes) == 1:
        link["mimeType"] = next(iter(mimes))
    answer: dict[str, Any] = {
        "content": [{"type": "text", "text": summary}, link, *kept],
        "isError": False,
        "_meta": {LINK_KEY: {"uri": entry.uri, "bytes": size, "ttlS": settings.result_link_ttl}},
    }
    if "structuredContent" in result:  # stays: a client checks it against the outputSchema
        answer["structuredContent"] = result["structuredContent"]
    log.info("result_linked", session=session.label, tool=tool, bytes=size, blocks=len(moved),
             principal=request.session.token, held=len(store), held_bytes=store.bytes)
    call_log = session.server.router.call_log
    if call_log is not None:
        call_log.record(tool="result_link", app=None, instance=None, agent=session.client_name,
                        session=session.label, arguments={"tool": tool, "uri": entry.uri, "bytes": size},
                        outcome=CallOutcome(OutcomeKind.OK), duration_ms=0.0)
    return answer


def read_link(session: LinkSession, uri: str, context: _Context) -> dict[str, Any]:
    """``resources/read`` of a linked result, for its session's token only."""
    started = trio.current_time()
    outcome = CallOutcome(OutcomeKind.OK)
    try:
        entry = session.server.result_store.read(uri, session.token)
    except ResourceError as exc:
        outcome = CallOutcome(exc.kind, exc.message)
        raise RpcError(exc.code, exc.message, {"uri": uri[:2048]}) from None
    finally:
        audit_request(session, "result_read", {"uri": uri[:2048]}, "toolbridge", context, outcome, started)
    result: dict[str, Any] = {"contents": list(entry.contents)}
    if context.modern:
        result.update(session.server._modern_fields(ttl=False))
    return result
