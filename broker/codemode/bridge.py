"""The NDJSON bridge between the daemon and one sandboxed program, without any I/O.

Theory of operation
-------------------
The sandbox's stdout is the program's only way out. Everything on it is untrusted: a
program can write any bytes there (``Deno.stdout.write``), not just what the prelude sends.
:class:`BridgeReader` takes those bytes (:meth:`~BridgeReader.receive_data`) and yields
decoded messages (:meth:`~BridgeReader.next_message`), one JSON object a line, and raises
:class:`BridgeViolation` — after which the run is ended and the sandbox killed — for a line
over the size limit, anything that is not one of the three messages below, a call id used
twice, or any message after the final one. Nothing here imports trio; tests drive it with
plain bytes.

Sandbox → daemon (tag ``t``):

* ``{"t":"call","id":N,"tool":"App__tool","args":{...}}`` — run one tool call (``id``: a
  positive integer never used before in this run).
* ``{"t":"log","text":"..."}`` — console output (the daemon keeps a bounded amount);
  ``"truncated":true`` on the last one when the prelude cut the output at the limit itself.
* ``{"t":"done","ok":true,"value":...}`` or ``{"t":"done","ok":false,"error":{"name","message","stack"}}``
  — the program's result or the error it threw; the last message of a run.

Daemon → sandbox: one ``{"t":"start","code":...,"apps":{...}}``, then one
``{"t":"reply","id":N,...}`` per call the program made, and only for those: the daemon never
sends an id it did not receive, so the program cannot obtain an answer to a call it did not
make, and a "reply" written *by* the program is refused here (it is not a sandbox message).
"""

from __future__ import annotations

from typing import Any, Final, Union

import msgspec

from ..errors import BrokerError

__all__ = [
    "BridgeReader", "BridgeViolation", "CallMessage", "LogMessage", "DoneMessage", "SandboxMessage",
    "encode_start", "encode_reply", "MAX_CALL_ID",
]

#: Call ids are JavaScript safe integers.
MAX_CALL_ID: Final = 2**53 - 1


class BridgeViolation(BrokerError):
    """The sandbox wrote something that is not a valid bridge message; the run is ended."""


class CallMessage(msgspec.Struct, tag="call", tag_field="t", forbid_unknown_fields=True):
    id: int
    tool: str
    args: Any = None


class LogMessage(msgspec.Struct, tag="log", tag_field="t", forbid_unknown_fields=True):
    text: str
    truncated: bool = False


class DoneMessage(msgspec.Struct, tag="done", tag_field="t", forbid_unknown_fields=True):
    ok: bool
    value: Any = None
    error: Any = None


SandboxMessage = Union[CallMessage, LogMessage, DoneMessage]
_decoder: Final = msgspec.json.Decoder(SandboxMessage)
_encoder: Final = msgspec.json.Encoder()


class BridgeReader:
    """Bytes from the sandbox's stdout in, validated messages out (see the module docstring)."""

    def __init__(self, max_line_bytes: int) -> None:
        self.max_line_bytes = max_line_bytes
        self._buffer = bytearray()
        #: Where the next line starts in ``_buffer``: consumed lines are dropped once per
        #: ``receive_data``, not one by one (that would move the buffer for every line).
        self._start = 0
        #: Bytes received after the last newline (the line still being received).
        self._tail = 0
        self._seen_ids: set[int] = set()
        self.finished = False

    def receive_data(self, data: bytes | bytearray) -> None:
        if self._start:
            del self._buffer[: self._start]
            self._start = 0
        self._buffer += data
        # A line may not grow past the limit while we wait for its end: count the bytes after
        # the last newline (looking only at the new data, so a long line costs linear time).
        last = data.rfind(b"\n")
        self._tail = len(data) - last - 1 if last >= 0 else self._tail + len(data)
        if self._tail > self.max_line_bytes:
            raise BridgeViolation(f"a bridge message is longer than {self.max_line_bytes} bytes")

    def next_message(self) -> SandboxMessage | None:
        """The next complete message, or None until more data arrives."""
        start = self._start
        end = self._buffer.find(b"\n", start)
        if end < 0:
            return None
        if end - start > self.max_line_bytes:
            raise BridgeViolation(f"a bridge message is longer than {self.max_line_bytes} bytes")
        line = bytes(self._buffer[start:end])
        self._start = end + 1
        if self.finished:
            raise BridgeViolation("the program wrote to the bridge after its result")
        try:
            message: SandboxMessage = _decoder.decode(line)
        except msgspec.DecodeError as exc:
            raise BridgeViolation(
                "the program wrote something to stdout that is not a bridge message "
                "(use console.log for output; stdout is the bridge)"
            ) from exc
        except RecursionError:  # msgspec's answer to JSON nested thousands deep
            raise BridgeViolation(
                "the program wrote a bridge message nested too deeply to decode "
                "(tool arguments and results must be plain JSON of reasonable depth)"
            ) from None
        if isinstance(message, CallMessage):
            if not 0 < message.id <= MAX_CALL_ID or message.id in self._seen_ids:
                raise BridgeViolation(f"call id {message.id} is invalid or was used before")
            self._seen_ids.add(message.id)
        elif isinstance(message, DoneMessage):
            self.finished = True
        return message


def encode_start(code: str, apps: dict[str, dict[str, str]], max_output_bytes: int) -> bytes:
    """The first line the sandbox reads: the program and the ``apps`` it may call."""
    return _encoder.encode({"t": "start", "code": code, "apps": apps, "maxOutput": max_output_bytes}) + b"\n"


def encode_reply(call_id: int, *, value: Any = None, kind: str | None = None, message: str = "",
                 tool: str = "") -> bytes:
    """The answer to call ``call_id``: ``value`` when ``kind`` is None, else an error of that kind."""
    reply: dict[str, Any] = {"t": "reply", "id": call_id}
    if kind is None:
        reply.update(ok=True, value=value)
    else:
        reply.update(ok=False, kind=kind, message=message, tool=tool)
    return _encoder.encode(reply) + b"\n"
