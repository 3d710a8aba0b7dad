"""The router: the one pipeline every tool call passes, whichever door it came in by.

Theory of operation
-------------------
:meth:`Router.start_call` runs the stages in order — resolve the name, validate the arguments
against the tool's compiled schema, run the argument guards, take an admission slot (or a
place in the instance's queue), wait for the app instance if it is reconnecting, send the
invocation — then the call waits as a :class:`~broker.core.calls.Call` record, not a task, until
the first of: the app's response, its link closing, the deadline (a
:class:`~broker.core.calls.DeadlineQueue` the caller runs), :meth:`Router.cancel`, or shutdown.
Every outcome, internal bugs included, is a :class:`CallOutcome` with a ``kind`` and a short
message that is safe to show an agent, delivered once to the call's origin
(``CallOrigin.call_done``) after the audit; :meth:`start_call` itself never raises (a call
refused before it became a record is returned as its outcome). A rejected call never reaches
the app.

Validation and the guards cost time in proportion to the arguments, and a crafted argument
can make them slow (the path guard's worst case is a few µs a character; a schema pattern RE2
cannot run gets up to 100 ms a call). Arguments of :data:`LARGE_ARGUMENTS` characters or more,
and every call of a tool with such a pattern, are therefore checked in a worker thread (at most
:data:`_CHECK_THREADS` at once) while the call waits as a record like any other — its deadline
runs, it can be cancelled — and the loop goes on serving everyone else; a call with small
arguments is checked inline, as before. :meth:`Router.serve_checks` runs those checks; without
it (a router in a test) every call is checked inline.

:meth:`Router.call_tool` is the same pipeline for a caller with a task to spare (HTTP, the
uplink, tests): it waits for the outcome, enforces the deadline itself, and cancelling the
awaiting task cancels the call. Cancelling a call that was sent tells the app (``toolCancel``)
and the audit records ``tool_cancelled``. The app is told the time left (``timeoutMs``) and
the router waits a little longer, so the app's own timeout message, which knows more, arrives
first.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import attrs
import structlog
import trio

from app_client.protocol import ToolCancel, ToolInvocation, ToolResult

from .admission import Busy
from .passthrough import PayloadBudget
from .calls import Call, CallOrigin, CorrelationMap, DeadlineQueue, ProgressCallback
from .guards import find_path_traversal
from ..config.logsetup import app_text_for_log, info_line
# CallerInfo, CallOutcome and format_seconds live in .outcome; imported from here too, as before.
from .outcome import CallerInfo as CallerInfo, CallOutcome as CallOutcome, format_seconds as format_seconds
from .outcome import OutcomeKind, seconds_to_ms
from .registry import RegisteredTool, Registry
from .validation import log_safe

if TYPE_CHECKING:
    from .calllog import CallLog
    from ..config.settings import Settings

log = structlog.get_logger("toolbridge.router")

#: The longest per-call timeout an agent may ask for.
MAX_TIMEOUT: Final = 24 * 3600.0
#: Arguments this large (characters of strings and keys, plus one per value) are validated and
#: guarded in a worker thread: at the guard's worst case (~3 µs a character) the loop would
#: otherwise stall ~50 ms for each such call.
LARGE_ARGUMENTS: Final = 16 * 1024
_CHECK_THREADS: Final = 2
_MAX_APP_ERROR_CHARS: Final = 4000
#: See :attr:`Router.observers`.
CallObserver = Callable[[str, "RegisteredTool | None", CallerInfo, float, CallOutcome, float], None]


class Router:
    def __init__(
        self,
        settings: Settings,
        registry: Registry,
        calls: CorrelationMap,
        call_log: CallLog | None = None,
    ) -> None:
        self._settings = settings
        self.registry = registry
        self.calls = calls
        #: The core's change signal (``signals``), pulsed as calls take slots and end.
        self.changed = registry.changed
        self._call_log = call_log
        #: Set once by :meth:`begin_shutdown`: new calls are refused from then on.
        self.shutting_down = False
        #: Where calls with large arguments are checked off the loop (``serve_checks``).
        self._checks: trio.Nursery | None = None
        self._check_threads = trio.CapacityLimiter(_CHECK_THREADS)
        #: Told of every call's end after its audit (the metrics and the status page):
        #: ``observer(name, tool, caller, duration_ms, outcome, queued_ms)``, ``queued_ms`` the part
        #: of the call spent waiting for an admission slot; must be quick and not raise.
        self.observers: list[CallObserver] = []
        #: Large responses queued for agents: app links pause reading while it is over (passthrough).
        self.payloads = PayloadBudget()

    async def serve_checks(self) -> None:
        """Check large arguments in worker threads for as long as this runs (the daemon's life)."""
        async with trio.open_nursery() as nursery:
            self._checks = nursery
            try:
                await trio.sleep_forever()
            finally:
                self._checks = None

    # --- the public face -----------------------------------------------------------------

    @property
    def call_log(self) -> CallLog | None:
        """The call log every call is recorded in (code mode adds its ``run_code`` rows), or None."""
        return self._call_log

    def list_tools(self) -> list[RegisteredTool]:
        return self.registry.tools()

    async def wait_tools_changed(self, seen_version: int) -> int:
        return await self.registry.wait_changed(seen_version)

    def start_call(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        *,
        origin: CallOrigin,
        deadlines: DeadlineQueue | None,
        caller: CallerInfo = CallerInfo(),
        timeout: float | None = None,
        request_id: str | int | None = None,
        progress: bool = False,
    ) -> Call | CallOutcome:
        """Start one call for ``origin``, which is told its end (``origin.call_done``).

        Returns the outcome if the call was refused before it became a :class:`Call` (audited;
        ``origin`` is *not* told), else the :class:`Call` (for :meth:`cancel`; if it ended at
        once, ``call.done`` is set and ``origin`` has been told). ``request_id``: the caller's
        id of the request, kept on the call. ``progress``: ``origin`` wants progress reports.
        ``deadlines`` expires the call; None means the caller calls :meth:`expire` itself at
        ``call.gives_up_at``. Never raises.
        """
        started = time.perf_counter()
        try:
            call_or_outcome = self._admit(name, arguments if arguments is not None else {}, caller, timeout,
                                          origin, request_id, progress, started)
        except Exception:
            log.exception("internal_error", tool=name)
            call_or_outcome = _internal_error(None)
        if isinstance(call_or_outcome, CallOutcome):
            self._audit(name, self.registry.lookup(name), caller, started, call_or_outcome, arguments)
            return call_or_outcome
        call = call_or_outcome
        if deadlines is not None and not call.done:
            deadlines.add(call)
        return call

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        *,
        caller: CallerInfo = CallerInfo(),
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> CallOutcome:
        """Run one call through the pipeline and wait for it. Never raises, except ``trio.Cancelled``."""
        waiter = _Waiter(on_progress)
        call = self.start_call(name, arguments, origin=waiter, deadlines=None, caller=caller,
                               timeout=timeout, progress=on_progress is not None)
        if isinstance(call, CallOutcome):
            return call
        if not call.done:
            try:
                with trio.move_on_at(call.gives_up_at):
                    await waiter.finished.wait()
            except trio.Cancelled:
                self.cancel(call)
                raise
            if waiter.outcome is None:
                self.expire(call)
        assert waiter.outcome is not None
        return waiter.outcome

    def cancel(self, call: Call, message: str = "cancelled by the agent") -> bool:
        """The caller gave up on ``call``: the app is told, no result will be used."""
        return self._finish(call, CallOutcome(OutcomeKind.CANCELLED, message), stop_app=True)

    def expire(self, call: Call) -> bool:
        """``call`` reached ``gives_up_at`` without an answer."""
        return self._finish(call, CallOutcome(
            OutcomeKind.TIMEOUT,
            f"{call.tool.agent_name} timed out after {format_seconds(call.timeout)}; the app was asked to "
            "stop. Retry, or ask for a longer timeout if the tool is slow.",
        ), stop_app=True)

    def resolve(self, call: Call, result: ToolResult) -> bool:
        """The app answered ``call``."""
        return self._finish(call, self._outcome(call, result))

    def fail(self, call: Call, kind: OutcomeKind, message: str, *, log_message: str | None = None) -> bool:
        """End ``call`` with a failure; ``log_message``: what the log shows if ``message`` quotes the app."""
        return self._finish(call, CallOutcome(kind, message, log_message=log_message))

    def fail_link(self, link_id: int, kind: OutcomeKind, message: str) -> int:
        """Fail every call sent over one link; return how many were still open."""
        return sum(self.fail(call, kind, message) for call in self.calls if call.link_id == link_id)

    def begin_shutdown(self) -> None:
        """Refuse every new call from now on (the daemon is stopping; it fails the live ones)."""
        self.shutting_down = True

    def fail_all(self, kind: OutcomeKind, message: str) -> int:
        """Fail every call admitted, queued or sent (daemon shutdown); apps get ``toolCancel``."""
        return sum(self._finish(call, CallOutcome(kind, message), stop_app=True) for call in self.calls)

    # --- the stages ----------------------------------------------------------------------

    def _admit(
        self,
        name: str,
        arguments: Any,
        caller: CallerInfo,
        timeout: float | None,
        origin: CallOrigin,
        request_id: str | int | None,
        progress: bool,
        started: float,
    ) -> Call | CallOutcome:
        if self.shutting_down:
            return CallOutcome(OutcomeKind.SHUTDOWN, "toolbridge is shutting down; retry when it is back")
        tool = self.registry.lookup(name)
        if tool is None:
            return self._unknown_tool(name)
        if not isinstance(arguments, dict):
            return CallOutcome(OutcomeKind.INVALID_ARGUMENTS, f"arguments for {name} must be a JSON object")
        checks = self._checks
        off_loop = checks is not None and (tool.validate.may_be_slow or _is_large(arguments, LARGE_ARGUMENTS))
        if not off_loop:
            rejected = self._check(name, tool, arguments)
            if rejected is not None:
                return rejected
        if timeout is None:
            timeout = (
                tool.spec.timeout_ms / 1000
                if tool.spec.timeout_ms
                else self._settings.default_timeout
            )
        timeout = min(max(timeout, 0.001), MAX_TIMEOUT)
        if len(self.calls) >= self._settings.max_pending_calls:
            return CallOutcome(
                OutcomeKind.BUSY,
                f"toolbridge has {len(self.calls)} calls in flight, its limit; retry shortly",
                retry_after_ms=1000,
            )
        now = trio.current_time()
        deadline = now + timeout
        # The app hears of the deadline; we wait a little longer so its own message wins.
        margin = min(0.5, timeout * 0.1)
        call = Call(name, tool, arguments, caller, started, timeout, deadline, deadline + margin,
                    origin, request_id, progress)
        if off_loop:
            assert checks is not None
            self.calls.add(call)
            checks.start_soon(self._check_off_loop, call)
            return call
        return self._enter(call, now)

    def _check(self, name: str, tool: RegisteredTool, arguments: dict[str, Any]) -> CallOutcome | None:
        """Validation and guards: the rejection, or None. Pure: also runs in a worker thread."""
        errors = tool.validate(arguments)
        if errors:
            return CallOutcome(
                OutcomeKind.INVALID_ARGUMENTS,
                f"invalid arguments for {name}: " + "; ".join(errors),
                log_message=f"invalid arguments for {name}: " + log_safe(errors),
            )
        if self._settings.path_guard and tool.spec.path_guard:
            where = find_path_traversal(arguments)
            if where is not None:
                return CallOutcome(
                    OutcomeKind.GUARD_REJECTED,
                    f"rejected: argument {where} contains a '..' path segment (path traversal)",
                )
        return None

    async def _check_off_loop(self, call: Call) -> None:
        """Check ``call``'s large arguments in a worker thread, then go on as :meth:`_admit` does."""
        try:
            rejected = await trio.to_thread.run_sync(
                self._check, call.name, call.tool, call.arguments,
                limiter=self._check_threads, abandon_on_cancel=True,
            )
        except Exception:
            log.exception("internal_error", tool=call.name)
            rejected = _internal_error(None)
        if call.done:  # timed out or cancelled while it was being checked
            return
        outcome = rejected if rejected is not None else self._enter(call, trio.current_time())
        if isinstance(outcome, CallOutcome):
            self._finish(call, outcome)

    def _enter(self, call: Call, now: float) -> Call | CallOutcome:
        """Take an admission slot for ``call`` (then send it) or a place in the queue; or busy."""
        tool = call.tool
        admission = tool.instance.admission
        if admission.take_free_slot():
            self.calls.add(call)
            self._granted(call, now)
            return call
        granted = functools.partial(self._granted, call)
        try:
            admitted = admission.enter(granted)  # queued: no slot was free a moment ago
        except Busy as busy:
            return CallOutcome(
                OutcomeKind.BUSY,
                f"the app {tool.instance.label} is busy ({busy.queued} calls waiting); "
                f"retry after {busy.retry_after_ms} ms",
                retry_after_ms=busy.retry_after_ms,
            )
        self.calls.add(call)
        if admitted:
            self._granted(call, now)
        else:
            call.queued = granted
        return call

    def _granted(self, call: Call, now: float | None = None) -> None:
        """``call`` holds an admission slot now: send it, or wait for its app to reconnect.

        ``now``: trio's clock, when the caller has just read it (one read per call started)."""
        call.queued = None
        call.admitted_at = trio.current_time() if now is None else now
        self.changed.pulse()  # an admission slot was taken
        try:  # _try_send, inline (the hot path; a frame fewer per call)
            self._send(call, call.admitted_at)
        except Exception:
            log.exception("internal_error", tool=call.name)
            self._finish(call, _internal_error(call.wire_id))

    def _try_send(self, call: Call, now: float | None = None) -> None:
        try:
            self._send(call, trio.current_time() if now is None else now)
        except Exception:
            log.exception("internal_error", tool=call.name)
            self._finish(call, _internal_error(call.wire_id))

    def _send(self, call: Call, now: float) -> None:
        if call.done:
            return
        if now >= call.deadline:
            # Its slot came free as its deadline passed (the calls ahead of it timed out
            # together): sending it now would only make the app start and stop it.
            self.expire(call)
            return
        instance = call.tool.instance
        link = instance.link
        if link is None:
            if not self.registry.is_current(instance) or instance.grace_deadline is None:
                self._finish(call, CallOutcome(
                    OutcomeKind.APP_DISCONNECTED,
                    f"the app {instance.label} disconnected and did not come back within "
                    f"{format_seconds(self._settings.reconnect_grace)}; the call was not sent",
                ))
                return
            instance.link_waiters.append(functools.partial(self._try_send, call))
            return
        current = instance.tools.get(call.tool.name)
        if current is None:
            self._finish(call, CallOutcome(
                OutcomeKind.UNKNOWN_TOOL,
                f"{call.tool.agent_name} is no longer offered: the app re-registered without it",
            ))
            return
        call.tool = current
        self.calls.bind(call, link)
        invocation = ToolInvocation(
            correlation_id=call.correlation_id,
            tool=current.name,
            parameters=call.arguments,
            timeout_ms=seconds_to_ms(call.deadline - now),
            progress=call.wants_progress,
        )
        # Never lost to a full queue: the number of invocations is bounded by admission.
        if not link.send_reliable_nowait(invocation):
            self._finish(call, CallOutcome(
                OutcomeKind.APP_DISCONNECTED, f"the app {link.label} disconnected before the call was sent"))
            return
        call.sent = True

    def _unknown_tool(self, name: str) -> CallOutcome:
        candidates = self.registry.candidates(name)
        hint = f" Did you mean one of: {', '.join(candidates)}?" if candidates else ""
        if not self.registry.instances():  # say so: a typo is not the problem then
            hint = " No app is connected to toolbridge yet: start one, then call tools/list."
        return CallOutcome(
            OutcomeKind.UNKNOWN_TOOL,
            f"unknown tool {name!r}. Call tools/list for the tools of the connected apps.{hint}",
        )

    def _finish(self, call: Call, outcome: CallOutcome, *, stop_app: bool = False) -> bool:
        """End ``call`` with ``outcome``: release what it holds, audit, deliver. Once only.

        ``stop_app``: the call ends without the app's answer (cancelled, timed out); if the app
        was sent the invocation, it is told to stop.
        """
        if call.done:
            return False
        call.done = True
        self.calls.close(call)
        link = call.link
        if link is not None:  # the app was given the call: its id goes in the audit and the outcome
            cid = call.correlation_id
            if outcome.correlation_id != cid:  # an app's answer is built with it already
                outcome = attrs.evolve(outcome, correlation_id=cid)
            if stop_app and call.sent:
                reason = _CANCEL_REASONS.get(outcome.kind, "cancelled")
                link.send_reliable_nowait(ToolCancel(cid, reason=reason))
        instance = call.tool.instance
        if call.queued is not None:
            instance.admission.withdraw(call.queued)
            call.queued = None
        ran = 0.0
        if call.admitted_at is not None:
            instance.admission.leave(call.admitted_at)
            ran = trio.current_time() - call.admitted_at
        try:
            self._audit(call.name, call.tool, call.caller, call.started, outcome, call.arguments, ran=ran)
        except Exception:
            log.exception("audit_failed", tool=call.name)
        origin = call.origin
        # A finished call may linger in a deadline heap: keep nothing big alive through it.
        call.origin = None
        call.arguments = {}
        if origin is not None:
            try:  # _deliver, inline (the hot path)
                origin.call_done(call, outcome)
            except Exception:  # the caller's bug must not break the link reader that resolved the call
                log.exception("call_outcome_delivery_failed", outcome=outcome.kind)
        self.changed.pulse()
        return True

    def _outcome(self, call: Call, result: ToolResult) -> CallOutcome:
        if result.success:
            return CallOutcome(OutcomeKind.OK, result=result, correlation_id=call.wire_id)
        message = result.error or f"{call.tool.agent_name} failed (the app gave no message)"
        if len(message) > _MAX_APP_ERROR_CHARS:
            message = message[:_MAX_APP_ERROR_CHARS] + "..."
        # An app (or a broker below, through an uplink) may say what kind of failure it was.
        kind = _app_reported_kind(result.error_kind)
        retry_after = result.retry_after_ms if kind is OutcomeKind.BUSY else None
        return CallOutcome(kind, message, result=result, retry_after_ms=retry_after,
                           log_message=app_text_for_log(message))

    # --- audit ---------------------------------------------------------------------------

    def _audit(
        self,
        name: str,
        tool: RegisteredTool | None,
        caller: CallerInfo,
        started: float,
        outcome: CallOutcome,
        arguments: Any,
        *,
        ran: float | None = None,
    ) -> None:
        """Log, call-log and observe one ended call; ``ran``: seconds it held an admission slot
        (None: all of it, a call that never queued)."""
        duration_ms = round((time.perf_counter() - started) * 1000, 3)
        app: str | None = None
        instance_id: str | None = None
        if tool is not None:
            instance = tool.instance
            app, instance_id = instance.app_name, instance.instance_id
        kind = outcome.kind
        agent = caller.agent  # a property that formats: read once for the line and the row
        fields = {
            "tool": name,
            "app": app,
            "instance": instance_id,
            "agent": agent,
            "session": caller.session,
            "correlation_id": outcome.correlation_id,
            "duration_ms": duration_ms,
            "outcome": kind.value,  # the plain string, whichever renderer writes the line
        }
        if kind is OutcomeKind.OK:
            if not info_line(_OK_AUDIT_EVENT, fields):  # the daemon's fast path for this hot line
                log.info(_OK_AUDIT_EVENT, **fields)
        else:
            log.warning(kind.audit_event, error=outcome.log_message or outcome.message, **fields)
        if self._call_log is not None:
            self._call_log.record(
                tool=name,
                app=app,
                instance=instance_id,
                agent=agent,
                session=caller.session,
                arguments=arguments,
                outcome=outcome,
                duration_ms=duration_ms,
            )
        if not self.observers:
            return
        queued_ms = 0.0 if ran is None else max(0.0, duration_ms - ran * 1000)
        for observe in self.observers:
            try:
                observe(name, tool, caller, duration_ms, outcome, queued_ms)
            except Exception:  # counting a call must never fail it (start_call never raises)
                log.exception("call_observer_failed", tool=name)


def _is_large(arguments: dict[str, Any], limit: int) -> bool:
    """Whether ``arguments`` hold ``limit`` or more characters of strings and keys (counting one
    per value too). Stops as soon as it knows: small arguments cost a few steps."""
    total = 0
    stack: list[Any] = [arguments]
    while stack and total < limit:
        value = stack.pop()
        if isinstance(value, str):
            total += len(value)
        elif isinstance(value, dict):
            total += len(value)
            for key, item in value.items():
                if total >= limit:
                    break
                total += len(key)
                if isinstance(item, (str, dict, list)):
                    stack.append(item)
        elif isinstance(value, list):
            total += len(value)
            if total < limit:
                stack.extend(item for item in value if isinstance(item, (str, dict, list)))
    return total >= limit


def _app_reported_kind(error_kind: str | None) -> OutcomeKind:
    """The kind an app's failed ``toolResponse`` reported, if it may report it; else ``app_error``."""
    if error_kind is None:
        return OutcomeKind.APP_ERROR
    try:
        kind = OutcomeKind(error_kind)
    except ValueError:
        return OutcomeKind.APP_ERROR
    return kind if kind.app_reportable else OutcomeKind.APP_ERROR


_OK_AUDIT_EVENT: Final = OutcomeKind.OK.audit_event

#: ``toolCancel.reason`` by outcome (protocol.md lists the values); anything else: "cancelled".
_CANCEL_REASONS: Final = {OutcomeKind.TIMEOUT: "timeout", OutcomeKind.SHUTDOWN: "shutdown"}


def _internal_error(correlation_id: int | None) -> CallOutcome:
    return CallOutcome(
        OutcomeKind.INTERNAL_ERROR,
        "toolbridge hit an internal error on this call; it was not retried. "
        "The daemon log has the details.",
        correlation_id=correlation_id,
    )


@attrs.define(eq=False)
class _Waiter:
    """:meth:`Router.call_tool`'s origin: a task waits for the outcome."""

    on_progress: ProgressCallback | None
    finished: trio.Event = attrs.Factory(trio.Event)
    outcome: CallOutcome | None = None

    def call_progress(self, call: Call, progress: float, total: float | None, message: str | None) -> None:
        if self.on_progress is not None:
            self.on_progress(progress, total, message)

    def call_done(self, call: Call, outcome: CallOutcome) -> None:
        self.outcome = outcome
        self.finished.set()
