"""Large tool results passed through without decoding their content: :class:`PassthroughResult`.

Theory of operation
-------------------
A ``toolResponse`` line of :data:`PASSTHROUGH_LINE` bytes or more (a 5 MiB image is ~7 MB of
base64 in one line) is decoded by :func:`decode_tool_response` with its ``content`` kept as
``msgspec.Raw``: the JSON bytes exactly as the app sent them, a view of the line, never built
into Python strings. Its blocks are only delimited (``raw_blocks``: each block's keys with their
values still raw views), which is enough to check them (``broker.mcp.results``), to size them
and to summarise them for the call log without a copy. Everything else in the result (success,
error, errorKind, structuredContent, data) is decoded as usual, so the router and every check
that needs those fields see them as before.

The agent's response is then written as three parts, its envelope around the app's content
bytes (``broker.mcp.bigresults``), so the line read from the app is the only copy of the payload
the daemon holds. Consumers that need the content as objects (code mode, an uplink, a NATS
link) call :func:`plain`, which decodes it (the old cost, only for them).

Back-pressure (:class:`PayloadBudget`, the router's ``payloads``): the parts of a response
queued for an agent's writer are counted until they are freed (sent, or dropped with their
connection); while more than its limit is queued, app links read no further line — the app's
data waits in its socket, not in the daemon — so ten 5 MiB results in flight at once hold a few
lines, not ten, when the agent reads more slowly than the app writes.

The call log summarises a large result's images in its writer thread (a base64 decode and a
SHA-256, ~40 ms for 5 MiB) and holds the result meanwhile; so that one link's next large line
is not read while its last one is still held there, the link waits for that result to be freed
(:func:`freed`, bounded by its caller) before it reads on.

A line this function cannot read the fast way (not a toolResponse, or content that is not an
array of objects) returns None: the caller decodes it as any line, which also words the error.
"""

from __future__ import annotations

import weakref
from typing import Any, Final

import msgspec
import trio

from app_client.protocol import ToolResponse, ToolResult

__all__ = ["PASSTHROUGH_LINE", "PayloadBudget", "freed", "PassthroughResult", "content_size", "decode_tool_response", "plain"]

#: toolResponse lines at least this long keep their content raw.
PASSTHROUGH_LINE: Final = 64 * 1024


class PassthroughResult(ToolResult, weakref=True):
    """A :class:`ToolResult` whose ``content`` (None here) is kept as the app's JSON bytes.

    Not for the wire as it is: encode :func:`plain` of it (its extra fields are the daemon's).
    """

    #: The app's ``content`` array, exactly the bytes it sent (a view of its line).
    raw_content: msgspec.Raw = msgspec.Raw()
    #: The same array delimited: each block's keys, with its values still raw views.
    raw_blocks: list[dict[str, msgspec.Raw]] = []


class _Result(msgspec.Struct, rename="camel"):
    success: bool = True
    data: Any = None
    error: str | None = None
    content: msgspec.Raw = msgspec.Raw()
    structured_content: dict[str, Any] | None = None
    error_kind: str | None = None
    retry_after_ms: int | None = None


class _Response(msgspec.Struct, rename="camel"):
    type: str
    correlation_id: int
    result: _Result


_response: Final = msgspec.json.Decoder(_Response)
_blocks: Final = msgspec.json.Decoder(list[dict[str, msgspec.Raw]])
_content: Final = msgspec.json.Decoder(list[dict[str, Any]])
_NULL: Final = b"null"


def decode_tool_response(line: bytes | bytearray | memoryview) -> ToolResponse | None:
    """The ``toolResponse`` in ``line`` with its content raw (a :class:`PassthroughResult`), or
    None when it is not one that decodes this way (decode it as any line then)."""
    try:
        response = _response.decode(line)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):  # ValidationError included
        return None
    if response.type != "toolResponse":
        return None
    result = response.result
    raw = result.content
    blocks: list[dict[str, msgspec.Raw]] = []
    if len(raw) and bytes(memoryview(raw)[:4]) != _NULL:
        try:
            blocks = _blocks.decode(raw)  # delimits the blocks; builds no value
        except (msgspec.DecodeError, RecursionError):
            return None
    else:
        raw = msgspec.Raw()
    return ToolResponse(response.correlation_id, PassthroughResult(
        success=result.success, data=result.data, error=result.error, content=None,
        structured_content=result.structured_content, error_kind=result.error_kind,
        retry_after_ms=result.retry_after_ms, raw_content=raw, raw_blocks=blocks,
    ))


def plain(result: ToolResult, *, decode: bool = True) -> ToolResult:
    """``result`` with its content decoded: a plain :class:`ToolResult` (the one to encode).
    ``decode=False``: without its content (the other fields only)."""
    if not isinstance(result, PassthroughResult):
        return result
    content = _content.decode(result.raw_content) if decode and len(result.raw_content) else None
    return ToolResult(success=result.success, data=result.data, error=result.error, content=content,
                      structured_content=result.structured_content, error_kind=result.error_kind,
                      retry_after_ms=result.retry_after_ms)


def content_size(result: ToolResult) -> int:
    """Bytes of the result's ``content`` as JSON (exact for a passthrough; encoded otherwise)."""
    if isinstance(result, PassthroughResult):
        return len(result.raw_content)
    return len(msgspec.json.encode(result.content)) if result.content else 0


#: Bytes of large responses queued for agents beyond which app links stop reading (see above).
PAYLOAD_BUDGET: Final = 24 * 1024 * 1024


class PayloadBudget:
    """Bytes of large responses on their way to agents (see the module docstring)."""

    def __init__(self, limit: int = PAYLOAD_BUDGET) -> None:
        self.limit = limit
        #: Bytes held by tracked objects that are still alive.
        self.held = 0
        self._room = trio.Event()

    @property
    def over(self) -> bool:
        return self.held > self.limit

    def track(self, owner: object, nbytes: int) -> None:
        """Count ``nbytes`` until ``owner`` (weak-referenceable) is freed, in whatever thread."""
        self.held += nbytes
        weakref.finalize(owner, _release, trio.lowlevel.current_trio_token(), self, nbytes)

    def _released(self, nbytes: int) -> None:
        self.held -= nbytes
        if not self.over:
            self._room.set()
            self._room = trio.Event()

    async def room(self) -> None:
        """Wait until no more than the limit is held."""
        while self.over:
            await self._room.wait()


def _release(token: trio.lowlevel.TrioToken, budget: PayloadBudget, nbytes: int) -> None:
    try:
        token.run_sync_soon(budget._released, nbytes)  # thread-safe: back on the loop's thread
    except trio.RunFinishedError:
        pass


def freed(owner: object) -> trio.Event:
    """An event set (on the loop's thread) once ``owner`` (weak-referenceable) is freed."""
    event = trio.Event()
    weakref.finalize(owner, _set_soon, trio.lowlevel.current_trio_token(), event)
    return event


def _set_soon(token: trio.lowlevel.TrioToken, event: trio.Event) -> None:
    try:
        token.run_sync_soon(event.set)
    except trio.RunFinishedError:
        pass
