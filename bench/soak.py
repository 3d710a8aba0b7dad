"""Soak: many calls with random faults against a real daemon; then check that nothing leaked.

Usage::

    python bench/soak.py --minutes 30            # the long run
    python bench/soak.py --seconds 30 --seed 42  # a short one (tests/test_soak.py runs this size)
    python bench/soak.py ... --json              # one JSON object on stdout

Exit status 0 when every check passed, 1 otherwise (the problems are printed).

Theory of operation
-------------------
One trio run holds the daemon (:func:`broker.daemon.run.run_daemon`, real TCP on 127.0.0.1, port
0, its own temporary home), the apps and the agents:

* in-process apps built on ``app_client`` (tools ``echo``, ``sync_echo`` in a worker thread,
  ``slow``, ``fail``, ``hang``), each run by a supervisor that can *crash* it — cancel it
  abruptly, which closes its socket without a goodbye — and restart it after a random delay:
  either within the daemon's reconnect grace with the same ``instance_id`` (calls waiting for
  it must go through) or later as a new instance;
* ``--process-apps`` real app processes (this script with ``--app``) that are SIGKILLed and
  restarted the same way;
* caller tasks that call the router directly, with random timeouts (some shorter than the
  tool takes), cancellations and slow handlers, and MCP agents on the ``agentConnect`` link
  (what ``toolbridge stdio`` uses) that send ``notifications/cancelled`` and sometimes drop
  their link mid-call.

The run has two phases. A warm-up without faults ends with a quiet point — callers stopped,
every app connected and idle — where the baseline is taken: trio tasks under the soak's
nursery and under the daemon's, open file descriptors (``/proc/self/fd``, Linux only) and
RSS after ``gc.collect()``. The fault phase ends at a quiet point of the same shape, where
the same measures are taken again. Then the checks:

* every call issued was resolved exactly once (outcomes counted against calls issued; the
  router's entries against its audit records; no MCP request answered twice, every MCP
  request neither cancelled nor cut off answered once), with an expected kind, and every
  successful result is the one asked for (no cross-talk);
* the correlation map is empty and every admission counter is zero;
* the task count, descriptor count and RSS came back to the baseline (within tolerances);
  app_client's parked call tasks are counted apart: a busier phase may leave more of them
  parked, up to its pool's bound, which is checked instead;
* nothing was logged at error level (internal errors, crashed connections);
* every failure came when its cause says it should: a call failed ``app_disconnected`` within
  the reconnect grace (plus a small tolerance) of its app's crash — at once if it was in
  flight, at the end of grace if it waited for the app — and a timeout came at the call's
  deadline, not later; and no call sent on a link ended any other way than
  ``app_disconnected`` after that link had closed (a call left waiting on a dead link).

Randomness comes from one seeded ``random.Random`` (the seed is printed); trio's scheduling
is not seeded, so a run with the same seed makes the same choices, not the same interleaving.
"""

from __future__ import annotations

import argparse
import collections
import gc
import itertools
import json
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import structlog
import trio

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from app_client import App, Backoff, ConnectionState, ToolContext, ToolError  # noqa: E402
from app_client.session import CALL_TASK_NAME, MAX_IDLE_CALL_TASKS  # noqa: E402
from broker.config.settings import Settings  # noqa: E402
from broker.daemon.broker_core import BrokerCore  # noqa: E402
from broker.daemon.run import DaemonInfo, run_daemon  # noqa: E402

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "soak", "version": "1"},
}
#: Outcome kinds any call may end with while apps crash and come back.
FAULT_KINDS = frozenset({"app_disconnected", "unknown_tool", "busy", "timeout"})
NEVER_KINDS = frozenset({"internal_error", "shutdown", "invalid_arguments", "guard_rejected"})
#: How late a failure may come after its cause (scheduling on a loaded 2-core machine). The
#: causes are seconds apart at most, so a call left hanging shows up far beyond this.
LATENESS_TOLERANCE = 0.5


