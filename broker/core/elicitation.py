"""Elicitation (protocol.md section 13): inside a call, an app asks the agent's user for input.

Theory of operation
-------------------
An app sends ``elicit`` for one of its calls in flight (the link checks the call is that
link's, ``broker.daemon.links``); :func:`start` checks the request — at most one pending per
call, a message of bounded size, and either a URL (``mode: "url"``) or a form whose
``requestedSchema`` is MCP's restricted flat schema (:func:`check_schema`: an object of
primitive properties, MCP specification 2025-11-25 and 2026-07-28, client/elicitation,
"Requested Schema") — and hands a :class:`PendingElicitation` to the call's origin, if the
origin can ask a user (:class:`ElicitingOrigin`: an MCP ``tools/call``; ``broker.mcp.elicitation``
asks with ``elicitation/create`` in the handshake era and with an input-required result in
2026-07-28). Any other origin (``toolbridge call``, code mode, an uplink or NATS caller) cannot,
and the app hears ``elicitation_unsupported`` at once: it never waits for an answer that cannot come.

The pending elicitation is the call's (``Call.elicitation``) until :func:`answer` or
:func:`fail` sends the app its one ``elicitResult`` (only while the call is live: an answer for
a call that ended is dropped). Each elicitation leaves one call-log row, tool ``elicitation``,
with the tool's name and the mode as its arguments — never the message, the schema or the
user's answers — and one log line with the action.

The call's deadline keeps running while the user answers (the agent set it); how long an
origin waits for the user is ``elicitation_timeout`` at most, and never past the deadline.
Nothing here does I/O: :func:`answer` queues the reply on the call's link without waiting.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any, Final, Protocol

import attrs
import msgspec
import structlog
import trio

from app_client.protocol import Elicit, ElicitResult

from ..errors import BrokerError
from .outcome import CallOutcome, OutcomeKind

if TYPE_CHECKING:
    from .calllog import CallLog
    from .calls import Call

log = structlog.get_logger("toolbridge.elicitation")

__all__ = [
    "ACTIONS", "ElicitError", "ElicitingOrigin", "PendingElicitation", "answer", "check_content", "check_schema",
    "fail", "start",
]

#: The user's possible answers (MCP ElicitResult.action).
ACTIONS: Final = frozenset({"accept", "decline", "cancel"})
#: Characters of an elicitation's message, bytes of its schema (as JSON), properties in it.
MAX_MESSAGE_CHARS: Final = 4000
MAX_SCHEMA_BYTES: Final = 32 * 1024
MAX_PROPERTIES: Final = 64
MAX_URL_CHARS: Final = 2048
#: Bytes of the user's answer (its ``content`` as JSON) relayed to the app.
MAX_CONTENT_BYTES: Final = 256 * 1024
_STRING_FORMATS: Final = frozenset({"email", "uri", "date", "date-time"})
_PRIMITIVE_KEYS: Final = {
    "string": {"type", "title", "description", "minLength", "maxLength", "format", "default", "enum", "enumNames",
               "oneOf"},
    "number": {"type", "title", "description", "minimum", "maximum", "default"},
    "integer": {"type", "title", "description", "minimum", "maximum", "default"},
    "boolean": {"type", "title", "description", "default"},
    "array": {"type", "title", "description", "minItems", "maxItems", "items", "default"},
}
_NAME: Final = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_encoder: Final = msgspec.json.Encoder()


class ElicitError(BrokerError):
    """Why an elicitation could not be asked or answered: ``code`` is the app's ``errorCode``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@attrs.define(eq=False)
class PendingElicitation:
    """One ``elicit`` on its way to the user (``Call.elicitation`` while it waits)."""

    call: Call
    elicit_id: int
    mode: str
    #: The MCP ``elicitation/create`` params (``mode``, ``message``, ``requestedSchema`` or ``url``).
    params: dict[str, Any]
    call_log: CallLog | None
    #: The app's own name for the question (``Elicit.inputKey``; None: the origin names it).
    key: str | None = None
    started: float = attrs.Factory(time.perf_counter)
    done: bool = False
    #: Told when it ends (answered, failed, or its call ended): the origin's clean-up.
    on_end: list[Any] = attrs.Factory(list)

    @property
    def schema(self) -> dict[str, Any] | None:
        schema = self.params.get("requestedSchema")
        return schema if isinstance(schema, dict) else None


class ElicitingOrigin(Protocol):
    """A call origin that can ask its user (an MCP ``tools/call``)."""

    def call_elicit(self, call: Call, pending: PendingElicitation) -> None:
        """Ask; the answer comes later through :func:`answer` / :func:`fail`. Raises
        :class:`ElicitError` when it cannot ask (the client lacks the capability, ...)."""


