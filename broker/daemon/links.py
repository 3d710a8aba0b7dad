"""App links: the broker's side of one registered app connection.

Theory of operation
-------------------
After a valid ``register`` the connection becomes an :class:`AppLink`, the
:class:`~broker.core.ports.AppPort` the core sends invocations and cancels to. Its reader loop
(:meth:`AppLinks.serve_app`) handles what the app sends; a heartbeat task pings it and closes
the link when nothing at all has arrived for ``heartbeat_timeout`` — any line counts, so an app whose
GUI thread is busy but whose reader still answers pings stays alive. Bad lines get an
``error`` reply and are otherwise ignored; a bad line that names one of this link's calls
fails that call at once, unless it is a ``toolProgress`` (a broken progress report is not a
broken answer: the call goes on). A ``toolResponse`` or ``toolProgress`` is accepted only for a call
that was sent over this very link; anything else is logged and dropped. The rules (what an app
may send, which correlation ids are this link's) are the connection's sans-IO protocol machine
(``conn.protocol``, :class:`app_client.protocol.BrokerConnection`); this module does the rest.

Protocol v2: a link that negotiated version 2 offers its resources and prompts to the registry's
directory (``register``, ``setResources``, ``setPrompts``); ``resourceUpdated`` goes to the
subscribed sessions; :meth:`AppLink.read_resource` / :meth:`AppLink.get_prompt` send a request
with an id from the calls' sequence and wait for its answer in ``AppLink.reads`` (removed in a
``finally``; a late answer is ``unknown_correlation_id``). :meth:`AppLink.complete` (section 12)
is a third such request, sent only to an app that registered ``completions``. A ``log`` message
passes the registry's flood bound (``AppLogHub.admit``) and goes to the MCP request that made
the call it names (``correlationId``, through the call's origin) or, without one, to every
session that asked for app-wide log messages; its data is never written to the daemon's log.

The reader handles the last line of each read inside ``app_client.channel.write_through``: an
app answering one call at a time sends one answer per read, and the reply to the agent and the
next queued invocation for the app then go out in the reader's own step, without waking either
connection's writer (lines of a read that brought several still go through the writers, joined).

When the link ends, for whatever reason, every call in flight on it fails at once with
``app_disconnected`` (and every resource read or prompt request with it; the instance's
resources and prompts are withdrawn) and the instance enters its reconnect grace period — unless the app said
``goodbye`` first (it quit on purpose): then the instance and its names are dropped at once.

Before anything is registered the token must allow the name (``tokens``: ``app:<pattern>``
for apps, ``uplink`` for a ``register`` carrying ``via``), and a broker's uplink must not
make a loop or go too deep (``federation``, also checked on each ``addTools``).

:class:`AppLinks` is everything a link needs of the daemon (settings, tokens, registry,
router, correlation map, federation state) and the live links: the daemon builds it from its
parts, so this module never sees ``BrokerCore``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs
import structlog
import trio

from app_client.channel import write_through
from app_client.protocol import (
    MAX_RESOURCE_URI_CHARS,
    PROTOCOL_VERSION,
    AddTools,
    BadLine,
    Complete,
    CompleteResponse,
    Elicit,
    Error,
    LogMessage,
    Goodbye,
    Message,
    Ping,
    Pong,
    Register,
    Registered,
    RemoteProtocolError,
    PromptGet,
    PromptResponse,
    RemoveTools,
    ResourceRead,
    ResourceResponse,
    ResourceUpdated,
    SetPrompts,
    SetResources,
    ToolCancel,
    ToolProgress,
    ToolResponse,
    ToolsUpdated,
)

from ..federation import rules as federation
from ..federation.rules import FederationState
from ..core import elicitation
from ..core.calls import Call, CorrelationMap
from ..core.outcome import OutcomeKind
from ..core.passthrough import PassthroughResult, freed
from .connection import Connection, PeerClosed, seconds_to_ms
from ..errors import RegistrationError
from ..config.logsetup import app_text_for_log
from ..core.applog import AppLogRecord
from ..core.registry import Instance, Registry, wake_link_waiters
from ..core.resources import ResourceError, agent_uri

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..config.tokens import Authenticator
    from ..core.router import Router

log = structlog.get_logger("toolbridge.links")


@attrs.define(eq=False)
class AppLinks:
    """What app links need of the daemon, and the links that are live (``live``, by link id).

    The daemon builds one (``BrokerCore.app_links``) from its parts; every app connection runs
    in :meth:`serve_app`.
    """

    settings: Settings
    auth: Authenticator
    registry: Registry
    router: Router
    calls: CorrelationMap
    federation: FederationState
    #: The registered links, from ``registered`` until their reader ends.
    live: dict[int, AppLink] = attrs.Factory(dict)

    def serve_app(self, conn: Connection, register: Register, ended: LinkEnd) -> Awaitable[None]:
        """Run one app link from its ``register`` message until it closes.

        On the way out (however it ends) ``ended.instance`` is set to the instance whose
        reconnect grace period is to run, if any: the caller awaits :meth:`grace` for it once
        the connection is closed and outside its cancel scope. (A holder, not a return value:
        a heartbeat timeout or a stuck write cancels the connection's scope, and the grace
        period must run then too.)
        """
        # The coroutine itself, not awaited here: a frame fewer that every step of the link's
        # reader would resume (one a message).
        return _serve_app(conn, self, register, ended)

    async def grace(self, ended: LinkEnd) -> None:
        """Keep the instance's names for the grace period; drop it if it does not come back."""
        if ended.instance is not None:
            await _grace(self.registry, ended.instance)