@attrs.define
class SoakConfig:
    seconds: float = 30.0
    seed: int | None = None
    #: Share of the run spent warming up (no faults) before the baseline is taken.
    warmup_fraction: float = 0.2
    apps: int = 4
    process_apps: int = 1
    callers: int = 12
    mcp_agents: int = 2
    #: Mean seconds between two faults (crash of an app or SIGKILL of an app process).
    fault_every: float = 1.0
    reconnect_grace: float = 1.0
    #: Allowed growth between baseline and end.
    rss_tolerance_bytes: int = 24 * 1024 * 1024
    task_tolerance: int = 0
    fd_tolerance: int = 0
    home: Path | None = None
    quiet: bool = True


@attrs.define
class Snapshot:
    #: Tasks under the soak's nursery, app_client's call tasks (parked ones) excluded.
    soak_tasks: int
    daemon_tasks: int
    #: app_client's call tasks: parked between calls at a quiet point.
    call_tasks: int
    fds: int | None
    rss: int | None


@attrs.define
class SoakReport:
    seed: int
    seconds: float
    issued: int = 0
    outcomes: collections.Counter[str] = attrs.Factory(collections.Counter)
    duplicates: int = 0
    unresolved: int = 0
    router_entries: int = 0
    router_audits: int = 0
    mcp_requests: int = 0
    mcp_answered: int = 0
    mcp_cancelled: int = 0
    mcp_cut_off: int = 0
    mcp_duplicates: int = 0
    mcp_unanswered: int = 0
    faults: collections.Counter[str] = attrs.Factory(collections.Counter)
    max_daemon_tasks: int = 0
    baseline: Snapshot | None = None
    end: Snapshot | None = None
    pending_calls_at_end: int = -1
    error_events: list[str] = attrs.Factory(list)
    #: Failure latencies, each against its cause: ``app_disconnected`` after the app's crash,
    #: ``timeout`` after the call's deadline (seconds, the largest seen).
    max_disconnect_after_crash: float = 0.0
    max_timeout_after_deadline: float = 0.0
    #: Calls that ended other than ``app_disconnected`` after the link they were sent on closed.
    ended_on_dead_link: int = 0
    problems: list[str] = attrs.Factory(list)

    def as_dict(self) -> dict[str, Any]:
        data = attrs.asdict(self)
        data["outcomes"] = dict(self.outcomes)
        data["faults"] = dict(self.faults)
        return data


# --- measuring ---------------------------------------------------------------------------------


def count_tasks(task: trio.lowlevel.Task) -> int:
    """Tasks below ``task`` (itself excluded), through every nursery."""
    return sum(count_task_kinds(task))


def count_task_kinds(task: trio.lowlevel.Task) -> tuple[int, int]:
    """Tasks below ``task``: (app_client's call tasks, every other task).

    app_client keeps call tasks parked for the next call (at most ``MAX_IDLE_CALL_TASKS`` per
    link), so after a busier phase there may be more of them than at the baseline, which is
    no leak: they are counted apart and checked against that bound.
    """
    calls = others = 0
    for nursery in task.child_nurseries:
        for child in nursery.child_tasks:
            if child.name == CALL_TASK_NAME:
                calls += 1
            else:
                others += 1
            below_calls, below_others = count_task_kinds(child)
            calls += below_calls
            others += below_others
    return calls, others


def open_fds() -> int | None:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return None


def rss_bytes() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


# --- apps ---------------------------------------------------------------------------------------


def build_app(name: str, instance_id: str, max_concurrency: int, **options: Any) -> App:
    """The soak's app: the same tools in-process and in ``--app`` processes."""
    app = App(name, instance_id=instance_id, max_concurrency=max_concurrency,
              backoff=Backoff(initial=0.05, cap=0.5), **options)

    @app.tool
    async def echo(text: str) -> str:
        """Return the text."""
        return text

    @app.tool
    def sync_echo(text: str) -> str:
        """Return the text, from a worker thread."""
        return text

    @app.tool
    async def slow(text: str, seconds: float) -> str:
        """Sleep, then return the text."""
        await trio.sleep(seconds)
        return text

    @app.tool
    async def fail(text: str) -> str:
        """Always fails with the text."""
        raise ToolError(f"failed: {text}")

    @app.tool
    async def hang(ctx: ToolContext) -> str:
        """Never answers."""
        await trio.sleep_forever()
        return ""  # pragma: no cover

    return app