def check_schema(schema: Any) -> str | None:
    """What is wrong with a form's ``requestedSchema`` (None: it is MCP's restricted subset).

    Flat: ``{"type": "object", "properties": {name: primitive}, "required": [names]}``, each
    primitive a string (``format`` email, uri, date, date-time; an ``enum`` or ``oneOf`` of
    ``{const, title}``), a number or integer, a boolean, or an array of enum strings
    (multi-select). Nothing nested, no references.
    """
    if not isinstance(schema, dict):
        return "requestedSchema must be a JSON object"
    if len(_encoder.encode(schema)) > MAX_SCHEMA_BYTES:
        return f"requestedSchema is over {MAX_SCHEMA_BYTES} bytes"
    if schema.get("type") != "object":
        return 'requestedSchema must have "type": "object"'
    extra = set(schema) - {"type", "properties", "required", "title", "description", "$schema"}
    if extra:
        return f"requestedSchema may not use {', '.join(sorted(extra))} (a flat object of primitive properties)"
    properties = schema.get("properties", {})
    if not isinstance(properties, dict) or not properties:
        return "requestedSchema needs a non-empty \"properties\" object"
    if len(properties) > MAX_PROPERTIES:
        return f"requestedSchema has {len(properties)} properties; at most {MAX_PROPERTIES}"
    for name, prop in properties.items():
        problem = _check_property(name, prop)
        if problem is not None:
            return problem
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) and r in properties for r in required):
        return "requestedSchema's \"required\" must list names of its properties"
    return None


def _check_property(name: str, prop: Any) -> str | None:
    if not _NAME.match(name):
        return f"property names are 1-64 letters, digits, '_', '-' or '.' (got {name[:80]!r})"
    if not isinstance(prop, dict):
        return f"property {name!r} must be an object"
    kind = prop.get("type")
    allowed = _PRIMITIVE_KEYS.get(kind) if isinstance(kind, str) else None
    if allowed is None:
        return (f"property {name!r} must have type string, number, integer, boolean or array "
                "(nested objects are not allowed)")
    extra = set(prop) - allowed
    if extra:
        return f"property {name!r} may not use {', '.join(sorted(extra))}"
    if kind == "string" and "format" in prop and prop["format"] not in _STRING_FORMATS:
        return f"property {name!r}: format must be one of {', '.join(sorted(_STRING_FORMATS))}"
    if "enum" in prop and not (isinstance(prop["enum"], list) and all(isinstance(v, str) for v in prop["enum"])):
        return f"property {name!r}: enum must be a list of strings"
    if "oneOf" in prop and not _is_titled_enum(prop["oneOf"]):
        return f"property {name!r}: oneOf must be a list of {{const, title}} string options"
    if kind == "array":
        items = prop.get("items")
        if not isinstance(items, dict) or not (
                (items.get("type") == "string" and isinstance(items.get("enum"), list)
                 and all(isinstance(v, str) for v in items["enum"]))
                or _is_titled_enum(items.get("anyOf"))):
            return f"property {name!r}: an array is a multi-select of string options (items with enum or anyOf)"
    return None


def _is_titled_enum(options: Any) -> bool:
    return isinstance(options, list) and bool(options) and all(
        isinstance(o, dict) and isinstance(o.get("const"), str) and set(o) <= {"const", "title"} for o in options)


def check_content(schema: dict[str, Any] | None, content: Any) -> str | None:
    """What is wrong with the user's accepted ``content`` for a form (None: it fits).

    The client validates it too (the specification asks it to); the broker checks the shape
    the app relies on: an object of the schema's properties with values of their types, the
    required ones present, and a bounded size.
    """
    if content is None:
        content = {}
    if not isinstance(content, dict):
        return "the answer's content must be an object"
    if len(_encoder.encode(content)) > MAX_CONTENT_BYTES:
        return f"the answer's content is over {MAX_CONTENT_BYTES} bytes"
    if schema is None:
        return None
    properties: dict[str, Any] = schema.get("properties", {})
    for name in schema.get("required", []):
        if name not in content:
            return f"the answer lacks the required field {name!r}"
    for name, value in content.items():
        prop = properties.get(name)
        if prop is None:
            return f"the answer has a field the form did not ask for: {name[:80]!r}"
        if not _fits(prop.get("type"), value):
            return f"the answer's field {name!r} is not a {prop.get('type')}"
    return None