@attrs.define(eq=False)
class LinkEnd:
    """What an ended app link leaves to do after its connection closed (see ``serve_app``)."""

    #: The instance whose grace period is to run; None: nothing (never registered, or taken over).
    instance: Instance | None = None


class AppLink:
    """One registered app connection: the :class:`~broker.core.ports.AppPort` the core sends to."""

    def __init__(self, conn: Connection, links: AppLinks) -> None:
        self.conn = conn
        self.id = conn.id
        self._links = links
        self.instance: Instance | None = None
        #: The app said ``goodbye``: its instance is dropped at once, without a grace period.
        self.said_goodbye = False
        #: Protocol v2: ``resourceRead``s sent and not answered, by correlation id.
        self.reads: dict[int, _PendingRead] = {}
        #: Protocol v2: the app answers ``complete`` (it registered ``completions``).
        self.completions = False

    @property
    def label(self) -> str:
        return self.instance.label if self.instance else "?"

    def replaced(self) -> None:
        """A new registration of the same instance took over: fail our calls, close."""
        self._links.router.fail_link(
            self.id, OutcomeKind.APP_DISCONNECTED, f"the app {self.label} re-registered; the call was lost"
        )
        self.conn.send_nowait(Error("replaced", "a new connection registered this instance", fatal=True))
        self.conn.close_after_flush("replaced by a new registration")

    def send_reliable_nowait(self, message: Message) -> bool:
        """Queue ``message`` for the app even past the queue's limit (see ``Connection``)."""
        return self.conn.send_reliable_nowait(message)

    async def read_resource(self, uri: str, timeout: float) -> list[dict[str, Any]]:
        """Protocol v2: read the app's own ``uri`` (the :class:`~broker.core.resources.ResourcePort`).

        Raises ResourceError (the agent's message) for the app's refusal, a timeout, a
        disconnect or a malformed answer.
        """
        pending = await self._request(lambda cid: ResourceRead(cid, uri, timeout_ms=seconds_to_ms(timeout)),
                                      f"reading {uri!r}", timeout)
        contents = pending.result.get("contents")
        return _checked_contents(self.label, uri, contents if isinstance(contents, list) else [])

    async def get_prompt(self, name: str, arguments: dict[str, str], timeout: float) -> dict[str, Any]:
        """Protocol v2: render the app's prompt ``name`` (``{"messages", "description"?}``)."""
        pending = await self._request(
            lambda cid: PromptGet(cid, name, arguments, timeout_ms=seconds_to_ms(timeout)),
            f"the prompt {name!r}", timeout)
        return _checked_prompt(self.label, name, pending.result)

    async def complete(self, ref: tuple[str, str], argument: str, value: str, arguments: dict[str, str],
                       timeout: float) -> dict[str, Any]:
        """Protocol v2 (section 12): the app's suggestions for ``argument`` of its prompt or
        template ``ref`` (``("prompt", name)`` / ``("uriTemplate", template)``)."""
        kind, own = ref
        pending = await self._request(
            lambda cid: Complete(cid, argument, value, prompt=own if kind == "prompt" else None,
                                 uri_template=own if kind == "uriTemplate" else None, arguments=arguments,
                                 timeout_ms=seconds_to_ms(timeout)),
            f"completing {argument[:128]!r}", timeout)
        return _checked_completion(self.label, pending.result)

    async def _request(self, make: Callable[[int], Message], what: str, timeout: float) -> _PendingRead:
        """Send a read or prompt request (an id from the calls' sequence) and wait for its answer.

        The wait is bounded by ``timeout`` plus the half second calls get, so the app's own
        message wins; a cancelled or timed-out request sends ``toolCancel``; the entry is
        removed in a ``finally``, so a late answer is dropped.
        """
        if len(self.reads) >= _MAX_READS_PER_LINK:
            raise ResourceError(f"the app {self.label} has {_MAX_READS_PER_LINK} resource or prompt requests in "
                                "flight; try again shortly", code=_BUSY, kind="busy")
        cid = self._links.calls.new_id()
        pending = _PendingRead()
        self.reads[cid] = pending
        try:
            if not self.conn.send_reliable_nowait(make(cid)):
                raise ResourceError(f"the app {self.label} disconnected; try again later", code=_BUSY,
                                    kind="app_disconnected")
            with trio.move_on_after(timeout + 0.5):
                await pending.done.wait()
            if not pending.done.is_set():
                pending.cancel_reason = "timeout"
                raise ResourceError(f"{what} from {self.label} timed out after {timeout:g} s", code=_BUSY,
                                    kind="timeout")
        finally:
            del self.reads[cid]
            if not pending.done.is_set():  # timed out or cancelled by the agent: tell the app
                self.conn.send_nowait(ToolCancel(cid, reason=pending.cancel_reason))
        if pending.error is not None:
            raise ResourceError(pending.error, code=_BUSY, kind=pending.kind)
        return pending

    def end_reads(self, message: str) -> None:
        """The link ended: every read waiting on it fails with ``message``."""
        for pending in self.reads.values():
            pending.finish(error=message, kind="app_disconnected")