class AppSlot:
    """One app name: its current instance, crashed and restarted by the fault scheduler."""

    def __init__(self, soak: Soak, name: str, max_concurrency: int) -> None:
        self.soak = soak
        self.name = name
        self.max_concurrency = max_concurrency
        self.generation = 0
        self.instance_id = f"{name}-0"
        self.agent_names: dict[str, str] = {}
        self.connected = trio.Event()
        self._scope: trio.CancelScope | None = None
        self._stopped = trio.Event()
        self._stopped.set()

    def tool(self, tool: str) -> str:
        return self.agent_names.get(tool, f"{self.name}__{tool}")

    def _on_state(self, app: App, state: ConnectionState) -> None:
        if state is ConnectionState.CONNECTED:
            self.agent_names = dict(app.agent_names)
            self.connected.set()
        elif self.connected.is_set():
            self.connected = trio.Event()

    async def start(self, nursery: trio.Nursery) -> None:
        self._stopped = trio.Event()
        self._scope = trio.CancelScope()
        app = build_app(self.name, self.instance_id, self.max_concurrency, home=self.soak.home,
                        on_state_change=lambda state: self._on_state(app, state))
        nursery.start_soon(self._run, app, self._scope, self._stopped)

    async def _run(self, app: App, scope: trio.CancelScope, stopped: trio.Event) -> None:
        try:
            with scope:
                await app.run()
        finally:
            stopped.set()

    async def crash(self) -> None:
        assert self._scope is not None
        self._scope.cancel()
        await self._stopped.wait()
        if self.connected.is_set():
            self.connected = trio.Event()

    async def stop(self) -> None:
        if self._scope is not None:
            self._scope.cancel()
            await self._stopped.wait()

    def new_instance(self) -> None:
        self.generation += 1
        self.instance_id = f"{self.name}-{self.generation}"


class ProcessSlot(AppSlot):
    """An app in a real process (this script with ``--app``), SIGKILLed by the fault scheduler."""

    process: subprocess.Popen[bytes] | None = None

    async def start(self, nursery: trio.Nursery) -> None:
        command = [sys.executable, str(Path(__file__).resolve()), "--app", "--home", str(self.soak.home),
                   "--name", self.name, "--instance-id", self.instance_id,
                   "--max-concurrency", str(self.max_concurrency)]
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        self.connected = trio.Event()
        nursery.start_soon(self._watch_registration)

    async def _watch_registration(self) -> None:
        registry = self.soak.core.registry
        process = self.process
        while self.process is process:
            instance = next((i for i in registry.instances()
                             if i.app_name == self.name and i.instance_id == self.instance_id), None)
            if instance is not None and instance.link is not None:
                self.agent_names = instance.tool_names()
                self.connected.set()
                return
            await trio.sleep(0.02)

    async def crash(self) -> None:
        process = self.process
        assert process is not None
        process.send_signal(signal.SIGKILL if hasattr(signal, "SIGKILL") else signal.SIGTERM)
        await trio.to_thread.run_sync(process.wait)
        self.process = None
        if self.connected.is_set():
            self.connected = trio.Event()

    async def stop(self) -> None:
        if self.process is not None:
            await self.crash()


