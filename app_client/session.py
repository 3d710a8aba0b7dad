"""One registered connection: handshake, reader, single writer, running calls, tool updates.

Theory of operation
-------------------
A :class:`Session` lives for one TCP connection. :meth:`Session.handshake` sends
``register`` and waits for ``registered`` (answering ``ping`` meanwhile); an ``error``
instead raises :class:`~app_client.errors.RegistrationRejected`. Then :meth:`Session.serve`
runs a nursery that owns every task of the connection:

* **the reader** decodes each line and acts on it at once, never waiting for a handler:
  ``ping`` → ``pong`` (queued straight away, so heartbeats flow while handlers or the GUI
  thread are busy); ``toolInvocation`` → a call task; ``toolCancel`` → cancel that
  call; ``toolsUpdated`` / ``error`` → settle the oldest pending tool update. A bad line
  gets a non-fatal ``error`` reply with the wire's code (``unknown_type``, ...), and a
  message type an app never receives gets ``unexpected_message``; neither closes the link.
  If the reader waits three heartbeat intervals for a message, the link is declared dead
  (a watchdog task times the reader's waits: no cancel scope per message).
* **the writer** is the only task that writes to the stream. Everyone else puts encoded
  lines in a bounded in-memory queue, so a cancelled sender can never leave half a line on
  the wire, and messages go out in the order they were queued. One exception, for an app
  answering one call at a time: the response of the only call in flight is written by its
  call task at once when the writer waits with nothing queued (``LineChannel.write_nowait``:
  a synchronous write, so never half a line, and never ahead of a queued one).
* **call tasks** run one invocation at a time: :func:`app_client.invoke.run_tool` inside the
  call's own cancel scope (``toolCancel`` cancels it; it carries the deadline), then queue the
  ``toolResponse``. A call task parks after its call and takes the next one (spawning a task
  per call cost twice as much); each call starts with fresh context variables, as in a new task.

Protocol v2 requests (``resourceRead``, ``promptGet``, ``complete``) run as tasks like calls, each
in a cancel scope a ``toolCancel`` cancels, and are answered once. Log messages (``log``,
section 12: :meth:`Session.log_threadsafe`, from any thread) are queued without waiting, within
the broker's rate (an :class:`~app_client.applog.LogBucket`; the excess is dropped and counted,
with a warning in the app's own log at most once a minute, without the data).

The protocol's rules are the sans-IO machine's (:class:`app_client.protocol.AppConnection`,
``conn.protocol``); this module does the I/O, the tasks and the timers around it.

Cancellation rule (the broker relies on it): after ``toolCancel`` the app sends **no**
``toolResponse`` for that call — the broker ended the call when it sent the cancel and
would drop a late answer anyway (the machine refuses to make one; a result that comes in
anyway is dropped here). A response that was already queued may still go out; the broker
drops it as unknown.

Tool updates (``addTools`` / ``removeTools``) carry no id; the broker answers each one with
exactly one ``toolsUpdated`` or one ``error`` without ``correlationId``, in order, so
answers are matched to requests first-in first-out (the machine pairs them:
:class:`~app_client.protocol.UpdateAnswered`). A ``toolsUpdated`` with nothing pending
is an unsolicited refresh of the agent-facing names.

When the app stops (its task is cancelled), :meth:`say_goodbye` sends ``goodbye`` so the
broker releases the instance's names at once. When the link ends (end of stream, broken stream, missed heartbeats, or the broker's fatal
``error``), the reader ends the nursery: running calls are cancelled (their contexts are
marked cancelled, no responses are sent), pending tool updates fail with
:class:`~app_client.errors.ConnectionClosed`, and :meth:`serve` returns the reason. An
``error`` with code ``replaced`` (another connection registered this instance) makes
:meth:`serve` raise :class:`~app_client.errors.InstanceReplaced` instead.
"""

from __future__ import annotations

import collections
import itertools
import math
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs
import outcome
import trio