#: JSON-RPC code for a read the app could not serve (MCP's "internal error" range).
_BUSY = -32603
#: ``resourceRead``s one link may have in flight (each holds an agent's request).
_MAX_READS_PER_LINK = 64


@attrs.define(eq=False)
class _PendingRead:
    done: trio.Event = attrs.Factory(trio.Event)
    error: str | None = None
    kind: str = "app_error"
    cancel_reason: str = "cancelled"
    #: The answer's fields (``contents``; ``messages`` and ``description``).
    result: dict[str, Any] = attrs.Factory(dict)

    def finish(self, *, result: dict[str, Any] | None = None, error: str | None = None,
               kind: str = "app_error") -> None:
        if not self.done.is_set():
            self.result = result or {}
            self.error, self.kind = error, kind
            self.done.set()


_ROLES = frozenset({"user", "assistant"})


def _checked_prompt(label: str, name: str, result: dict[str, Any]) -> dict[str, Any]:
    """The app's prompt messages (embedded resources' URIs agent-facing); ResourceError when malformed."""
    messages = []
    for message in result.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(message, dict) or message.get("role") not in _ROLES or not isinstance(content, dict) \
                or not isinstance(content.get("type"), str):
            raise ResourceError(f"the app {label} answered the prompt {name!r} with a message that is not "
                                "{role: user|assistant, content: {type, ...}}", code=_BUSY, kind="app_error")
        if content["type"] == "resource" and isinstance(content.get("resource"), dict):
            inner = content["resource"]
            own = inner.get("uri")
            content = {**content, "resource": _checked_contents(label, own if isinstance(own, str) else "", [inner])[0]}
        messages.append({"role": message["role"], "content": content})
    answer: dict[str, Any] = {"messages": messages}
    if isinstance(result.get("description"), str):
        answer["description"] = result["description"]
    return answer