def app_process_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--app", action="store_true")
    parser.add_argument("--home", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--instance-id", required=True)
    parser.add_argument("--max-concurrency", type=int, default=8)
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    trio.run(build_app(args.name, args.instance_id, args.max_concurrency, home=args.home).run)


# --- the soak -----------------------------------------------------------------------------------


class Soak:
    def __init__(self, config: SoakConfig, seed: int) -> None:
        self.config = config
        self.rng = random.Random(seed)
        self.report = SoakReport(seed=seed, seconds=config.seconds)
        self.home = Path(".")
        self.core: BrokerCore = None  # type: ignore[assignment]
        self.slots: list[AppSlot] = []
        self._ids = itertools.count(1)
        #: Calls issued and not yet resolved (bounded by the calls in flight, so it does not
        #: grow with the run and skew the RSS measure).
        self.unresolved: set[int] = set()
        self.calling = False
        self.faulting = False
        #: Trio times at which each app (slot name) was crashed or killed.
        self.crashes: dict[str, list[float]] = collections.defaultdict(list)

    # --- the router, watched -------------------------------------------------------------------

    def _instrument(self, core: BrokerCore) -> None:
        router = core.router
        start_call, audit = router.start_call, router._audit
        report = self.report

        def counted_start_call(*args: Any, **kwargs: Any) -> Any:
            report.router_entries += 1  # every call, from MCP or call_tool, starts here
            return start_call(*args, **kwargs)

        def counted_audit(*args: Any, **kwargs: Any) -> None:
            report.router_audits += 1
            audit(*args, **kwargs)

        router.start_call = counted_start_call  # type: ignore[method-assign]
        router._audit = counted_audit  # type: ignore[method-assign]
        self._watch_dead_links(core)

    def _watch_dead_links(self, core: BrokerCore) -> None:
        """Flag a call that ends other than ``app_disconnected`` after its link closed.

        ``core.links`` (the daemon's live app links) loses a link the moment its reader ends, just
        before the link's calls are failed: from then on, any other ending of a call sent on
        it means the call was left waiting on a dead link.
        """
        router = core.router
        finish = router._finish
        live_links = core.links

        def watched_finish(call: Any, outcome: Any, **kwargs: Any) -> bool:
            link = call.link
            if (not call.done and call.sent and link is not None and link.id not in live_links
                    and outcome.kind != "app_disconnected"):
                self.report.ended_on_dead_link += 1
                self._problem(f"{call.name}: ended {outcome.kind} after its link {link.id} had closed "
                              f"({outcome.message})")
            return finish(call, outcome, **kwargs)

        router._finish = watched_finish  # type: ignore[method-assign]

    def _record(self, call_id: int, kind: str) -> None:
        if call_id in self.unresolved:
            self.unresolved.remove(call_id)
        else:
            self.report.duplicates += 1
        self.report.outcomes[kind] += 1

    def _problem(self, text: str) -> None:
        if len(self.report.problems) < 50:
            self.report.problems.append(text)

    # --- callers through the router ------------------------------------------------------------

    async def caller(self) -> None:
        rng = self.rng
        while self.calling:
            slot = rng.choice(self.slots)
            call_id = next(self._ids)
            self.report.issued += 1
            self.unresolved.add(call_id)
            text = f"call-{call_id}"
            roll = rng.random()
            cancel_after: float | None = None
            if roll < 0.45:
                tool, args, timeout = "echo", {"text": text}, 3.0
            elif roll < 0.55:
                tool, args, timeout = "sync_echo", {"text": text}, 3.0
            elif roll < 0.70:
                seconds = rng.uniform(0, 0.3)
                tool, args, timeout = "slow", {"text": text, "seconds": seconds}, rng.choice([0.1, 0.2, 2.0])
            elif roll < 0.78:
                tool, args, timeout = "fail", {"text": text}, 3.0
            elif roll < 0.85:
                tool, args, timeout = "hang", {}, rng.uniform(0.05, 0.3)
            else:
                tool, args, timeout = rng.choice(["hang", "slow"]), {"text": text, "seconds": 0.5}, 3.0
                if tool == "hang":
                    args = {}
                cancel_after = rng.uniform(0, 0.2)
            name = slot.tool(tool)
            outcome = None
            started = trio.current_time()
            with trio.move_on_after(cancel_after if cancel_after is not None else float("inf")):
                outcome = await self.core.router.call_tool(name, args, timeout=timeout)
            if outcome is None:
                self._record(call_id, "cancelled")
                continue
            self._record(call_id, outcome.kind)
            self._check(tool, text, outcome)
            self._check_latency(slot, tool, outcome.kind, started, timeout)
            if outcome.kind in ("app_disconnected", "unknown_tool", "busy"):
                await trio.sleep(0.01)  # do not spin while an app is away

    def _check(self, tool: str, text: str, outcome: Any) -> None:
        kind = outcome.kind
        if kind in NEVER_KINDS:
            self._problem(f"{tool}: unexpected outcome {kind}: {outcome.message}")
        elif kind == "ok":
            data = outcome.result.data if outcome.result is not None else None
            if tool in ("fail", "hang") or data != text:
                self._problem(f"{tool}: wrong result {data!r} for {text!r}")
        elif kind == "app_error":
            message = outcome.message
            if tool == "fail":
                if message != f"failed: {text}":
                    self._problem(f"fail: wrong error {message!r} for {text!r}")
            elif "timed out" not in message and "busy" not in message:
                self._problem(f"{tool}: unexpected app error {message!r}")
        elif kind not in FAULT_KINDS:
            self._problem(f"{tool}: unexpected outcome {kind}: {outcome.message}")

    def _check_latency(self, slot: AppSlot, tool: str, kind: str, started: float, timeout: float) -> None:
        """Did the failure come when its cause says it should?"""
        ended = trio.current_time()
        report = self.report
        if kind == "timeout":
            # The router gives up at the deadline plus a margin of at most 0.5 s (router.py).
            late = ended - (started + timeout)
            report.max_timeout_after_deadline = max(report.max_timeout_after_deadline, late)
            if late > min(0.5, timeout * 0.1) + LATENESS_TOLERANCE:
                self._problem(f"{tool}: timed out {late:.2f} s after its {timeout:g} s deadline")
        elif kind == "app_disconnected":
            crashes = [t for t in self.crashes[slot.name] if t <= ended]
            if not crashes:
                self._problem(f"{tool}: app_disconnected but {slot.name} never crashed")
                return
            # In flight: failed at the crash. Waiting for the app: at the end of its grace.
            after = ended - max(crashes[-1], started)
            report.max_disconnect_after_crash = max(report.max_disconnect_after_crash, after)
            if after > self.config.reconnect_grace + LATENESS_TOLERANCE:
                self._problem(f"{tool}: failed app_disconnected {after:.2f} s after {slot.name} crashed "
                              f"(grace {self.config.reconnect_grace:g} s)")

    # --- MCP agents on the agentConnect link -----------------------------------------------------

    async def mcp_agent(self, number: int) -> None:
        rng = self.rng
        report = self.report
        while self.calling:
            stream = await trio.open_tcp_stream("127.0.0.1", self.port)
            answers: dict[int, list[dict[str, Any]]] = {}
            waiting: dict[int, trio.Event] = {}
            await stream.send_all(json.dumps({"type": "agentConnect", "token": self.token}).encode() + b"\n")
            async with trio.open_nursery() as link:
                hello = trio.Event()
                link.start_soon(self._mcp_read, stream, answers, waiting, hello)
                with trio.fail_after(10):
                    await hello.wait()
                for _ in range(rng.randint(5, 40)):
                    if not self.calling:
                        break
                    request_id = next(self._ids)
                    report.mcp_requests += 1
                    slot = rng.choice(self.slots)
                    text = f"mcp-{request_id}"
                    slow = rng.random() < 0.3
                    tool = "slow" if slow else "echo"
                    arguments = {"text": text, "seconds": rng.uniform(0, 0.3)} if slow else {"text": text}
                    waiting[request_id] = trio.Event()
                    request = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                               "params": {"name": slot.tool(tool), "arguments": arguments,
                                          "_meta": {**MODERN_META, "toolbridge/timeoutMs": 3000}}}
                    await stream.send_all(json.dumps(request).encode() + b"\n")
                    action = rng.random()
                    if action < 0.15:  # cancel it
                        await trio.sleep(rng.uniform(0, 0.1))
                        note = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                                "params": {"requestId": request_id, "reason": "soak"}}
                        await stream.send_all(json.dumps(note).encode() + b"\n")
                        report.mcp_cancelled += 1
                        with trio.move_on_after(0.5):  # a race: the answer may already be on its way
                            await waiting[request_id].wait()
                        self._mcp_count(answers, request_id, cancelled=True)
                    elif action < 0.20:  # the agent's link goes away mid-call
                        await trio.sleep(rng.uniform(0, 0.1))
                        report.mcp_cut_off += 1
                        self._mcp_count(answers, request_id, cancelled=True)
                        break
                    else:
                        with trio.move_on_after(15):
                            await waiting[request_id].wait()
                        self._mcp_count(answers, request_id, cancelled=False, text=text)
                link.cancel_scope.cancel()
            await trio.aclose_forcefully(stream)
            for request_id, got in answers.items():
                if len(got) > 1:
                    report.mcp_duplicates += 1
                    self._problem(f"MCP request {request_id} answered {len(got)} times")

    async def _mcp_read(self, stream: trio.SocketStream, answers: dict[int, list[dict[str, Any]]],
                        waiting: dict[int, trio.Event], hello: trio.Event) -> None:
        buffer = b""
        while True:
            try:
                chunk = await stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if not chunk:
                return
            buffer += chunk
            while b"\n" in buffer:
                line, _, buffer = buffer.partition(b"\n")
                message = json.loads(line)
                if message.get("type") == "agentConnected":
                    hello.set()
                elif "id" in message and "method" not in message:
                    answers.setdefault(message["id"], []).append(message)
                    if message["id"] in waiting:
                        waiting[message["id"]].set()

    def _mcp_count(self, answers: dict[int, list[dict[str, Any]]], request_id: int, *, cancelled: bool,
                   text: str | None = None) -> None:
        got = answers.get(request_id, [])
        if not got:
            if not cancelled:
                self.report.mcp_unanswered += 1
                self._problem(f"MCP request {request_id} was never answered")
            return
        self.report.mcp_answered += 1
        message = got[0]
        if "error" in message:
            if message["error"].get("code") != -32602:  # -32602: the tool is gone (its app expired)
                self._problem(f"MCP request {request_id}: JSON-RPC error {message['error']}")
            return
        result = message["result"]
        if not result.get("isError"):
            texts = [block.get("text") for block in result.get("content", [])]
            if text is not None and texts != [text]:
                self._problem(f"MCP request {request_id}: wrong result {texts!r} for {text!r}")
        else:
            kind = (result.get("_meta") or {}).get("toolbridge/errorKind")
            if kind not in FAULT_KINDS | {"app_error"}:
                self._problem(f"MCP request {request_id}: unexpected error kind {kind}: {result}")

    # --- faults --------------------------------------------------------------------------------

    async def faults(self, nursery: trio.Nursery) -> None:
        rng = self.rng
        grace = self.config.reconnect_grace
        while self.faulting:
            await trio.sleep(rng.expovariate(1 / self.config.fault_every))
            if not self.faulting:
                return
            slot = rng.choice(self.slots)
            if not slot.connected.is_set():
                continue
            kind = "sigkill" if isinstance(slot, ProcessSlot) else "crash"
            self.crashes[slot.name].append(trio.current_time())
            await slot.crash()
            if rng.random() < 0.6:
                delay = rng.uniform(0, grace * 0.5)
                self.report.faults[f"{kind}+restart_in_grace"] += 1
            else:
                delay = rng.uniform(grace * 1.2, grace * 2)
                slot.new_instance()
                self.report.faults[f"{kind}+restart_as_new_instance"] += 1
            nursery.start_soon(self._restart_later, slot, delay, nursery)

    async def _restart_later(self, slot: AppSlot, delay: float, nursery: trio.Nursery) -> None:
        await trio.sleep(delay)
        await slot.start(nursery)

    # --- phases --------------------------------------------------------------------------------

    async def _run_callers(self, seconds: float, faults: bool, nursery: trio.Nursery) -> None:
        self.calling = True
        self.faulting = faults
        async with trio.open_nursery() as helpers:
            if faults:
                helpers.start_soon(self.faults, nursery)
            helpers.start_soon(self._watch_tasks)
            async with trio.open_nursery() as load:
                for _ in range(self.config.callers):
                    load.start_soon(self.caller)
                for number in range(self.config.mcp_agents):
                    load.start_soon(self.mcp_agent, number)
                await trio.sleep(seconds)
                # Callers and agents finish their current call (bounded by its timeout).
                self.faulting = False
                self.calling = False
            helpers.cancel_scope.cancel()

    async def _watch_tasks(self) -> None:
        while self.calling:
            self.report.max_daemon_tasks = max(self.report.max_daemon_tasks, count_tasks(self.daemon_task))
            await trio.sleep(0.1)

    def _describe(self) -> str:
        core = self.core
        return (f"slots connected {[s.connected.is_set() for s in self.slots]}, calls in flight {len(core.calls)}, "
                f"agent sessions {core.agent_sessions}, instances {core.registry.summary()}")

    async def _quiet_point(self) -> None:
        """Every app connected and idle, nothing in flight, no instance in its grace period.

        Not reached within 30 s (something leaked or hangs): that is recorded as a problem and
        the measures are taken anyway.
        """
        with trio.move_on_after(30):
            while True:
                instances = self.core.registry.instances()
                idle = (
                    all(slot.connected.is_set() for slot in self.slots)
                    and len(self.core.calls) == 0
                    and len(instances) == len(self.slots)
                    and all(i.link is not None and i.admission.active == 0 and i.admission.waiting == 0
                            for i in instances)
                    and self.core.agent_sessions == 0
                )
                if idle:
                    await trio.sleep(0.3)  # let closed connections' handlers finish
                    return
                await trio.sleep(0.05)
        self._problem(f"no quiet point within 30 s: {self._describe()}")

    def _snapshot(self, root: trio.lowlevel.Task) -> Snapshot:
        gc.collect()
        call_tasks, soak_tasks = count_task_kinds(root)
        return Snapshot(soak_tasks, count_tasks(self.daemon_task), call_tasks, open_fds(), rss_bytes())

    async def run(self) -> SoakReport:
        config = self.config
        report = self.report
        with tempfile.TemporaryDirectory(prefix="toolbridge-soak-") as tmp:
            self.home = config.home or Path(tmp)
            settings = Settings(home=self.home, port=0, http_port=None, reconnect_grace=config.reconnect_grace)
            shutdown = trio.Event()
            async with trio.open_nursery() as nursery:
                root = trio.lowlevel.current_task()
                info: DaemonInfo = await nursery.start(self._daemon, settings, shutdown)
                self.core, self.port, self.token = info.core, info.port, info.token
                self._instrument(self.core)
                concurrency = itertools.cycle([1, 4, 16])
                self.slots = [AppSlot(self, f"SoakApp{i}", next(concurrency)) for i in range(config.apps)]
                self.slots += [ProcessSlot(self, f"SoakProc{i}", 8) for i in range(config.process_apps)]
                try:
                    for slot in self.slots:
                        await slot.start(nursery)
                    warmup = max(1.0, config.seconds * config.warmup_fraction)
                    await self._run_callers(warmup, False, nursery)
                    await self._quiet_point()
                    report.baseline = self._snapshot(root)
                    await self._run_callers(max(1.0, config.seconds - warmup), True, nursery)
                    await self._quiet_point()
                    report.end = self._snapshot(root)
                    report.pending_calls_at_end = len(self.core.calls)
                finally:
                    with trio.CancelScope(shield=True):
                        for slot in self.slots:
                            await slot.stop()
                    shutdown.set()
                    nursery.cancel_scope.deadline = trio.current_time() + 10
        self._judge()
        return report

    async def _daemon(self, settings: Settings, shutdown: trio.Event, *,
                      task_status: trio.TaskStatus[DaemonInfo]) -> None:
        self.daemon_task = trio.lowlevel.current_task()
        await run_daemon(settings, shutdown=shutdown, task_status=task_status)

    def _judge(self) -> None:
        report, config = self.report, self.config
        resolved = sum(report.outcomes.values())
        report.unresolved = len(self.unresolved)
        if resolved != report.issued or report.unresolved or report.duplicates:
            self._problem(f"calls issued {report.issued}, outcomes {resolved}, unresolved {report.unresolved}, "
                          f"resolved twice {report.duplicates}")
        if report.router_entries != report.router_audits:
            self._problem(f"router: {report.router_entries} calls entered, {report.router_audits} audited")
        if report.pending_calls_at_end != 0:
            self._problem(f"{report.pending_calls_at_end} entries left in the correlation map")
        if report.error_events:
            self._problem(f"{len(report.error_events)} error-level log events: {report.error_events[:5]}")
        base, end = report.baseline, report.end
        if base is None or end is None:
            self._problem("the run did not reach its measuring points")
            return
        if end.daemon_tasks > base.daemon_tasks + config.task_tolerance:
            self._problem(f"daemon tasks grew from {base.daemon_tasks} to {end.daemon_tasks}")
        if end.soak_tasks > base.soak_tasks + config.task_tolerance:
            self._problem(f"tasks grew from {base.soak_tasks} to {end.soak_tasks}")
        in_process_apps = sum(not isinstance(slot, ProcessSlot) for slot in self.slots)
        if end.call_tasks > MAX_IDLE_CALL_TASKS * in_process_apps:
            self._problem(f"{end.call_tasks} app_client call tasks at the quiet point, more than its pools keep "
                          f"({MAX_IDLE_CALL_TASKS} for each of {in_process_apps} apps)")
        if base.fds is not None and end.fds is not None and end.fds > base.fds + config.fd_tolerance:
            self._problem(f"open file descriptors grew from {base.fds} to {end.fds}")
        if base.rss is not None and end.rss is not None and end.rss > base.rss + config.rss_tolerance_bytes:
            self._problem(f"RSS grew from {base.rss / 2**20:.1f} MiB to {end.rss / 2**20:.1f} MiB")
        if report.outcomes["ok"] == 0:
            self._problem("no call succeeded")