from .connection import OUTBOX_SIZE, MessageStream
from .context import Elicitation, ToolContext
from .errors import ElicitationError, InstanceReplaced, RegistrationRejected, ToolUpdateRejected
from .invoke import GuiExecutor, deadline_for, run_tool
from .applog import LogBucket
from .logs import get_logger
from .protocol import (
    Complete,
    CompleteResponse,
    LogMessage,
    Elicit,
    ElicitResult,
    PromptGet,
    PromptResponse,
    ResourceRead,
    ResourceResponse,
    ResourceUpdated,
    INSTANCE_REPLACED,
    AddTools,
    AppEvent,
    BadLine,
    ConnectionClosed,
    Error,
    Goodbye,
    Ignored,
    LocalProtocolError,
    Message,
    Ping,
    Pong,
    Register,
    Registered,
    Rejected,
    RemoteProtocolError,
    RemoveTools,
    Replaced,
    ToolCancel,
    ToolInvocation,
    ToolProgress,
    ToolResponse,
    ToolResult,
    ToolsUpdated,
    UpdateAnswered,
)
from . import resources as _resources
from .results import failure
from .tools import ToolDefinition

__all__ = ["CALL_TASK_NAME", "INSTANCE_REPLACED", "MAX_IDLE_CALL_TASKS", "OUTBOX_SIZE", "Session"]

#: Missed heartbeat intervals after which a silent link counts as dead.
HEARTBEAT_MISSES: Final = 3
#: Call tasks kept parked for the next call at most (per link).
MAX_IDLE_CALL_TASKS: Final = 64
#: The name of the tasks that run calls (parked ones included), for whoever counts tasks.
CALL_TASK_NAME: Final = "toolbridge call"
#: Seconds a clean close waits to hand ``goodbye`` to the stream.
GOODBYE_TIMEOUT: Final = 1.0
#: At most one "log messages dropped" warning per this many seconds.
LOG_DROP_WARNING_INTERVAL: Final = 60.0

_log = get_logger(__name__)


@attrs.define
class _Call:
    ctx: ToolContext
    scope: trio.CancelScope


@attrs.define
class _PendingElicit:
    """An ``elicit`` sent, waiting for its ``elicitResult`` (section 13)."""

    done: trio.Event = attrs.field(factory=trio.Event)
    answer: Elicitation | None = None
    error: ElicitationError | None = None

    def settle(self, answer: Elicitation | None = None, error: ElicitationError | None = None) -> None:
        if not self.done.is_set():
            self.answer, self.error = answer, error
            self.done.set()


@attrs.define
class _PendingUpdate:
    done: trio.Event = attrs.field(factory=trio.Event)
    names: dict[str, str] | None = None
    error: Exception | None = None

    def settle(self, names: dict[str, str] | None = None, error: Exception | None = None) -> None:
        if not self.done.is_set():
            self.names, self.error = names, error
            self.done.set()