#: MCP's bound on one completion answer's values; the longest value passed on.
_MAX_COMPLETION_VALUES = 100
_MAX_COMPLETION_CHARS = 1024


def _checked_completion(label: str, result: dict[str, Any]) -> dict[str, Any]:
    """An app's ``completeResponse`` as MCP's ``completion``: at most 100 values (the rest make
    ``hasMore``); ResourceError for a value over 1024 characters."""
    values: list[str] = result.get("values") or []
    if any(len(value) > _MAX_COMPLETION_CHARS for value in values):
        raise ResourceError(f"the app {label} answered the completion with a value over {_MAX_COMPLETION_CHARS} "
                            "characters", code=_BUSY, kind="app_error")
    total = result.get("total")
    completion: dict[str, Any] = {"values": values[:_MAX_COMPLETION_VALUES],
                                  "hasMore": bool(result.get("hasMore")) or len(values) > _MAX_COMPLETION_VALUES}
    if isinstance(total, int) and total >= len(values):
        completion["total"] = total
    return completion


def _checked_contents(label: str, uri: str, contents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The app's contents with agent-facing URIs; ResourceError when one is malformed."""
    checked = []
    for item in contents:
        text, blob = item.get("text"), item.get("blob")
        if not isinstance(text, str) and not isinstance(blob, str):
            raise ResourceError(f"the app {label} answered the read of {uri!r} with a content that has neither "
                                "a string 'text' nor a base64 'blob'", code=_BUSY, kind="app_error")
        own = item.get("uri")
        entry: dict[str, Any] = {"uri": agent_uri(label, own if isinstance(own, str) and own else uri)}
        if isinstance(item.get("mimeType"), str):
            entry["mimeType"] = item["mimeType"]
        if isinstance(text, str):
            entry["text"] = text
        else:
            entry["blob"] = blob
        checked.append(entry)
    return checked


async def _serve_app(conn: Connection, links: AppLinks, register: Register, ended: LinkEnd) -> None:
    """:meth:`AppLinks.serve_app`."""
    settings = links.settings
    bound = log.bind(conn_id=conn.id, app=register.app_name)
    if not register.token:
        await _refuse(conn, "unauthorized", "register needs a token: read it from the daemon's home directory (`toolbridge token`)")
        bound.warning("app_rejected", reason="no token")
        return
    grant = links.auth.check(register.token)
    if grant is None:
        await _refuse(conn, "unauthorized", "wrong token: read the current one with `toolbridge token`")
        bound.warning("app_rejected", reason="wrong token")
        return
    uplink = register.via is not None
    if not grant.allows_register(register.app_name, uplink=uplink):
        what = "an uplink named" if uplink else "the app name"
        await _refuse(conn, "forbidden", f"the token {grant.name!r} may not register {what} "
                      f"{register.app_name!r} (its scopes: {grant.describe()})")
        bound.warning("app_rejected", reason="token scope", token=grant.name, uplink=uplink)
        return
    try:
        federation.check_register(links.federation, register)
    except RegistrationError as exc:
        bound.warning("app_rejected", code=exc.code, reason=exc.message)
        await _refuse(conn, exc.code, exc.message)
        return
    links.auth.track(grant, conn)
    try:
        conn.protocol.check_version(register)
    except RemoteProtocolError as exc:
        await _refuse(conn, exc.code, exc.message)
        return
    link = AppLink(conn, links)
    try:
        compiled = await links.registry.compile_tools(register.tools)  # worker threads, not the loop
        instance, replaced = links.registry.register(
            link,
            app_name=register.app_name,
            instance_id=register.instance_id,
            tools=register.tools,
            max_concurrency=register.max_concurrency,
            app_version=register.app_version,
            compiled=compiled,
            token=grant.name,
        )
    except RegistrationError as exc:
        bound.warning("app_rejected", code=exc.code, reason=exc.message)
        await _refuse(conn, exc.code, exc.message)
        return
    link.instance = instance
    links.live[link.id] = link
    # `registered` is queued before the replaced link's calls fail: failing them frees admission
    # slots, which sends queued calls to this link at once, and the protocol (conn.protocol)
    # allows an invocation only after `registered`.
    registered = conn.encode(
        Registered(
            app_id=instance.app_id,
            instance_id=instance.instance_id,
            app_label=instance.label,
            tool_names=instance.tool_names(),
            heartbeat_interval_ms=seconds_to_ms(settings.heartbeat_interval),
            # Negotiated (protocol.md section 7): both sides speak the lower of the two highest.
            protocol_version=min(register.protocol_version, PROTOCOL_VERSION),
            max_line_bytes=settings.max_line_bytes,
            max_tools=settings.max_tools_per_app,
            max_schema_bytes=settings.max_schema_bytes,
            chain=links.federation.own_chain() or None,
        )
    )
    assert registered is not None  # nothing fatal was sent on this connection
    try:
        conn.queue_nowait(registered)
    except trio.WouldBlock:  # pragma: no cover - a new connection's queue is empty
        await conn.send_bytes(registered)
    if replaced is not None:
        replaced.replaced()
    if conn.protocol.version >= 2:  # protocol v2: its resources (a v1 app's fields are ignored)
        links.registry.resources.offer(instance.label, link, register.resources, register.resource_templates)
        links.registry.resources.offer_prompts(instance.label, link, register.prompts)
        link.completions = register.completions
    links.registry.resources.returned(instance.label)  # reads waiting through its grace period go on
    bound = bound.bind(instance=instance.instance_id, label=instance.label)
    bound.info("app_registered", tools=len(instance.tools), replaced=replaced is not None)
    wake_link_waiters(instance)  # calls held over a reconnect go out after `registered`
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_heartbeat, link)
            await _read_loop(link, links)
            nursery.cancel_scope.cancel()
    finally:
        links.live.pop(link.id, None)
        offered = links.registry.resources.withdraw(instance.label, link)
        link.end_reads(f"the app {instance.label} disconnected during the read")
        # Unlink first: failing the calls frees their admission slots, which hands the next
        # queued call over at once; it must find the instance unlinked (and wait for its return
        # through the grace period), not this dying link, where it would be sent to nobody.
        still_ours = links.registry.unlink(instance, link)
        failed = links.router.fail_link(
            link.id, OutcomeKind.APP_DISCONNECTED, f"the app {instance.label} disconnected during the call"
        )
        bound.info("app_disconnected", failed_calls=failed, reason=conn.closed_reason or "closed")
        if still_ours and link.said_goodbye:
            links.registry.expire(instance)  # it quit on purpose: release its names now
        elif still_ours:
            if offered and instance.grace_deadline is not None:  # reads wait for it, as calls do
                links.registry.resources.await_return(instance.label, instance.grace_deadline)
            # Runs after the connection's cancel scope has ended (``BrokerCore.handle_connection``).
            ended.instance = instance