def _count_errors(report: SoakReport) -> Callable[..., Any]:
    def processor(logger: Any, method: str, event: dict[str, Any]) -> Any:
        if method in ("error", "exception", "critical"):
            report.error_events.append(str(event.get("event")))
            return event
        raise structlog.DropEvent

    return processor


async def run_soak(config: SoakConfig) -> SoakReport:
    """Run one soak in the current trio run (see the module docstring); never raises for a
    failed check — read ``report.problems``."""
    seed = config.seed if config.seed is not None else int.from_bytes(os.urandom(4), "big")
    if not config.quiet:
        print(f"soak seed: {seed}", file=sys.stderr, flush=True)
    soak = Soak(config, seed)
    saved = structlog.get_config()
    structlog.configure(
        processors=[_count_errors(soak.report), structlog.processors.add_log_level,
                    structlog.processors.format_exc_info, structlog.dev.ConsoleRenderer(colors=False)],
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )
    try:
        return await soak.run()
    finally:
        structlog.configure(**saved)


def format_report(report: SoakReport) -> str:
    lines = [
        f"seed {report.seed}; {report.seconds:g} s",
        f"calls issued {report.issued}: " + ", ".join(f"{k} {v}" for k, v in sorted(report.outcomes.items())),
        f"router calls entered {report.router_entries}, audited {report.router_audits}",
        f"MCP requests {report.mcp_requests}: answered {report.mcp_answered}, cancelled {report.mcp_cancelled}, "
        f"cut off {report.mcp_cut_off}",
        "faults: " + ", ".join(f"{k} {v}" for k, v in sorted(report.faults.items())),
        f"daemon tasks at most {report.max_daemon_tasks}",
        f"failure latency: app_disconnected at most {report.max_disconnect_after_crash:.3f} s after its app's "
        f"crash, timeout at most {report.max_timeout_after_deadline:.3f} s after its deadline; "
        f"ended on a dead link {report.ended_on_dead_link}",
    ]
    for label, snap in (("baseline", report.baseline), ("end", report.end)):
        if snap is not None:
            rss = f"{snap.rss / 2**20:.1f} MiB" if snap.rss is not None else "n/a"
            lines.append(f"{label}: tasks {snap.soak_tasks} (daemon {snap.daemon_tasks}; app call tasks parked "
                         f"{snap.call_tasks}), fds {snap.fds}, RSS {rss}")
    lines.append("OK" if not report.problems else "PROBLEMS:\n  " + "\n  ".join(report.problems))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--app" in argv:
        app_process_main(argv)
        return 0
    parser = argparse.ArgumentParser(description="toolbridge soak: random faults, then leak checks")
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--minutes", type=float)
    length.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--apps", type=int, default=4)
    parser.add_argument("--process-apps", type=int, default=1)
    parser.add_argument("--callers", type=int, default=12)
    parser.add_argument("--mcp-agents", type=int, default=2)
    parser.add_argument("--fault-every", type=float, default=1.0, help="mean seconds between faults")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    seconds = args.minutes * 60 if args.minutes is not None else args.seconds
    config = SoakConfig(seconds=seconds, seed=args.seed, apps=args.apps, process_apps=args.process_apps,
                        callers=args.callers, mcp_agents=args.mcp_agents, fault_every=args.fault_every,
                        quiet=args.json)
    started = time.monotonic()
    report = trio.run(run_soak, config)
    if args.json:
        print(json.dumps({**report.as_dict(), "wallSeconds": round(time.monotonic() - started, 1)}))
    else:
        print(format_report(report))
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
