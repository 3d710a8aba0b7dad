"""What the daemon is doing, for people and for Prometheus: the status page's state and ``/metrics``.

Theory of operation
-------------------
One :class:`Monitor` per daemon, built by the HTTP front door (``http.HttpApp``). Most of what
it reports is read from the daemon's own state only when someone asks (a scrape, a poll of the
status page): connected apps and their admission queues from the registry, calls in flight
from the correlation map, sessions from the :class:`~broker.mcp.server.McpServer`. That costs
nothing per call. What cannot be read later is counted as it happens, through two hooks:

* :meth:`call_ended`, one of the router's ``observers``, runs at every call's end: plain
  arithmetic on one list per (app, tool, outcome kind) — calls, seconds, the longest, a count
  per latency bucket — a ring of the last :data:`RECENT_CALLS` calls (names, queue and run
  time, outcome kind, correlation id, and a failure's message: the one the agent got, or with
  ``call_log_redact`` only one the daemon composed from names and numbers), and the charts'
  15-minute :class:`~broker.mcp.timeline.Timeline`. ``prometheus_client``'s own ``Counter`` and
  ``Histogram`` take a lock per update and cost ~4x as much per call (BENCHMARKS.md), so the
  scrape turns these lists into its metric families instead (the library's custom-collector
  pattern); the text format is still the library's.
* :meth:`registry_changed`, a registry listener, notices app links that appear (registrations)
  and go (disconnects) and folds a departed link's byte counts into the running totals, so
  ``toolbridge_app_bytes_total`` is a true counter across reconnects.

Metrics live in a :class:`prometheus_client.CollectorRegistry` of the daemon's own (never the
process-global one: two daemons in one process, as in the tests, do not mix), exposed by
:meth:`Monitor.exposition`. Label values are names of registered tools and apps only: a call of
an unknown tool counts under ``tool=""``, so an agent cannot grow the series without bound.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import (
    CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, InfoMetricFamily, Metric,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

from ..core.outcome import CallerInfo, CallOutcome, OutcomeKind
from ..version import VERSION
from .timeline import LATENCY_BUCKETS, Timeline, quantile

if TYPE_CHECKING:
    from ..core.registry import RegisteredTool
    from .server import McpServer

__all__ = ["Monitor", "RECENT_CALLS", "LATENCY_BUCKETS"]

#: How many finished calls the status page shows.
RECENT_CALLS: Final = 50
#: Longest error or progress message the page is sent (the call log keeps the whole).
_MAX_MESSAGE_CHARS: Final = 500
#: Series (app, tool, kind) kept before those of tools no longer registered are dropped.
_MAX_SERIES: Final = 10_000
#: The ``tool`` label of calls of a tool nobody offers (one series, whatever name was asked for).
UNKNOWN_TOOL: Final = "(unknown)"
#: A series: [calls, longest ms, then for each of the three histograms (whole call, waiting for
#: an admission slot, running at the app) its sum of seconds, then their bucket counts].
_CALLS, _MAX_MS, _SUMS = 0, 1, 2
_BUCKETS: Final = len(LATENCY_BUCKETS) + 1
_FIRST_BUCKET: Final = _SUMS + 3
#: The histograms: (metric name, help, index in the sums).
_HISTOGRAMS: Final = (
    ("toolbridge_call_duration_seconds", "Time from a call's arrival to its outcome, by app and tool", 0),
    ("toolbridge_call_queue_seconds", "Time a call waited for one of its app's admission slots", 1),
    ("toolbridge_call_run_seconds", "Time a call held an admission slot: sent to the app until it ended", 2),
)


class Monitor:
    """Counts and reads the daemon's activity (see the module docstring)."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.router = server.router
        self.apps = server.registry
        #: When counting began: the HTTP server starts with the daemon.
        self.started_at = time.time()
        self.registry = CollectorRegistry()
        #: Per (app, the tool's own name, its agent-facing name, outcome kind): see ``_CALLS``.
        self._series: dict[tuple[str, str, str, str], list[float]] = {}
        self.registry.register(_StateCollector(self))
        # The process's CPU, memory and descriptors (process_*: Linux; nothing where /proc is absent).
        ProcessCollector(registry=self.registry)
        for collector in server.metrics_collectors:
            self.registry.register(collector)
        #: The last calls, newest last: (unix time, tool, app label, agent, session, ms, kind, message,
        #: queued ms, correlation id).
        self.recent: collections.deque[tuple[float, str, str, str | None, str | None, float, str, str | None,
                                             float, int | None]] = collections.deque(maxlen=RECENT_CALLS)
        #: The charts' last 15 minutes.
        self.timeline = Timeline()
        #: ``call_log_redact``: the page then shows only messages the daemon composed from names
        #: and numbers, as the redacted call log keeps them; else the text the agent was given.
        self.redact = bool(getattr(server.settings, "call_log_redact", False))
        self.registrations = 0
        self.disconnects = 0
        #: Bytes read from and written to app links that have gone (live ones are read at scrape).
        self.departed_bytes = [0, 0]
        self._links: dict[int, Any] = {}
        self.router.observers.append(self.call_ended)
        self.apps.on_change(self.registry_changed)
        self.registry_changed()

    # --- the hooks -----------------------------------------------------------------------------

    def call_ended(self, name: str, tool: RegisteredTool | None, caller: CallerInfo, duration_ms: float,
                   outcome: CallOutcome, queued_ms: float = 0.0) -> None:
        """A router observer: count one finished call (plain arithmetic; see the module docstring)."""
        kind = outcome.kind
        if tool is not None:
            key = (tool.instance.app_name, tool.spec.name, name, kind.value)
            label = tool.instance.label
        else:
            key, label = ("", UNKNOWN_TOOL, "", kind.value), ""
        series = self._series.get(key)
        if series is None:
            series = self._new_series(key)
        series[_CALLS] += 1
        if duration_ms > series[_MAX_MS]:
            series[_MAX_MS] = duration_ms
        for index, ms in enumerate((duration_ms, queued_ms, duration_ms - queued_ms)):
            seconds = ms / 1000
            series[_SUMS + index] += seconds
            series[_FIRST_BUCKET + index * _BUCKETS + bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
        now = time.time()
        self.recent.append((now, name, label, caller.agent, caller.session, duration_ms, kind.value,
                            self._shown_message(outcome), queued_ms, outcome.correlation_id))
        self.timeline.record(now, label, duration_ms / 1000, None if kind is OutcomeKind.OK else kind.value)

    def _shown_message(self, outcome: CallOutcome) -> str | None:
        """What the page says about a failure: the message the agent got, or with ``call_log_redact``
        only one the daemon composed from names and numbers (as the redacted call log keeps)."""
        kind = outcome.kind
        if kind is OutcomeKind.OK:
            return None
        if self.redact and not (kind.value_free and outcome.result is None):
            return None
        return _clip(outcome.message or kind.value)

    def _new_series(self, key: tuple[str, str, str, str]) -> list[float]:
        if len(self._series) >= _MAX_SERIES:  # keep the tools still registered; the rest restart at 0
            registry = self.apps
            self._series = {k: v for k, v in self._series.items() if not k[2] or registry.lookup(k[2])}
        series = self._series[key] = [0, 0.0] + [0.0] * 3 + [0] * (3 * _BUCKETS)
        return series

    def registry_changed(self) -> None:
        """Notice app links that came (registered) and went (disconnected).

        A registry listener, and also run before every read: a registration changes the registry
        (listeners run), a disconnect only pulses ``changed``, so it is noticed at the next read
        or change; the departed link's byte counts are final by then, and exact."""
        live = {id(link): link for i in self.apps.instances() if (link := i.link) is not None}
        for key, link in self._links.items():
            if key not in live:
                self.disconnects += 1
                self.departed_bytes[0] += _bytes(link, "bytes_received")
                self.departed_bytes[1] += _bytes(link, "bytes_sent")
        self.registrations += sum(1 for key in live if key not in self._links)
        self._links = live

    # --- reading -------------------------------------------------------------------------------

    def exposition(self) -> bytes:
        """The metrics in the Prometheus text format."""
        return generate_latest(self.registry)

    def app_bytes(self) -> tuple[int, int]:
        """Bytes read from and written to app links since the daemon started."""
        self.registry_changed()
        received, sent = self.departed_bytes
        for link in self._links.values():
            received += _bytes(link, "bytes_received")
            sent += _bytes(link, "bytes_sent")
        return received, sent

    def state(self) -> dict[str, Any]:
        """What the status page shows, as JSON-ready values."""
        now = time.perf_counter()
        trio_now = _trio_time()
        apps = []
        for instance in self.apps.instances():
            linked = instance.link is not None
            apps.append({
                "label": instance.label, "app": instance.app_name, "instance": instance.instance_id,
                "version": instance.app_version,
                "state": "connected" if linked else "reconnecting",
                "graceSeconds": None if linked or instance.grace_deadline is None or trio_now is None
                else round(max(0.0, instance.grace_deadline - trio_now), 1),
                "tools": sorted(t.agent_name for t in instance.tools.values()),
                "inFlight": instance.admission.active, "queued": instance.admission.waiting,
            })
        sessions = []
        for session in sorted(self.server.open_sessions, key=lambda s: s.label or ""):
            sessions.append({
                "label": session.label, "transport": session.transport, "client": session.client_name,
                "clientVersion": session.client_version, "discovery": session.discovery,
                "mode": _mode(session),
                "inFlight": session.in_flight,
                "idleSeconds": None if trio_now is None else round(trio_now - session.last_activity, 1),
            })
        calls = []
        for call in self.router.calls:
            elapsed_ms = (now - call.started) * 1000
            admitted = call.admitted_at
            running_ms = 0.0 if admitted is None or trio_now is None else min(elapsed_ms, (trio_now - admitted) * 1000)
            calls.append({
                "id": call.correlation_id, "tool": call.name, "app": call.tool.instance.label,
                "agent": call.caller.agent, "session": call.caller.session,
                "elapsedMs": round(elapsed_ms), "timeoutMs": round(call.timeout * 1000),
                # Waiting for an admission slot, then running at the app: shown apart.
                "queuedMs": round(elapsed_ms - running_ms), "runMs": round(running_ms),
                "progress": None if call.last_progress is None else {
                    "progress": call.last_progress, "total": call.last_total,
                    "message": None if self.redact or call.last_message is None else _clip(call.last_message)},
            })
        recent = [
            {"at": at, "tool": tool, "app": app, "agent": agent, "session": session, "durationMs": round(ms, 1),
             "queuedMs": round(queued, 1), "runMs": round(ms - queued, 1), "outcome": kind, "message": message,
             "id": cid, "logs": None if cid is None else f"toolbridge logs --id {cid} --json"}
            for at, tool, app, agent, session, ms, kind, message, queued, cid in reversed(self.recent)
        ]
        return {
            "daemon": {"version": VERSION, "pid": os.getpid(), "uptimeSeconds": round(time.time() - self.started_at),
                       "callLogRedact": self.redact},
            "apps": apps, "sessions": sessions,
            "agentConnections": sum(1 for s in self.server.open_sessions if s.transport == "stdio"),
            "calls": calls, "recent": recent, "tools": self._per_tool(),
            "timeline": self.timeline.series(time.time()),
        }

    def _per_tool(self) -> list[dict[str, Any]]:
        """Count, failures, mean, max and p50/p95/p99 per tool, from the histogram ``/metrics`` serves."""
        per_tool: dict[str, list[float]] = {}  # calls, failures, seconds, max ms, then the buckets
        for (_, _, name, kind), series in self._series.items():
            if name:
                entry = per_tool.setdefault(name, [0, 0, 0.0, 0.0] + [0] * _BUCKETS)
                entry[0] += series[_CALLS]
                entry[1] += series[_CALLS] if kind != OutcomeKind.OK else 0
                entry[2] += series[_SUMS]
                entry[3] = max(entry[3], series[_MAX_MS])
                for i in range(_BUCKETS):
                    entry[4 + i] += series[_FIRST_BUCKET + i]
        tools = []
        for name, entry in sorted(per_tool.items()):
            n, failed, total, worst, buckets = entry[0], entry[1], entry[2], entry[3], entry[4:]
            tools.append({"tool": name, "calls": int(n), "failures": int(failed), "meanMs": round(total * 1000 / n, 1),
                          "maxMs": round(worst, 1),
                          # Interpolated inside a bucket (as histogram_quantile), so never past the longest seen.
                          **{f"p{q}Ms": _rounded_ms(quantile(q / 100, buckets), worst) for q in (50, 95, 99)}})
        return tools


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE_CHARS else text[:_MAX_MESSAGE_CHARS] + "…"


def _rounded_ms(seconds: float | None, most_ms: float) -> float | None:
    return None if seconds is None else round(min(seconds * 1000, most_ms), 1)


def _mode(session: Any) -> str:
    """What a session lists: code mode is discovery with other tools, and says so."""
    if getattr(session, "code", False):
        return "code"
    if session.discovery:
        return "discovery"
    app = getattr(session, "app", None)
    return f"only {app}" if app else "all tools"


def _bytes(link: Any, what: str) -> int:
    conn = getattr(link, "conn", None)  # an in-process test link has none
    value = getattr(conn, what, 0)
    return value if isinstance(value, int) else 0


def _trio_time() -> float | None:
    import trio

    try:
        return trio.current_time()
    except RuntimeError:  # outside trio (a scrape is always inside; a test may not be)
        return None


class _StateCollector(Collector):
    """The gauges and counters read from the daemon's state at each scrape."""

    def __init__(self, monitor: Monitor) -> None:
        self._monitor = monitor

    def describe(self) -> Iterator[Metric]:
        return iter(())  # unchecked: names come from collect() (no duplicates with the counters)

    def collect(self) -> Iterator[Metric]:
        monitor = self._monitor
        yield InfoMetricFamily("toolbridge_build", "The daemon's version", value={"version": VERSION})
        calls = CounterMetricFamily("toolbridge_calls", "Tool calls ended, by app, tool (its own name; "
                                    f"{UNKNOWN_TOOL} for names nobody offers) and outcome kind",
                                    labels=["app", "tool", "outcome"])
        merged: dict[tuple[str, str], list[float]] = {}  # the histograms: every kind of outcome
        counts: dict[tuple[str, str, str], float] = {}  # two instances of an app: one series
        for (app, tool, _, kind), series in sorted(monitor._series.items()):
            counts[(app, tool, kind)] = counts.get((app, tool, kind), 0) + series[_CALLS]
            into = merged.setdefault((app, tool), [0.0] * len(series))
            for i, value in enumerate(series):
                into[i] += value
        for labels, value in counts.items():
            calls.add_metric(list(labels), value)
        yield calls
        bounds = [*(str(b) for b in LATENCY_BUCKETS), "+Inf"]
        for name, documentation, index in _HISTOGRAMS:
            histogram = HistogramMetricFamily(name, documentation, labels=["app", "tool"])
            first = _FIRST_BUCKET + index * _BUCKETS
            for (app, tool), series in merged.items():
                cumulative = list(itertools.accumulate(series[first:first + _BUCKETS]))
                histogram.add_metric([app, tool], list(zip(bounds, cumulative)), sum_value=series[_SUMS + index])
            yield histogram
        monitor.registry_changed()
        instances = monitor.apps.instances()
        apps = GaugeMetricFamily("toolbridge_apps", "App instances registered, by state", labels=["state"])
        linked = sum(1 for i in instances if i.link is not None)
        apps.add_metric(["connected"], linked)
        apps.add_metric(["reconnecting"], len(instances) - linked)
        yield apps
        in_flight = GaugeMetricFamily("toolbridge_calls_in_flight", "Calls holding an admission slot, by app",
                                      labels=["app"])
        queued = GaugeMetricFamily("toolbridge_calls_queued", "Calls waiting for an admission slot, by app",
                                   labels=["app"])
        for instance in instances:
            in_flight.add_metric([instance.label], instance.admission.active)
            queued.add_metric([instance.label], instance.admission.waiting)
        yield in_flight
        yield queued
        yield GaugeMetricFamily("toolbridge_calls_awaiting_answer", "Calls sent to apps and not answered yet",
                                value=len(monitor.router.calls))
        sessions = GaugeMetricFamily("toolbridge_agent_sessions",
                                     "MCP sessions open (stdio, and handshake-era HTTP), by transport",
                                     labels=["transport"])
        by_transport = collections.Counter(s.transport for s in monitor.server.open_sessions)
        for transport in ("stdio", "http", *sorted(set(by_transport) - {"stdio", "http"})):
            sessions.add_metric([transport], by_transport.get(transport, 0))
        yield sessions
        yield GaugeMetricFamily("toolbridge_tools", "Tools offered to agents", value=len(monitor.apps.tools()))
        registrations = CounterMetricFamily("toolbridge_app_registrations", "App links registered")
        registrations.add_metric([], monitor.registrations)
        yield registrations
        disconnects = CounterMetricFamily("toolbridge_app_disconnects", "App links that went away")
        disconnects.add_metric([], monitor.disconnects)
        yield disconnects
        received, sent = monitor.app_bytes()
        relayed = CounterMetricFamily("toolbridge_app_bytes", "Bytes on app links, by direction",
                                      labels=["direction"])
        relayed.add_metric(["received"], received)
        relayed.add_metric(["sent"], sent)
        yield relayed
        yield GaugeMetricFamily("toolbridge_uptime_seconds", "Seconds since the daemon started",
                                value=time.time() - monitor.started_at)