async def _grace(registry: Registry, instance: Instance) -> None:
    """Keep the instance's names for the grace period; drop it if it does not come back."""
    if instance.grace_deadline is None:
        return  # a new link took the instance over before this grace period began
    with trio.move_on_at(instance.grace_deadline):
        await instance.relinked.wait()
    registry.resources.returned(instance.label)  # back, or gone for good: reads stop waiting
    if registry.expire(instance):
        log.info("app_removed", app=instance.app_name, instance=instance.instance_id, label=instance.label)


async def _refuse(conn: Connection, code: str, message: str) -> None:
    await conn.send(Error(code, message, fatal=True))


#: A heartbeat wake-up later than this means the daemon's own loop stalled (see _heartbeat).
_STALL_SECONDS = 1.0


async def _heartbeat(link: AppLink) -> None:
    """Ping the app every interval; close the link when *the app* has been silent too long.

    Silence is counted only while this daemon was able to listen: if the loop itself stalled
    (this task woke up late), whatever the app sent meanwhile is still unread in the socket,
    so that round is not judged and the silence counts from the end of the stall. A stalled
    daemon must not blame its apps for its own deafness and drop them all.
    """
    settings = link._links.settings
    ping_id = 0
    listening_since = trio.current_time()
    while True:
        expected = trio.current_time() + settings.heartbeat_interval
        await trio.sleep(settings.heartbeat_interval)
        now = trio.current_time()
        if now - expected > _STALL_SECONDS:
            listening_since = now  # the reader gets to the backlog before the next round
            continue
        silent = now - max(link.conn.last_received, listening_since)
        if silent >= settings.heartbeat_timeout:
            log.warning("app_heartbeat_timeout", conn_id=link.id, label=link.label, silent_s=round(silent, 1))
            link.conn.abort(f"no message from the app for {silent:.0f} s (heartbeat timeout)")
            return
        ping_id += 1
        link.conn.send_nowait(Ping(id=ping_id))