def _fits(kind: Any, value: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return False


def params_of(message: Elicit) -> dict[str, Any]:
    """The MCP ``elicitation/create`` params for an app's ``elicit``; ElicitError ``invalid_elicit``."""
    if not message.message or len(message.message) > MAX_MESSAGE_CHARS:
        raise ElicitError("invalid_elicit", f"an elicitation needs a message of 1-{MAX_MESSAGE_CHARS} characters")
    if message.input_key is not None and not _NAME.match(message.input_key):
        raise ElicitError("invalid_elicit", "inputKey is 1-64 letters, digits, '_', '-' or '.'")
    if message.mode == "form":
        problem = check_schema(message.requested_schema)
        if problem is not None:
            raise ElicitError("invalid_elicit", problem)
        return {"mode": "form", "message": message.message, "requestedSchema": message.requested_schema}
    if message.mode == "url":
        url = message.url
        if not isinstance(url, str) or len(url) > MAX_URL_CHARS or not url.startswith(("https://", "http://")):
            raise ElicitError("invalid_elicit", f"a url elicitation needs an http(s) url of at most {MAX_URL_CHARS} "
                              "characters")
        return {"mode": "url", "message": message.message, "url": url}
    raise ElicitError("invalid_elicit", f"mode must be form or url, not {message.mode[:40]!r}")


def start(call: Call, message: Elicit, call_log: CallLog | None) -> None:
    """The app asked, inside ``call`` (sent over the link the ``elicit`` came on): ask its origin,
    or answer the app at once with why not."""
    mode = message.mode if message.mode in ("form", "url") else "invalid"  # the log gets no app text
    pending = PendingElicitation(call, message.elicit_id, mode, {}, call_log)
    current: PendingElicitation | None = call.elicitation
    if current is not None and not current.done:
        _reply(call, message.elicit_id, error=ElicitError(
            "elicitation_pending", "this call already waits for an answer to another elicitation; ask one at a time"))
        return
    try:
        pending.params = params_of(message)
        pending.key = message.input_key
        ask = getattr(call.origin, "call_elicit", None)
        if ask is None:
            raise ElicitError("elicitation_unsupported", "this call did not come from an MCP agent that can ask its "
                              "user (toolbridge call, code mode, an uplink or NATS caller): go on without the answer")
        call.elicitation = pending
        ask(call, pending)
    except ElicitError as exc:
        call.elicitation = None
        pending.done = True
        _record(pending, "error", exc.code)
        _reply(call, message.elicit_id, error=exc)
        return
    log.info("elicitation_asked", tool=call.name, correlation_id=call.correlation_id, mode=pending.mode)


def answer(pending: PendingElicitation, action: str, content: dict[str, Any] | None = None) -> bool:
    """The user answered: tell the app (False if it was answered already or its call ended)."""
    if not _end(pending):
        return False
    _record(pending, action, None)
    _reply(pending.call, pending.elicit_id, action=action, content=content if action == "accept" else None)
    return True


def fail(pending: PendingElicitation, error: ElicitError) -> bool:
    """It could not be answered (timeout, the agent's error): tell the app ``error.code``."""
    if not _end(pending):
        return False
    _record(pending, "error", error.code)
    _reply(pending.call, pending.elicit_id, error=error)
    return True


def call_ended(pending: PendingElicitation | None) -> None:
    """The call ended while ``pending`` waited: nobody is told, the origin cleans up."""
    if pending is not None and _end(pending):
        _record(pending, "call_ended", None)


def _end(pending: PendingElicitation) -> bool:
    if pending.done:
        return False
    pending.done = True
    if pending.call.elicitation is pending:
        pending.call.elicitation = None
    for callback in pending.on_end:
        try:
            callback()
        except Exception:  # an origin's clean-up must not break the link reader
            log.exception("elicitation_cleanup_failed")
    pending.on_end.clear()
    return True


def _reply(call: Call, elicit_id: int, *, action: str = "cancel", content: dict[str, Any] | None = None,
           error: ElicitError | None = None) -> None:
    if call.done or call.link is None:
        return  # the call ended: the app sends nothing more for it and needs no answer
    call.link.send_reliable_nowait(ElicitResult(
        correlation_id=call.correlation_id, elicit_id=elicit_id, action=action, content=content,
        error_code=error.code if error else None, error=error.message if error else None))


def _record(pending: PendingElicitation, action: str, code: str | None) -> None:
    """The call-log row and log line (the tool and the mode; never the question or the answer)."""
    call = pending.call
    duration_ms = round((time.perf_counter() - pending.started) * 1000, 3)
    instance = call.tool.instance
    if code is None:
        kind = OutcomeKind.OK if action in ACTIONS else OutcomeKind.CANCELLED
        outcome = CallOutcome(kind, f"the user chose {action}" if action in ACTIONS else "the call ended first")
    else:
        kind = OutcomeKind.TIMEOUT if code == "elicitation_timeout" else OutcomeKind.CANCELLED
        outcome = CallOutcome(kind, code)
    log.info("elicitation", tool=call.name, correlation_id=call.correlation_id, mode=pending.mode,
             action=action, code=code, duration_ms=duration_ms)
    if pending.call_log is not None:
        pending.call_log.record(tool="elicitation", app=instance.app_name, instance=instance.instance_id,
                                agent=call.caller.agent, session=call.caller.session,
                                arguments={"tool": call.name, "mode": pending.mode}, outcome=outcome,
                                duration_ms=duration_ms)


def seconds_left(call: Call, limit: float) -> float:
    """How long an origin may wait for the user: ``limit``, and never past the call's deadline."""
    return max(0.0, min(limit, call.deadline - trio.current_time()))