class Session:
    """The protocol state of one connection (see the module docstring).

    ``tools`` is the app's live tool table (read at each invocation); ``gui_executor``
    returns the app's current executor; ``on_tool_names`` receives every new
    agent-name mapping from ``toolsUpdated``; ``unknown_tool``, if given, may supply a
    definition for an invoked name that is not in the table (a relay's catch-all).
    """

    def __init__(
        self,
        conn: MessageStream,
        *,
        tools: Mapping[str, ToolDefinition],
        limiter: trio.CapacityLimiter,
        gui_executor: Callable[[], GuiExecutor | None],
        on_tool_names: Callable[[dict[str, str]], None],
        log: Any = None,
        unknown_tool: Callable[[str], ToolDefinition | None] | None = None,
        resources: Mapping[str, _resources.ResourceDefinition] | None = None,
        prompts: Mapping[str, _resources.PromptDefinition] | None = None,
    ) -> None:
        self._conn = conn
        self._tools = tools
        self._limiter = limiter
        self._gui_executor = gui_executor
        self._on_tool_names = on_tool_names
        self._unknown_tool = unknown_tool
        self._log = log if log is not None else _log
        self._calls: dict[int, _Call] = {}
        #: Protocol v2: the app's resources, and the reads running (their cancel scopes).
        self._resources: Mapping[str, _resources.ResourceDefinition] = resources if resources is not None else {}
        self._reads: dict[int, trio.CancelScope] = {}
        self._prompts: Mapping[str, _resources.PromptDefinition] = prompts if prompts is not None else {}
        self._pending_updates: collections.deque[_PendingUpdate] = collections.deque()
        #: Section 13: elicits waiting for their answers, by (correlation id, elicit id).
        self._elicits: dict[tuple[int, int], _PendingElicit] = {}
        self._elicit_ids = itertools.count(1)
        self._nursery: trio.Nursery | None = None
        #: Call tasks parked between calls (see _call_worker).
        self._idle_workers: list[trio.lowlevel.Task] = []
        #: When the reader began waiting for the broker's next message (inf: not waiting).
        self._waiting_since = math.inf
        self._token = trio.lowlevel.current_trio_token()
        self._reason: str | None = None
        self._replaced = False
        #: Log messages (section 12): the rate kept, and when a drop may be reported again.
        self._log_bucket = LogBucket()
        self._next_drop_warning = 0.0
        self._log_version_warned = False

    @property
    def active_calls(self) -> int:
        """Calls received and not yet finished or cancelled."""
        return len(self._calls)

    # --- handshake ----------------------------------------------------------------------

    async def handshake(self, register: Register) -> Registered:
        """Send ``register`` and return the broker's ``registered``.

        Raises RegistrationRejected if the broker answers ``error``, ConnectionClosed if
        the link ends first or the peer does not speak the protocol.
        """
        await self._conn.send_bytes(self._conn.protocol.start(register))
        while True:
            try:
                event = await self._conn.next_event()
            except RemoteProtocolError as exc:
                raise ConnectionClosed(
                    f"the peer sent an invalid message before registration ({exc.code}: "
                    f"{exc.message}); is it a toolbridge daemon?"
                ) from exc
            if isinstance(event, Registered):
                return event  # the machine took its line limit
            if isinstance(event, Rejected):
                raise RegistrationRejected(event.error.code, event.error.message)
            if isinstance(event, Ping):
                await self._conn.send(Pong(id=event.id))
            else:
                kind = event.message if isinstance(event, Ignored) else event
                self._log.debug("ignored a message before registration", type=type(kind).__name__)

    # --- serving ------------------------------------------------------------------------

    async def serve(self, heartbeat_interval_ms: int) -> str:
        """Serve the link until it ends; return why it ended.

        Raises InstanceReplaced if the broker dropped us for another registration of our
        instance id.
        """
        idle_timeout = (
            HEARTBEAT_MISSES * heartbeat_interval_ms / 1000 if heartbeat_interval_ms > 0 else math.inf
        )
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._write_loop)
                nursery.start_soon(self._read_loop)
                if idle_timeout != math.inf:
                    nursery.start_soon(self._watch_idle, idle_timeout)
        finally:
            self._end("the app stopped")
        if self._replaced:
            raise InstanceReplaced(
                "another process registered with this app's instance id; not reconnecting"
            )
        assert self._reason is not None
        return self._reason

    async def say_goodbye(self) -> None:
        """Tell the broker the app quits on purpose (``goodbye``), after :meth:`serve` ended.

        Best effort, shielded and bounded by :data:`GOODBYE_TIMEOUT`: the broker then releases
        the instance's names at once instead of keeping them for the grace period. Nothing is
        sent on a broken link or one the broker replaced.
        """
        if self._replaced or self._conn.channel.closed_reason is not None:
            return
        with trio.CancelScope(shield=True), trio.move_on_after(GOODBYE_TIMEOUT):
            try:
                # The leading newline ends any line a cancelled write left unfinished (the
                # broker ignores empty lines), so goodbye is read as a line of its own.
                await self._conn.send_bytes(b"\n" + self._conn.encode(Goodbye()))
            except (ConnectionClosed, LocalProtocolError):
                pass

    def _end(self, reason: str) -> None:
        """End the link: first reason wins; cancels every task and fails waiting updates."""
        if self._reason is None:
            self._reason = reason
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()
        self._conn.channel.close_queue()
        while self._pending_updates:
            self._pending_updates.popleft().settle(error=ConnectionClosed(self._reason))

    async def _send(self, message: Message) -> None:
        """Queue ``message`` for the writer (raises ConnectionClosed, LocalProtocolError)."""
        await self._queue(self._conn.encode(message))

    async def _queue(self, data: bytes) -> None:
        """Queue an encoded line for the writer (raises ConnectionClosed)."""
        channel = self._conn.channel
        try:
            try:
                # With room in the queue, no scheduler pass (``send_bytes`` always makes one).
                channel.queue_nowait(data)
            except trio.WouldBlock:
                await channel.send_bytes(data)
        except ConnectionClosed as exc:
            raise ConnectionClosed(self._reason or "the connection is closed") from exc.__cause__

    async def _send_now(self, message: Message) -> None:
        """Like :meth:`_send`, but written at once if the writer is idle (``write_nowait``)."""
        data = self._conn.encode(message)
        try:
            self._conn.channel.write_nowait(data)
        except trio.WouldBlock:
            await self._queue(data)  # a full queue: it waits for room like any other line
        except ConnectionClosed as exc:
            raise ConnectionClosed(self._reason or "the connection is closed") from exc.__cause__

    async def _write_loop(self) -> None:
        channel = self._conn.channel
        try:
            # The channel's one writer: it joins queued lines into one write, and when it wakes
            # to one line while the calls that are finishing now are ready to run, lets them
            # queue their responses too.
            await channel.run_writer()
        except trio.ClosedResourceError:
            pass  # _end closed the queue
        if channel.closed_reason is not None:
            self._end(channel.closed_reason)

    async def _read_loop(self) -> None:
        try:
            while True:
                event: AppEvent | None = self._conn.next_event_nowait()
                if event is None:
                    # _watch_idle times this wait (no cancel scope and deadline per message).
                    self._waiting_since = trio.current_time()
                    event = await self._conn.next_event()
                    self._waiting_since = math.inf
                if isinstance(event, BadLine):  # a bad line, or a message the protocol refuses
                    self._log.warning("invalid message from the broker", code=event.error.code,
                                      error=event.error.message)
                    await self._send(event.reply())
                    continue
                await self._dispatch(event)
        except ConnectionClosed as exc:
            self._end(str(exc))

    async def _watch_idle(self, idle_timeout: float) -> None:
        """End the link once the reader has waited ``idle_timeout`` for a message (missed
        heartbeats). Only the reader's waits count (not its time dispatching); one wake-up per
        ``idle_timeout`` or so, instead of a cancel scope with a deadline around every wait
        (which cost a call answered one at a time ~10 % of the app's CPU)."""
        while True:
            since = self._waiting_since
            if since == math.inf:  # the reader is busy: look again after a full timeout
                await trio.sleep(idle_timeout)
                continue
            await trio.sleep_until(since + idle_timeout)
            if self._waiting_since == since and trio.current_time() >= since + idle_timeout:
                self._end(f"no message from the broker for {idle_timeout:g} s (missed heartbeats)")
                return

    async def _dispatch(self, event: AppEvent) -> None:
        if isinstance(event, Ping):
            await self._send(Pong(id=event.id))
        elif isinstance(event, ToolInvocation):
            await self._start_call(event)
        elif isinstance(event, ResourceRead):
            assert self._nursery is not None
            scope = self._reads[event.correlation_id] = trio.CancelScope()
            self._nursery.start_soon(self._run_read, event, scope, name=f"toolbridge read {event.correlation_id}")
        elif isinstance(event, PromptGet):
            assert self._nursery is not None
            scope = self._reads[event.correlation_id] = trio.CancelScope()
            self._nursery.start_soon(self._run_prompt, event, scope, name=f"toolbridge prompt {event.correlation_id}")
        elif isinstance(event, Complete):
            assert self._nursery is not None
            scope = self._reads[event.correlation_id] = trio.CancelScope()
            self._nursery.start_soon(self._run_complete, event, scope,
                                     name=f"toolbridge completion {event.correlation_id}")
        elif isinstance(event, ToolCancel) and event.correlation_id in self._reads:
            self._reads[event.correlation_id].cancel()
        elif isinstance(event, ToolCancel):
            self._cancel_call(event)
        elif isinstance(event, ElicitResult):
            self._elicit_answered(event)
        elif isinstance(event, ToolsUpdated):  # an unsolicited refresh of the names
            self._on_tool_names(dict(event.tool_names))
        elif isinstance(event, UpdateAnswered):
            self._update_answered(event)
        elif isinstance(event, Replaced):
            self._log.error("the broker dropped this link: another process registered this instance id",
                            code=event.error.code, error=event.error.message)
            self._replaced = True
            self._end("replaced by another registration of this instance")
        elif isinstance(event, Error):
            self._on_error(event)
        elif isinstance(event, Ignored) and isinstance(event.message, ToolCancel):
            self._log.debug("toolCancel for a call not running", correlation_id=event.message.correlation_id)
        # Anything else (pong, a repeated registered) needs nothing.

    # --- calls --------------------------------------------------------------------------

    async def _start_call(self, invocation: ToolInvocation) -> None:
        cid = invocation.correlation_id  # not running already: the machine refuses duplicates
        ctx = ToolContext(
            correlation_id=cid,
            tool=invocation.tool,
            timeout_ms=invocation.timeout_ms,
            deadline=deadline_for(invocation.timeout_ms),
            progress_requested=invocation.progress,
            send_progress=self._progress,
            send_progress_threadsafe=self._progress_threadsafe,
            send_log=self.log_threadsafe,
            elicit=self._elicit,
            trio_token=self._token,
        )
        # The deadline given at construction: setting it later costs trio a context manager.
        call = _Call(ctx, trio.CancelScope(deadline=ctx.deadline))
        self._calls[cid] = call
        if self._idle_workers:
            trio.lowlevel.reschedule(self._idle_workers.pop(), outcome.Value((invocation, call)))
            return
        assert self._nursery is not None
        self._nursery.start_soon(self._call_worker, invocation, call, name=CALL_TASK_NAME)

    async def _call_worker(self, invocation: ToolInvocation, call: _Call) -> None:
        """Run calls one after another: a pool of parked tasks instead of a task per call."""
        task = trio.lowlevel.current_task()
        base = task.context.copy()

        def abort(_: object) -> trio.lowlevel.Abort:
            self._idle_workers.remove(task)
            return trio.lowlevel.Abort.SUCCEEDED

        while True:
            await self._run_call(invocation, call)
            if len(self._idle_workers) >= MAX_IDLE_CALL_TASKS:
                return
            task.context = base.copy()  # each call starts with the context variables a new task has
            self._idle_workers.append(task)
            invocation, call = await trio.lowlevel.wait_task_rescheduled(abort)

    async def _run_call(self, invocation: ToolInvocation, call: _Call) -> None:
        cid = invocation.correlation_id
        result: ToolResult | None = None
        try:
            tool = self._tools.get(invocation.tool)
            if tool is None and self._unknown_tool is not None:
                tool = self._unknown_tool(invocation.tool)
            if tool is None:
                result = failure(f"unknown tool {invocation.tool!r}")
            else:
                # call.scope is the call's one cancel scope: toolCancel cancels it, and run_tool
                # puts the deadline on it.
                result = await run_tool(
                    tool,
                    invocation.parameters,
                    call.ctx,
                    limiter=self._limiter,
                    gui_executor=self._gui_executor(),
                    log=self._log,
                    scope=call.scope,
                )
        finally:
            del self._calls[cid]
            call.ctx._mark_finished()
            self._end_elicits(cid, "the call finished before the user answered")
        try:
            if result is None:
                return  # cancelled by toolCancel: no response, by protocol
            if not self._conn.protocol.is_running(cid):
                self._log.debug("result dropped: the broker cancelled the call", correlation_id=cid)
                return
            await self._respond(invocation.tool, cid, result)
        finally:
            self._conn.protocol.call_ended(cid)

    async def _run_read(self, read: ResourceRead, scope: trio.CancelScope) -> None:
        """Protocol v2: run a ``resourceRead``'s handler and answer it (nothing after a cancel)."""
        cid = read.correlation_id
        answer: ResourceResponse | None = None
        try:
            with scope:
                if read.timeout_ms is not None:
                    scope.deadline = trio.current_time() + read.timeout_ms / 1000
                found = _resources.find(self._resources, read.uri)
                if found is None:
                    answer = ResourceResponse(cid, error=f"this app has no resource {read.uri!r}")
                else:
                    try:
                        contents = await _resources.read(
                            found[0], read.uri, found[1], self._limiter, self._gui_executor())
                        answer = ResourceResponse(cid, contents=contents)
                    except Exception as exc:  # the handler's failure is the agent's message
                        self._log.warning("resource read failed", uri_chars=len(read.uri), error=type(exc).__name__)
                        answer = ResourceResponse(cid, error=str(exc) or type(exc).__name__)
            if answer is None and scope.cancelled_caught and read.timeout_ms is not None:
                if self._conn.protocol.is_running(cid):  # our own deadline, not the broker's cancel
                    answer = ResourceResponse(cid, error=f"reading {read.uri!r} timed out")
        finally:
            del self._reads[cid]
        await self._answer_request(
            cid, answer, lambda why: ResourceResponse(cid, error=f"the resource cannot be sent ({why})"))

    async def _run_prompt(self, get: PromptGet, scope: trio.CancelScope) -> None:
        """Protocol v2: render a ``promptGet`` and answer it (nothing after a cancel)."""
        cid = get.correlation_id
        answer: PromptResponse | None = None
        try:
            with scope:
                if get.timeout_ms is not None:
                    scope.deadline = trio.current_time() + get.timeout_ms / 1000
                definition = self._prompts.get(get.name)
                if definition is None:
                    answer = PromptResponse(cid, error=f"this app has no prompt {get.name!r}")
                else:
                    try:
                        messages, description = await _resources.render(
                            definition, get.arguments, self._limiter, self._gui_executor())
                        answer = PromptResponse(cid, messages=messages, description=description)
                    except Exception as exc:  # the handler's failure is the agent's message
                        self._log.warning("prompt failed", prompt=get.name, error=type(exc).__name__)
                        answer = PromptResponse(cid, error=str(exc) or type(exc).__name__)
        finally:
            del self._reads[cid]
        await self._answer_request(
            cid, answer, lambda why: PromptResponse(cid, error=f"the prompt cannot be sent ({why})"))

    async def _run_complete(self, request: Complete, scope: trio.CancelScope) -> None:
        """Protocol v2 (section 12): run a ``complete``'s completion function and answer it."""
        cid = request.correlation_id
        answer: CompleteResponse | None = None
        try:
            with scope:
                if request.timeout_ms is not None:
                    scope.deadline = trio.current_time() + request.timeout_ms / 1000
                completers = self._completers_of(request)
                if completers is None:
                    what = f"prompt {request.prompt!r}" if request.prompt is not None else \
                        f"resource template {request.uri_template!r}"
                    answer = CompleteResponse(cid, error=f"this app has no {what}")
                elif request.argument not in completers:
                    answer = CompleteResponse(cid)  # nothing to suggest for this one
                else:
                    try:
                        values, total, has_more = await _resources.complete(
                            completers[request.argument], request.value, request.arguments, self._limiter,
                            self._gui_executor())
                        answer = CompleteResponse(cid, values=values, total=total, has_more=has_more)
                    except Exception as exc:  # the function's failure is the agent's message
                        self._log.warning("completion failed", argument=request.argument, error=type(exc).__name__)
                        answer = CompleteResponse(cid, error=str(exc) or type(exc).__name__)
        finally:
            del self._reads[cid]
        await self._answer_request(
            cid, answer, lambda why: CompleteResponse(cid, error=f"the suggestions cannot be sent ({why})"))

    def _completers_of(self, request: Complete) -> Mapping[str, _resources.Completer] | None:
        """The completion functions of the prompt or template a ``complete`` names (None: unknown)."""
        if request.prompt is not None:
            prompt = self._prompts.get(request.prompt)
            return None if prompt is None else prompt.completers
        definition = self._resources.get(request.uri_template or "")
        return None if definition is None or definition.template is None else definition.completers

    # --- log messages (protocol v2, section 12) -------------------------------------------

    def log_threadsafe(self, message: LogMessage) -> None:
        """Queue a ``log`` message from any thread; never blocks (see the module docstring)."""
        if _in_run(self._token):
            self._log_nowait(message)
            return
        try:
            self._token.run_sync_soon(self._log_nowait, message)
        except trio.RunFinishedError:
            pass

    def _log_nowait(self, message: LogMessage) -> None:
        if self._conn.protocol.version < 2:
            if not self._log_version_warned:
                self._log_version_warned = True
                self._log.warning("log messages are not sent: this connection speaks protocol 1; create the "
                                  "App with logs=True (or offer a resource or prompt) to send them")
            return
        if message.correlation_id is not None and message.correlation_id not in self._calls:
            return  # its call is over: the request it was for is answered
        sent = False
        if self._log_bucket.take():
            try:
                self._conn.channel.queue_nowait(self._conn.encode(message))
                sent = True
            except trio.WouldBlock:
                self._log_bucket.dropped += 1
            except (ConnectionClosed, LocalProtocolError):
                return
        now = trio.current_time()
        if not sent and now >= self._next_drop_warning:
            self._next_drop_warning = now + LOG_DROP_WARNING_INTERVAL
            self._log.warning("log messages for agents dropped: over the broker's rate or the queue is full",
                              dropped_total=self._log_bucket.dropped)

    async def _answer_request(self, cid: int, answer: ResourceResponse | PromptResponse | CompleteResponse | None,
                              unsendable: Callable[[str], ResourceResponse | PromptResponse | CompleteResponse]
                              ) -> None:
        """Send a v2 request's answer unless the broker cancelled it meanwhile; an answer the
        protocol refuses to send (too big, say) becomes an error answer. The id ends either way."""
        try:
            if answer is not None and self._conn.protocol.is_running(cid):
                try:
                    await self._send(answer)
                except LocalProtocolError as exc:
                    await self._send(unsendable(exc.message))
        except ConnectionClosed:
            pass
        finally:
            self._conn.protocol.call_ended(cid)

    def resource_updated_nowait(self, uri: str) -> None:
        """Protocol v2: queue ``resourceUpdated`` (dropped when the queue is full or v1)."""
        self.send_nowait(ResourceUpdated(uri))

    def send_nowait(self, message: Message) -> None:
        """Queue a message that needs no answer (protocol v2's ``setResources``,
        ``resourceUpdated``); dropped, with a debug line, when the queue is full, the link is
        closed, or the broker speaks protocol 1."""
        try:
            self._conn.channel.queue_nowait(self._conn.encode(message))
        except trio.WouldBlock:
            self._log.debug("message dropped: outgoing queue full", type=type(message).__name__)
        except (ConnectionClosed, LocalProtocolError):
            pass

    async def _respond(self, tool: str, cid: int, result: ToolResult) -> None:
        try:
            try:
                if not self._calls:
                    # The only call in flight (an app answering one at a time): nothing else
                    # is about to be queued to join it, so it goes out now when the writer is
                    # idle, without a wake-up of the writer.
                    await self._send_now(ToolResponse(correlation_id=cid, result=result))
                else:
                    await self._send(ToolResponse(correlation_id=cid, result=result))
            except LocalProtocolError as exc:
                self._log.error("tool result cannot be sent", tool=tool, correlation_id=cid, error=exc.message)
                reason = "too large" if exc.code == "line_too_long" else "not encodable"
                await self._send(
                    ToolResponse(
                        correlation_id=cid,
                        result=failure(f"{tool} failed: its result is {reason} ({exc.message})"),
                    )
                )
        except ConnectionClosed:
            self._log.debug("result not sent: the connection is closed", correlation_id=cid)

    def _cancel_call(self, message: ToolCancel) -> None:
        call = self._calls.get(message.correlation_id)
        if call is None:  # pragma: no cover - the machine passes on cancels of running calls only
            return
        self._log.info(
            "call cancelled by the broker",
            correlation_id=message.correlation_id,
            tool=call.ctx.tool,
            reason=message.reason,
        )
        call.ctx._mark_cancelled()
        call.scope.cancel()
        self._end_elicits(message.correlation_id, "the broker cancelled the call")

    async def _progress(self, message: ToolProgress) -> None:
        # ``await ctx.report_progress()`` is a checkpoint, as a trio await should be: a handler
        # looping on it can be cancelled there and lets other tasks run (_send no longer yields).
        await trio.lowlevel.checkpoint()
        if message.correlation_id not in self._calls:
            return
        try:
            await self._send(message)
        except ConnectionClosed:
            pass
        except LocalProtocolError as exc:
            self._log.warning("progress update dropped", error=exc.message)

    def _progress_threadsafe(self, message: ToolProgress) -> None:
        if _in_run(self._token):
            # Called from our own event loop (e.g. a broker's uplink relaying progress): queue it
            # now, so it stays ahead of the response that may follow in the same step.
            self._progress_nowait(message)
            return
        try:
            self._token.run_sync_soon(self._progress_nowait, message)
        except trio.RunFinishedError:
            pass

    def _progress_nowait(self, message: ToolProgress) -> None:
        if message.correlation_id not in self._calls:
            return
        try:
            self._conn.channel.queue_nowait(self._conn.encode(message))
        except trio.WouldBlock:
            self._log.debug("progress update dropped: outgoing queue full")
        except (ConnectionClosed, LocalProtocolError):
            pass

    # --- elicitation (protocol.md section 13) ---------------------------------------------

    async def _elicit(self, cid: int, message: str, schema: dict[str, Any] | None, url: str | None,
                      input_key: str | None = None) -> Elicitation:
        """Send an ``elicit`` for call ``cid`` and wait for its ``elicitResult`` (ElicitationError)."""
        if self._conn.protocol.version < 2:
            raise ElicitationError("elicitation_unsupported", "this link speaks wire protocol 1, which has no "
                                   "elicitation: create the app with App(..., elicitation=True)")
        if cid not in self._calls:
            raise ElicitationError("call_not_running", f"call {cid} is not running")
        key = (cid, next(self._elicit_ids))
        pending = self._elicits[key] = _PendingElicit()
        try:
            request = Elicit(cid, key[1], message, mode="url" if url is not None else "form",
                             requested_schema=schema if url is None else None, url=url, input_key=input_key)
            try:
                await self._send(request)
            except LocalProtocolError as exc:
                code = exc.code if exc.code == "call_not_running" else "invalid_elicit"
                raise ElicitationError(code, exc.message) from None
            except ConnectionClosed as exc:
                raise ElicitationError("call_not_running", str(exc)) from None
            await pending.done.wait()
        finally:
            del self._elicits[key]
        if pending.error is not None:
            raise pending.error
        assert pending.answer is not None
        return pending.answer

    def _elicit_answered(self, result: ElicitResult) -> None:
        pending = self._elicits.get((result.correlation_id, result.elicit_id))
        if pending is None:
            self._log.debug("elicitResult for no elicit waiting", correlation_id=result.correlation_id)
            return
        if result.error_code is not None:
            pending.settle(error=ElicitationError(result.error_code, result.error or "the user was not asked"))
        else:
            pending.settle(Elicitation(result.action, dict(result.content or {})))

    def _end_elicits(self, cid: int, why: str) -> None:
        """Call ``cid`` ended: its waiting elicits (a thread may block on one) fail."""
        if not self._elicits:  # the common case: no copy of an empty dict per call
            return
        for (owner, _), pending in list(self._elicits.items()):
            if owner == cid:
                pending.settle(error=ElicitationError("call_not_running", why))

    # --- tool updates -------------------------------------------------------------------

    async def update_tools(self, message: AddTools | RemoveTools) -> dict[str, str]:
        """Send ``addTools`` / ``removeTools`` and return the broker's new name mapping.

        Raises ToolUpdateRejected if the broker refused, ConnectionClosed if the link ended
        before the answer, LocalProtocolError if the message is over the line limit.
        """
        if self._reason is not None:
            raise ConnectionClosed(self._reason)
        pending = _PendingUpdate()
        self._pending_updates.append(pending)
        queued = False
        try:
            data = self._conn.encode(message)  # the machine now awaits one answer
            try:
                await self._queue(data)
                queued = True
            finally:
                if not queued:
                    self._conn.protocol.update_withdrawn()  # the line never went out
        except BaseException:
            if pending in self._pending_updates:
                self._pending_updates.remove(pending)
            raise
        await pending.done.wait()
        if pending.error is not None:
            raise pending.error
        assert pending.names is not None
        return pending.names

    def _update_answered(self, answer: UpdateAnswered) -> None:
        """The broker answered the oldest tool update (the machine paired them, first in first out)."""
        pending = self._pending_updates.popleft() if self._pending_updates else None
        if answer.error is not None:
            self._log.warning("the broker refused a tool update", code=answer.error.code, error=answer.error.message)
            if pending is not None:
                pending.settle(error=ToolUpdateRejected(answer.error.code, answer.error.message))
            return
        names = dict(answer.tool_names or {})
        if pending is not None:
            pending.settle(names=names)
        self._on_tool_names(names)

    def _on_error(self, message: Error) -> None:
        log = self._log.bind(code=message.code, error=message.message, correlation_id=message.correlation_id)
        if message.fatal:
            log.error("the broker reported a fatal error and will close the connection")
        else:
            log.warning("the broker reported an error")


def _in_run(token: trio.lowlevel.TrioToken) -> bool:
    """Whether the caller runs in the trio run that ``token`` belongs to."""
    try:
        return trio.lowlevel.current_trio_token() is token
    except RuntimeError:  # not in any trio run: another thread
        return False