async def _read_loop(link: AppLink, links: AppLinks) -> None:
    conn = link.conn
    last_large: trio.Event | None = None  # set once this link's last large result was freed
    while True:
        if links.router.payloads.over or (last_large is not None and not last_large.is_set()):
            await _payload_room(link, links, last_large)
        last_large = None
        try:
            event = await conn.next_event()  # conn.protocol judges what the app may send
        except PeerClosed:
            return
        if isinstance(event, BadLine):
            _bad_line(link, links, event)
            continue
        try:
            if isinstance(event, AddTools):
                await _add_tools(link, links, event)
            else:
                # The read's last line (an app answering one call at a time sends one per
                # read): the reply to the agent and the next invocation go out in this step.
                if conn.read_drained:
                    with write_through():
                        _handle(link, links, event)
                else:
                    _handle(link, links, event)
                if isinstance(event, ToolResponse) and isinstance(event.result, PassthroughResult):
                    last_large = freed(event.result)
        except RegistrationError as exc:
            conn.send_nowait(Error(exc.code, exc.message))
        del event  # not kept while waiting for the next line (a large result's line would be)


#: The longest a link waits for its last large result to be freed before it reads on.
_LARGE_HOLD_WAIT = 1.0


async def _payload_room(link: AppLink, links: AppLinks, last_large: trio.Event | None) -> None:
    """Too many large responses wait for agents, or this link's last large result is still held
    (the call log summarising it): read no further line until they went out (the latter for at
    most ``_LARGE_HOLD_WAIT``; ``broker.core.passthrough``). The app's data waits in its socket
    meanwhile."""
    if last_large is not None:
        with trio.move_on_after(_LARGE_HOLD_WAIT):
            await last_large.wait()
    while links.router.payloads.over:
        with trio.move_on_after(links.settings.heartbeat_interval):
            await links.router.payloads.room()
        _heard_from(link)  # the app's pongs wait unread meanwhile: its silence is ours
    _heard_from(link)


#: Messages that name a call without answering it: a broken one never fails the call.
_NOT_AN_ANSWER = frozenset({"toolProgress", "log"})


