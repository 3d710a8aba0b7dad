"""A broker's own tool list as it travels over NATS: digest, pages, services-API endpoints.

Theory of operation
-------------------
A :class:`Catalog` is an immutable snapshot of the tools this broker offers (never the ones it
learned over NATS), built on trio whenever they change. Each tool is encoded once, on its own
(:data:`ToolRaw` bytes); the **digest** is a SHA-256 over those encodings, each prefixed by its
length, so a receiver that gets the same bytes (inline in an announcement, or page by page
through ``toolbridge.list.<NAME>``) computes the same digest without re-encoding anything.

Nothing here touches trio or NATS: the snapshot is read on the NATS client's asyncio thread too
(it answers list requests and ``$SRV.INFO`` there, without a trip through the daemon's loop),
which is safe because a published snapshot is never changed, only replaced.

**Pages.** A NATS message must fit the server's ``max_payload`` (1 MB by default), so a list
request is answered with one page of whole tools that fits ``budget`` bytes; a tool that alone
is bigger than a page is left out of the list (and logged by the caller).

**Services-API endpoints.** :meth:`Catalog.endpoints` is what ``$SRV.INFO`` lists: one
endpoint per tool (its call subject) with the tool's description and JSON schemas as endpoint
metadata (strings, as the services API requires). When everything does not fit ``budget``, the
schemas are left out (the metadata says where to get them: the ``list`` endpoint), then
endpoints past the budget; the service's metadata tells how many were listed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, Final

import attrs
import msgspec

from app_client.protocol import ToolSpec

PREFIX: Final = "toolbridge"
#: Room left in a page or an INFO answer for its envelope (names, digest, counters, headers).
ENVELOPE_BYTES: Final = 4096
#: Descriptions in the services-API metadata are cut to this many characters when space is short.
SHORT_DESCRIPTION: Final = 200

_encode = msgspec.json.Encoder().encode


def call_subject(broker: str, tool: str) -> str:
    return f"{PREFIX}.call.{broker}.{tool}"


def list_subject(broker: str) -> str:
    return f"{PREFIX}.list.{broker}"


def digest_of(raws: Sequence[bytes]) -> str:
    """The digest of a tool list given each tool's own JSON encoding, in order."""
    digest = hashlib.sha256()
    for raw in raws:
        digest.update(len(raw).to_bytes(8, "big"))
        digest.update(raw)
    return digest.hexdigest()


class ListRequest(msgspec.Struct, forbid_unknown_fields=False):
    """The body of a request on ``toolbridge.list.<NAME>`` (empty: page 0)."""

    page: int = 0


class ToolPage(msgspec.Struct, forbid_unknown_fields=False):
    """The answer to a list request: whole tools, each as its owner encoded it."""

    broker: str
    digest: str
    page: int
    pages: int
    tools: list[msgspec.Raw]


_page_encoder = msgspec.json.Encoder()
page_decoder = msgspec.json.Decoder(ToolPage)
list_request_decoder = msgspec.json.Decoder(ListRequest)
tool_decoder = msgspec.json.Decoder(ToolSpec)


@attrs.define(eq=False)
class ToolStat:
    """Calls of one tool from other brokers, for ``$SRV.STATS`` (counted on trio, read on asyncio)."""

    num_requests: int = 0
    num_errors: int = 0
    processing_time: int = 0  # nanoseconds, all calls
    last_error: str = ""


