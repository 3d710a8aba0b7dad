"""The router: the one pipeline every tool call passes, whichever door it came in by.

Theory of operation
-------------------
``Router.call_tool`` runs the stages in order — resolve the name, validate the arguments
against the tool's compiled schema, run the argument guards, wait for the app instance if it
is reconnecting, take an admission slot, dispatch with a deadline, then audit — and never
raises to its caller except ``trio.Cancelled``: every outcome, internal bugs included, is a
:class:`CallOutcome` with a ``kind`` and a short message that is safe to show an agent. A
rejected call never reaches the app.

Cancelling the task that awaits ``call_tool`` is how an agent cancels: the app is sent a
``toolCancel`` and the audit records ``TOOL_CANCELLED``. The deadline wraps the queue wait and
the dispatch; the app is told the time left (``timeoutMs``) and the router waits a little
longer, so the app's own timeout message, which knows more, arrives first.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Final

import attrs
import structlog
import trio

from app_client.wire import ToolCancel, ToolInvocation, ToolResult

from .admission import Busy
from .calls import CorrelationMap, PendingCall, ProgressCallback
from .connection import PeerClosed, seconds_to_ms
from .guards import find_path_traversal
from .registry import RegisteredTool, Registry

if TYPE_CHECKING:
    from .calllog import CallLog
    from .config import Settings
    from .links import AppLink

log = structlog.get_logger("toolbridge.router")

OUTCOME_KINDS: Final = (
    "ok",
    "unknown_tool",
    "invalid_arguments",
    "guard_rejected",
    "busy",
    "timeout",
    "cancelled",
    "app_disconnected",
    "app_error",
    "internal_error",
    "shutdown",
)
_AUDIT_EVENTS: Final = {
    "ok": "TOOL_EXECUTED",
    "unknown_tool": "UNKNOWN_TOOL",
    "invalid_arguments": "TOOL_ARG_VALIDATION_FAILURE",
    "guard_rejected": "TOOL_GUARD_REJECTED",
    "timeout": "TOOL_TIMEOUT",
    "cancelled": "TOOL_CANCELLED",
}
#: Failure kinds an app's ``toolResponse`` may report in ``errorKind`` (anything else, and no
#: kind at all, is ``app_error``). ``unknown_tool`` is not among them: the tool was found here.
APP_REPORTABLE_KINDS: Final = frozenset(
    {"invalid_arguments", "guard_rejected", "busy", "timeout", "cancelled", "app_disconnected",
     "internal_error", "shutdown"}
)
#: The longest per-call timeout an agent may ask for.
MAX_TIMEOUT: Final = 24 * 3600.0
_MAX_APP_ERROR_CHARS: Final = 4000


@attrs.frozen
class CallerInfo:
    """Who is calling, for the audit trail and the call log."""

    client_name: str | None = None
    client_version: str | None = None
    session: str | None = None
    transport: str = "internal"

    @property
    def agent(self) -> str:
        if self.client_name is None:
            return "unknown"
        return f"{self.client_name}/{self.client_version}" if self.client_version else self.client_name


@attrs.frozen
class CallOutcome:
    kind: str
    message: str = ""
    result: ToolResult | None = None
    retry_after_ms: int | None = None
    correlation_id: int | None = None

    @property
    def is_error(self) -> bool:
        return self.kind != "ok"


def format_seconds(seconds: float) -> str:
    return f"{seconds:.3g} s" if seconds < 10 else f"{round(seconds)} s"


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
        self._call_log = call_log
        self.shutting_down = False
        self.links: dict[int, AppLink] = {}

    # --- the public face -----------------------------------------------------------------

    def list_tools(self) -> list[RegisteredTool]:
        return self.registry.tools()

    async def wait_tools_changed(self, seen_version: int) -> int:
        return await self.registry.wait_changed(seen_version)

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        *,
        caller: CallerInfo = CallerInfo(),
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> CallOutcome:
        """Run one call through the pipeline. Never raises, except ``trio.Cancelled``."""
        started = time.perf_counter()
        tool = self.registry.lookup(name)
        correlation: list[int] = []  # set by dispatch, read by the audit
        try:
            outcome = await self._run(name, tool, arguments or {}, caller, timeout, on_progress, correlation)
        except trio.Cancelled:
            self._audit(name, tool, caller, started, CallOutcome("cancelled", "cancelled by the agent",
                        correlation_id=correlation[0] if correlation else None), arguments)
            raise
        except Exception:
            log.exception("internal_error", tool=name, correlation_id=correlation[0] if correlation else None)
            outcome = CallOutcome(
                "internal_error",
                "toolbridge hit an internal error on this call; it was not retried. "
                "The daemon log has the details.",
                correlation_id=correlation[0] if correlation else None,
            )
        self._audit(name, tool, caller, started, outcome, arguments)
        return outcome

    # --- the stages ----------------------------------------------------------------------

    async def _run(
        self,
        name: str,
        tool: RegisteredTool | None,
        arguments: dict[str, Any],
        caller: CallerInfo,
        timeout: float | None,
        on_progress: ProgressCallback | None,
        correlation: list[int],
    ) -> CallOutcome:
        if self.shutting_down:
            return CallOutcome("shutdown", "toolbridge is shutting down; retry when it is back")
        if tool is None:
            return self._unknown_tool(name)
        if not isinstance(arguments, dict):
            return CallOutcome("invalid_arguments", f"arguments for {name} must be a JSON object")
        errors = tool.validate(arguments)
        if errors:
            return CallOutcome(
                "invalid_arguments",
                f"invalid arguments for {name}: " + "; ".join(errors),
            )
        if self._settings.path_guard and tool.spec.path_guard:
            where = find_path_traversal(arguments)
            if where is not None:
                return CallOutcome(
                    "guard_rejected",
                    f"rejected: argument {where} contains a '..' path segment (path traversal)",
                )
        if timeout is None:
            timeout = (
                tool.spec.timeout_ms / 1000
                if tool.spec.timeout_ms
                else self._settings.default_timeout
            )
        timeout = min(max(timeout, 0.001), MAX_TIMEOUT)
        if len(self.calls) >= self._settings.max_pending_calls:
            return CallOutcome(
                "busy",
                f"toolbridge has {len(self.calls)} calls in flight, its limit; retry shortly",
                retry_after_ms=1000,
            )
        deadline = trio.current_time() + timeout
        # The app hears of the deadline; we wait a little longer so its own message wins.
        margin = min(0.5, timeout * 0.1)
        with trio.move_on_at(deadline + margin):
            return await self._dispatch(tool, arguments, deadline, on_progress, correlation)
        return CallOutcome(
            "timeout",
            f"{tool.agent_name} timed out after {format_seconds(timeout)}; the app was asked to "
            "stop. Retry, or ask for a longer timeout if the tool is slow.",
            correlation_id=correlation[0] if correlation else None,
        )

    def _unknown_tool(self, name: str) -> CallOutcome:
        candidates = self.registry.candidates(name)
        hint = f" Did you mean one of: {', '.join(candidates)}?" if candidates else ""
        return CallOutcome(
            "unknown_tool",
            f"unknown tool {name!r}. Call tools/list for the tools of the connected apps.{hint}",
        )

    async def _wait_for_link(self, tool: RegisteredTool) -> AppLink | CallOutcome:
        """The instance's live link, waiting out a reconnect grace period if need be."""
        instance = tool.instance
        while instance.link is None:
            if not self.registry.is_current(instance) or instance.grace_deadline is None:
                return CallOutcome(
                    "app_disconnected",
                    f"the app {instance.label} disconnected and did not come back within "
                    f"{format_seconds(self._settings.reconnect_grace)}; the call was not sent",
                )
            with trio.move_on_at(instance.grace_deadline):
                await instance.relinked.wait()
        return instance.link

    async def _dispatch(
        self,
        tool: RegisteredTool,
        arguments: dict[str, Any],
        deadline: float,
        on_progress: ProgressCallback | None,
        correlation: list[int],
    ) -> CallOutcome:
        instance = tool.instance
        try:
            async with instance.admission.slot():
                link = await self._wait_for_link(tool)
                if isinstance(link, CallOutcome):
                    return link
                current = instance.tools.get(tool.name)
                if current is None:
                    return CallOutcome(
                        "unknown_tool",
                        f"{tool.agent_name} is no longer offered: the app re-registered without it",
                    )
                call = self.calls.open(link.id, current, on_progress)
                correlation.append(call.correlation_id)
                try:
                    return await self._invoke(link, call, arguments, deadline)
                finally:
                    self.calls.close(call)
        except Busy as busy:
            return CallOutcome(
                "busy",
                f"the app {instance.label} is busy ({busy.queued} calls waiting); "
                f"retry after {busy.retry_after_ms} ms",
                retry_after_ms=busy.retry_after_ms,
            )

    async def _invoke(
        self, link: AppLink, call: PendingCall, arguments: dict[str, Any], deadline: float
    ) -> CallOutcome:
        invocation = ToolInvocation(
            correlation_id=call.correlation_id,
            tool=call.tool.name,
            parameters=arguments,
            timeout_ms=seconds_to_ms(deadline - trio.current_time()),
            progress=call.on_progress is not None,
        )
        queued = False
        try:
            await link.conn.send(invocation)
            queued = True
            await call.done.wait()
        except PeerClosed:
            call.fail("app_disconnected", f"the app {link.label} disconnected before the call was sent")
        except trio.Cancelled:
            # Tell the app only about invocations it will see; a full queue must not lose it.
            if call.fail("cancelled", "cancelled") and queued:
                link.conn.send_urgent_nowait(ToolCancel(call.correlation_id, reason="cancelled"))
            raise
        return self._outcome(call)

    def _outcome(self, call: PendingCall) -> CallOutcome:
        cid = call.correlation_id
        if call.failure is not None:
            kind, message = call.failure
            return CallOutcome(kind, message, correlation_id=cid)
        result = call.result
        assert result is not None
        if result.success:
            return CallOutcome("ok", result=result, correlation_id=cid)
        message = result.error or f"{call.tool.agent_name} failed (the app gave no message)"
        if len(message) > _MAX_APP_ERROR_CHARS:
            message = message[:_MAX_APP_ERROR_CHARS] + "..."
        # An app (or a broker below, through an uplink) may say what kind of failure it was.
        kind = result.error_kind if result.error_kind in APP_REPORTABLE_KINDS else "app_error"
        retry_after = result.retry_after_ms if kind == "busy" else None
        return CallOutcome(kind, message, result=result, retry_after_ms=retry_after, correlation_id=cid)

    # --- audit ---------------------------------------------------------------------------

    def _audit(
        self,
        name: str,
        tool: RegisteredTool | None,
        caller: CallerInfo,
        started: float,
        outcome: CallOutcome,
        arguments: Any,
    ) -> None:
        duration_ms = round((time.perf_counter() - started) * 1000, 3)
        instance = tool.instance if tool is not None else None
        event = _AUDIT_EVENTS.get(outcome.kind, "TOOL_EXECUTION_ERROR")
        fields = {
            "tool": name,
            "app": instance.app_name if instance else None,
            "instance": instance.instance_id if instance else None,
            "agent": caller.agent,
            "session": caller.session,
            "correlation_id": outcome.correlation_id,
            "duration_ms": duration_ms,
            "outcome": outcome.kind,
        }
        if outcome.kind == "ok":
            log.info(event, **fields)
        else:
            log.warning(event, error=outcome.message, **fields)
        if self._call_log is not None:
            self._call_log.record(
                tool=name,
                app=fields["app"],
                instance=fields["instance"],
                agent=caller.agent,
                session=caller.session,
                arguments=arguments,
                outcome=outcome,
                duration_ms=duration_ms,
            )