def _bad_line(link: AppLink, links: AppLinks, bad: BadLine) -> None:
    """Answer a line the protocol refused; a bad answer to one of this link's calls fails it."""
    exc = bad.error
    log.warning("app_protocol_error", conn_id=link.id, label=link.label, code=exc.code, detail=exc.message)
    link.conn.send_nowait(bad.reply())
    # A broken progress report or log message is only an error reply: the call goes on
    # (protocol.md, error; section 12).
    if exc.message_type in _NOT_AN_ANSWER:
        return
    call = links.calls.get(exc.correlation_id) if exc.correlation_id is not None else None
    read = link.reads.get(exc.correlation_id) if exc.correlation_id is not None else None
    if read is not None:
        read.finish(error=f"the app sent an invalid resource response ({exc.code}); the read failed")
    if call is not None and call.link is link:
        links.router.fail(call, OutcomeKind.APP_ERROR, f"the app sent an invalid response ({exc.code}); the call failed")


def _handle(link: AppLink, links: AppLinks, message: Message) -> None:
    """A message the protocol allows from a registered app (``addTools`` aside)."""
    conn = link.conn
    instance = link.instance
    assert instance is not None
    if isinstance(message, ToolResponse):
        call = _own_call(link, links, message.correlation_id, "toolResponse")
        if call is not None:
            links.router.resolve(call, message.result)
    elif isinstance(message, ToolProgress):
        call = _own_call(link, links, message.correlation_id, "toolProgress")
        if call is not None:
            call.progress(message.progress, message.total, message.message)
    elif isinstance(message, Ping):
        conn.send_nowait(Pong(id=message.id))
    elif isinstance(message, Pong):
        pass  # receiving it already refreshed the link's liveness
    elif isinstance(message, Goodbye):
        log.info("app_goodbye", conn_id=link.id, label=instance.label)
        link.said_goodbye = True
        conn.close_after_flush("the app said goodbye")
    elif isinstance(message, RemoveTools):
        links.registry.remove_tools(instance, message.names)
        log.info("app_tools_removed", label=instance.label, tools=message.names)
        conn.send_nowait(ToolsUpdated(tool_names=instance.tool_names()))
    elif isinstance(message, ResourceResponse):
        _answered(link, instance.label, message.correlation_id, "read", message.error, "read the resource",
                  lambda: {"contents": message.contents})
    elif isinstance(message, PromptResponse):
        _answered(link, instance.label, message.correlation_id, "prompt request", message.error,
                  "render the prompt", lambda: {"messages": message.messages, "description": message.description})
    elif isinstance(message, CompleteResponse):
        _answered(link, instance.label, message.correlation_id, "completion", message.error,
                  "complete the argument",
                  lambda: {"values": message.values, "total": message.total, "hasMore": message.has_more})
    elif isinstance(message, LogMessage):
        _app_log(link, links, instance.label, message)
    elif isinstance(message, SetPrompts):
        links.registry.resources.offer_prompts(instance.label, link, message.prompts)
        log.info("app_prompts_set", label=instance.label, prompts=len(message.prompts))
    elif isinstance(message, SetResources):
        links.registry.resources.offer(instance.label, link, message.resources, message.resource_templates)
        log.info("app_resources_set", label=instance.label, resources=len(message.resources),
                 templates=len(message.resource_templates))
    elif isinstance(message, ResourceUpdated):
        if len(message.uri) > MAX_RESOURCE_URI_CHARS:  # resource URIs are bounded; the app is told
            link.conn.send_nowait(Error("invalid_message", f"resourceUpdated: the uri is {len(message.uri)} "
                                        f"characters; resource URIs are at most {MAX_RESOURCE_URI_CHARS} "
                                        "(it was dropped)"))
        else:
            links.registry.resources.updated(instance.label, message.uri)
    elif isinstance(message, Elicit):
        _elicit(link, links, message)
    elif isinstance(message, Error):
        # Not the text: an app's error may quote the call's arguments (secrets). The agent gets it.
        log.warning("app_reported_error", label=instance.label, code=message.code,
                    detail_chars=len(message.message), correlation_id=message.correlation_id)
        if message.correlation_id is not None:
            read = link.reads.get(message.correlation_id)
            if read is not None:
                read.finish(error=f"the app reported an error: {message.message[:1000]}")
                return
            call = _own_call(link, links, message.correlation_id, "error")
            if call is not None:
                links.router.fail(call, OutcomeKind.APP_ERROR, f"the app reported an error: {message.message[:1000]}",
                                 log_message=app_text_for_log(message.message))