@attrs.frozen(eq=False)
class Catalog:
    """This broker's own tools, encoded once (see the module docstring)."""

    broker: str
    tools: tuple[ToolSpec, ...]
    raws: tuple[bytes, ...]
    digest: str
    #: Per tool (by name), its calls from other brokers; carried over when the list changes.
    stats: dict[str, ToolStat]
    #: Tools too big for any page, left out of ``tools`` (names only).
    oversized: tuple[str, ...] = ()
    _cache: dict[str, Any] = attrs.field(factory=dict)

    @classmethod
    def build(cls, broker: str, tools: Sequence[ToolSpec], budget: int,
              previous: Catalog | None = None) -> Catalog:
        kept: list[ToolSpec] = []
        raws: list[bytes] = []
        oversized: list[str] = []
        for tool in tools:
            raw = _encode(tool)
            if len(raw) + ENVELOPE_BYTES > budget:
                oversized.append(tool.name)
                continue
            kept.append(tool)
            raws.append(raw)
        old = previous.stats if previous is not None else {}
        stats = {tool.name: old.get(tool.name) or ToolStat() for tool in kept}
        return cls(broker, tuple(kept), tuple(raws), digest_of(raws), stats, tuple(oversized))

    @property
    def size(self) -> int:
        """The tools' encoded size, in bytes."""
        return sum(len(raw) for raw in self.raws)

    def page_bounds(self, budget: int) -> list[tuple[int, int]]:
        """``[start, end)`` of each page, whole tools, each page within ``budget`` bytes."""
        key = f"bounds:{budget}"
        bounds: list[tuple[int, int]] | None = self._cache.get(key)
        if bounds is None:
            bounds = []
            start, size = 0, ENVELOPE_BYTES
            for index, raw in enumerate(self.raws):
                if index > start and size + len(raw) + 1 > budget:
                    bounds.append((start, index))
                    start, size = index, ENVELOPE_BYTES
                size += len(raw) + 1
            bounds.append((start, len(self.raws)))
            self._cache[key] = bounds
        return bounds

    def page(self, number: int, budget: int) -> bytes:
        """Page ``number`` (clamped to the last one) of the list, encoded."""
        bounds = self.page_bounds(budget)
        number = min(max(number, 0), len(bounds) - 1)
        start, end = bounds[number]
        return _page_encoder.encode(ToolPage(self.broker, self.digest, number, len(bounds),
                                             [msgspec.Raw(raw) for raw in self.raws[start:end]]))

    def endpoints(self, budget: int) -> tuple[list[dict[str, Any]], dict[str, str]]:
        """The services-API endpoints of the tools (dicts like nats.micro's ``EndpointInfo``)
        within ``budget`` bytes, and service metadata saying how many are listed."""
        key = f"endpoints:{budget}"
        cached: tuple[list[dict[str, Any]], dict[str, str]] | None = self._cache.get(key)
        if cached is None:
            cached = self._endpoints(budget)
            self._cache[key] = cached
        return cached

    def _endpoints(self, budget: int) -> tuple[list[dict[str, Any]], dict[str, str]]:
        # Sized as nats.micro sends them (json.dumps: ASCII only, ", " between items).
        full = [self._endpoint(tool, schemas=True) for tool in self.tools]
        sizes = [len(json.dumps(entry)) + 2 for entry in full]
        room = budget - ENVELOPE_BYTES
        schemas = "yes"
        if sum(sizes) > room:
            schemas = f"no: too big, see {list_subject(self.broker)}"
            full = [self._endpoint(tool, schemas=False) for tool in self.tools]
            sizes = [len(json.dumps(entry)) + 2 for entry in full]
        listed: list[dict[str, Any]] = []
        used = 0
        for entry, size in zip(full, sizes):
            if used + size > room:
                break
            listed.append(entry)
            used += size
        return listed, {"tools": str(len(self.tools)), "tools_listed": str(len(listed)), "schemas": schemas,
                        "tools_digest": self.digest}

    def _endpoint(self, tool: ToolSpec, *, schemas: bool) -> dict[str, Any]:
        metadata = {"description": tool.description if schemas else tool.description[:SHORT_DESCRIPTION]}
        if tool.title:
            metadata["title"] = tool.title
        if schemas:
            metadata["input_schema"] = _encode(tool.input_schema).decode()
            if tool.output_schema is not None:
                metadata["output_schema"] = _encode(tool.output_schema).decode()
        return {"name": tool.name, "subject": call_subject(self.broker, tool.name), "queue_group": "q",
                "metadata": metadata}


def decode_tools(raws: Sequence[msgspec.Raw | bytes]) -> list[ToolSpec]:
    """Each raw tool decoded (raises ``msgspec.DecodeError`` / ``ValidationError``)."""
    return [tool_decoder.decode(raw) for raw in raws]
