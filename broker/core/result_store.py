"""Large results as links: the daemon-held results an agent reads with ``resources/read``.

Theory of operation
-------------------
A ``tools/call`` result whose content is ``result_link_bytes`` of JSON or more (1 MiB by
default; its size is the length of the app's raw content, :mod:`broker.core.passthrough`, so
nothing is decoded to know it) is not put in the agent's context. The MCP session
(``broker.mcp.bigresults``) asks :meth:`ResultStore.put` to keep its content blocks and answers
with a short text summary and one ``resource_link`` block to ``toolbridge-result://<id>``
(``resource_link`` blocks of the result itself stay inline; ``structuredContent`` stays inline
too: a client validates it against the tool's outputSchema). The id is 128 random bits.

The resource's contents are the result's blocks, one content each, as MCP's
``resources/read`` has them: a text block becomes ``{uri, mimeType: "text/plain", text}``, an
image or audio block ``{uri, mimeType, blob}`` (its base64 ``data`` *is* the blob), an
embedded resource its own contents. The values are the app's raw JSON bytes, so a read returns
exactly the bytes the app sent. They are *copied* out of the app's line when the entry is made
(:func:`_own`): a view would keep the whole line (and whatever else shares its buffer) alive,
so holding a result costs what it serves, which is what the budget counts.

Each entry belongs to the principal that made the call — the name of the token its agent
presented (``Session.token``, set by the transport when it opens the agent's session) — and
only that principal can read it: for anyone else, and after it expired or was evicted, the
answer is the same "unknown resource" error as for an id that never existed, so a link's
existence leaks nothing. Entries live ``result_link_ttl`` seconds (trio's clock) and all of them
together hold at most ``result_link_store_bytes``: the least recently used go first; a result
larger than the whole budget is not linked (it is answered inline, as it would be without
links). Expired entries are dropped whenever the store is used (a put or a read); an idle
daemon keeps at most the budget until then. Nothing is written to disk.

A call opts out with ``_meta: {"toolbridge/inlineResult": true}`` in its ``tools/call``
params (:data:`INLINE_KEY`).
"""

from __future__ import annotations

import collections
import secrets
from typing import Any, Final

import attrs
import msgspec
import trio

from .resources import ResourceError

__all__ = ["INLINE_KEY", "LINK_KEY", "URI_PREFIX", "ResultStore", "StoredResult", "is_result_uri"]

#: ``tools/call`` ``params._meta`` key: true keeps this call's result inline (no link).
INLINE_KEY: Final = "toolbridge/inlineResult"
#: ``_meta`` key of a linked result: ``{uri, bytes, ttlS}``.
LINK_KEY: Final = "toolbridge/resultLink"
URI_PREFIX: Final = "toolbridge-result://"


def is_result_uri(uri: object) -> bool:
    return isinstance(uri, str) and uri.startswith(URI_PREFIX)


@attrs.define(eq=False)
class StoredResult:
    uri: str
    principal: str | None
    tool: str
    #: ``resources/read`` contents, their values raw JSON (``msgspec.Raw``) where they came so.
    contents: list[Any]
    size: int
    expires_at: float


def _unknown(uri: str) -> ResourceError:
    # One wording for a link that never existed, expired, was evicted, or is someone else's.
    return ResourceError(f"unknown resource {uri[:200]!r}: no such result is held (linked results are kept "
                         "for a limited time and only for the token that made the call); call the tool again")


class ResultStore:
    """Linked results by URI, least recently used first (see the module docstring)."""

    def __init__(self, *, max_bytes: int, ttl: float) -> None:
        self.max_bytes = max_bytes
        self.ttl = ttl
        self._entries: collections.OrderedDict[str, StoredResult] = collections.OrderedDict()
        #: Bytes held (the sum of the entries' ``size``).
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, principal: str | None, tool: str, blocks: list[dict[str, msgspec.Raw]],
            size: int) -> StoredResult | None:
        """Keep ``blocks`` (a result's content, values raw) for ``principal``; None if ``size``
        exceeds the whole budget (the caller answers inline)."""
        if size > self.max_bytes:
            return None
        now = trio.current_time()
        self._expire(now)
        while self._entries and self.bytes + size > self.max_bytes:
            _, oldest = self._entries.popitem(last=False)
            self.bytes -= oldest.size
        uri = URI_PREFIX + secrets.token_hex(16)
        entry = StoredResult(uri, principal, tool, [_content(uri, block) for block in blocks], size,
                             now + self.ttl)
        self._entries[uri] = entry
        self.bytes += size
        return entry

    def read(self, uri: str, principal: str | None) -> StoredResult:
        """The entry for ``uri`` if ``principal`` may read it; ResourceError (unknown) otherwise."""
        self._expire(trio.current_time())
        entry = self._entries.get(uri)
        if entry is None or entry.principal != principal:
            raise _unknown(uri)
        self._entries.move_to_end(uri)
        return entry

    def _expire(self, now: float) -> None:
        entries = self._entries  # in order of use, not of expiry: check them all (a few hundred at most)
        for uri in [uri for uri, entry in entries.items() if entry.expires_at <= now]:
            self.bytes -= entries.pop(uri).size


_TEXT_PLAIN: Final = msgspec.Raw(b'"text/plain"')


def _content(uri: str, block: dict[str, msgspec.Raw]) -> Any:
    """One result block as a ``resources/read`` content (values kept raw, copied: :func:`_own`)."""
    kind = bytes(block.get("type") or b"")
    if kind == b'"text"':
        return {"uri": uri, "mimeType": _TEXT_PLAIN, "text": _own(block["text"])}
    if kind in (b'"image"', b'"audio"'):
        return {"uri": uri, "mimeType": _own(block["mimeType"]), "blob": _own(block["data"])}
    return _own(block["resource"])  # an embedded resource: its own contents (checked: an object)


def _own(value: msgspec.Raw) -> msgspec.Raw:
    """``value``'s bytes in a buffer of their own, not a view that keeps the app's line alive."""
    return msgspec.Raw(bytes(value))