def _elicit(link: AppLink, links: AppLinks, message: Elicit) -> None:
    """Protocol v2 (section 13): the app asks the user of one of its calls on this link."""
    call = _own_call(link, links, message.correlation_id, "elicit")
    if call is not None:
        elicitation.start(call, message, links.router.call_log)


def _answered(link: AppLink, label: str, correlation_id: int, what: str, error: str | None, failed_to: str,
              result: Callable[[], dict[str, Any]]) -> None:
    """The app's answer to a resource read or prompt request sent on ``link`` (protocol v2)."""
    request = link.reads.get(correlation_id)
    if request is None:
        link.conn.send_nowait(Error("unknown_correlation_id", f"no {what} {correlation_id} is pending (late, "
                                    "cancelled or never sent)", correlation_id=correlation_id))
    elif error is not None:
        request.finish(error=f"the app {label} could not {failed_to}: {error[:1000]}")
    else:
        request.finish(result=result())


def _app_log(link: AppLink, links: AppLinks, label: str, message: LogMessage) -> None:
    """Protocol v2 ``log``: past the flood bound, to the request it belongs to or to everyone
    who asked (see ``broker.core.applog``). A message naming a call that is not in flight on
    this link, or whose requester takes no log messages, is dropped: it was for that request."""
    hub = links.registry.app_logs
    if not hub.admit(link, label, message.level, len(message.data)):
        return
    record = AppLogRecord(label, message.level, message.logger, message.data)
    if message.correlation_id is None:
        hub.broadcast(record)
        return
    call = links.calls.get(message.correlation_id)
    if call is None or call.link is not link or call.done:
        return
    deliver = getattr(call.origin, "app_log", None)  # an MCP request takes them; other origins do not
    if deliver is not None:
        deliver(record)


async def _add_tools(link: AppLink, links: AppLinks, message: AddTools) -> None:
    """``addTools``: compile in worker threads (this link's reader waits), then add."""
    instance = link.instance
    assert instance is not None
    federation.check_tools(links.federation, message.tools)
    compiled = await links.registry.compile_tools(message.tools, existing=instance.tools,
                                                 alive=lambda: _heard_from(link))
    _heard_from(link)  # the app's pongs wait unread meanwhile: its silence is ours
    if instance.link is not link:
        return  # replaced by a new registration while compiling: these tools are not its
    links.registry.add_tools(instance, message.tools, compiled)
    log.info("app_tools_added", label=instance.label, tools=[t.name for t in message.tools])
    link.conn.send_nowait(ToolsUpdated(tool_names=instance.tool_names()))


def _heard_from(link: AppLink) -> None:
    link.conn.last_received = trio.current_time()


def _own_call(link: AppLink, links: AppLinks, correlation_id: int, what: str) -> Call | None:
    """The pending call ``correlation_id`` if it was sent over ``link``; else log, tell the app, None.

    The call record is the one table: it knows the link it was sent on. (The protocol machine's
    own tracking is off for the daemon's connections, ``track_calls=False``.)
    """
    call = links.calls.get(correlation_id)
    if call is None:
        log.info("late_or_unknown_correlation_id", conn_id=link.id, label=link.label, kind=what,
                 correlation_id=correlation_id)
        link.conn.send_nowait(
            Error("unknown_correlation_id", f"no call {correlation_id} is pending (late, cancelled or never sent)",
                  correlation_id=correlation_id)
        )
        return None
    if call.link is not link:
        log.warning("foreign_correlation_id", conn_id=link.id, label=link.label, kind=what,
                    correlation_id=correlation_id)
        link.conn.send_nowait(
            Error("unknown_correlation_id", f"no call {correlation_id} is pending on this connection",
                  correlation_id=correlation_id)
        )
        return None
    return call
