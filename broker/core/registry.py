"""The registry: which app instances are connected, and which tools each one offers.

Theory of operation
-------------------
An *instance* is one running copy of an app, keyed by ``(appName, instanceId)``. It keeps its
label (``WatchTower``, ``WatchTower_2``) and so its agent-facing tool names for as long as it
exists, across reconnects. When its link drops, the instance stays for the reconnect grace
period with ``link = None``: calls for it wait for it to come back (see the router), its tools
stay listed, and a new registration with the same key takes it over. When grace runs out, the
instance and its tools go. Registering with a key that is live replaces the old link: that
link's calls fail at once and it is closed.

Every change bumps ``version``, wakes ``wait_changed`` waiters, which is how the MCP front
door learns to send ``notifications/tools/list_changed`` (it coalesces bursts itself), and
calls the :meth:`Registry.on_change` listeners at once, so caches built from the registry
(the front door's encoded tool list, discovery's index) let go of departed tools right away
rather than at their next use.

Tool schemas are compiled (metaschema check, validator, regexes) by
:meth:`Registry.compile_tools` in worker threads, a few at a time daemon-wide and in small
chunks (prompt to cancel), before ``register`` / ``add_tools`` change anything; those then
take the compiled tools. Daemon-wide budgets (``max_tools_total``,
``max_schema_bytes_total``, ``max_apps_per_token``) are checked there too.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import attrs
import msgspec
import structlog
import trio

from app_client.protocol import ToolSpec, example_requests_problem

from . import names
from .admission import Admission
from ..errors import RegistrationError
from .applog import AppLogHub
from .resources import ResourceDirectory
from .signals import Changed
from .validation import ArgumentValidator, check_app_name, check_tool_name, compile_sized

if TYPE_CHECKING:
    from ..config.settings import Settings
    from .ports import AppPort

log = structlog.get_logger("toolbridge.registry")
_encode = msgspec.json.Encoder().encode


@attrs.define(eq=False)
class RegisteredTool:
    """A tool as the broker holds it: the app's spec plus what was derived from it once."""

    name: str
    agent_name: str
    spec: ToolSpec
    instance: Instance
    validate: ArgumentValidator
    #: Its inputSchema's size as JSON (counted against ``max_schema_bytes_total``).
    schema_bytes: int = 0


@attrs.define(eq=False)
class Instance:
    app_name: str
    instance_id: str
    label: str
    app_id: str
    admission: Admission
    link: AppPort | None = None
    tools: dict[str, RegisteredTool] = attrs.Factory(dict)
    #: Set when a new link takes this instance over (replaced at each disconnect).
    relinked: trio.Event = attrs.Factory(trio.Event)
    #: Calls (the router's callbacks) waiting for a new link or for the instance to be dropped.
    link_waiters: list[Callable[[], None]] = attrs.Factory(list)
    #: trio time at which a disconnected instance is dropped; None while linked.
    grace_deadline: float | None = None
    app_version: str | None = None
    connected_at: float = 0.0
    #: Tool name -> agent-facing name, every one this instance has handed out (across its
    #: reconnects): a name never moves to another tool of the instance (``names``).
    given_names: dict[str, str] = attrs.Factory(dict)
    #: The name of the token it registered with (None: registered in-process, e.g. by tests).
    token: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.app_name, self.instance_id)

    def tool_names(self) -> dict[str, str]:
        return {name: tool.agent_name for name, tool in self.tools.items()}


class Registry:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._instances: dict[tuple[str, str], Instance] = {}
        self._tools: dict[str, RegisteredTool] = {}
        self._labels: set[str] = set()
        self._app_ids = itertools.count(1)
        self._anonymous_ids = itertools.count(1)
        self.version = 0
        self._changed = trio.Event()
        #: Pulsed at every change of the registry and at every call's end (the router shares
        #: it): what ``BrokerCore.changed`` waiters wake on (``signals``).
        self.changed = Changed()
        self._sorted_cache: list[RegisteredTool] | None = None
        self._schema_bytes = 0
        self._listeners: list[weakref.WeakMethod[Callable[[], None]]] = []
        self._compile_limiter = trio.CapacityLimiter(max(1, settings.schema_compile_threads))
        #: Protocol v2: the instances' resources (``resources``), beside their tools.
        self.resources = ResourceDirectory()
        #: Protocol v2: the apps' log messages (``applog``): their flood bound and listeners.
        self.app_logs = AppLogHub()

    # --- queries -------------------------------------------------------------------------

    def lookup(self, agent_name: str) -> RegisteredTool | None:
        return self._tools.get(agent_name)

    def tools(self) -> list[RegisteredTool]:
        """Every tool, sorted by agent-facing name (deterministic for pagination)."""
        if self._sorted_cache is None:
            self._sorted_cache = [self._tools[k] for k in sorted(self._tools)]
        return self._sorted_cache

    def instances(self) -> list[Instance]:
        return sorted(self._instances.values(), key=lambda i: i.label)

    def candidates(self, agent_name: str) -> list[str]:
        """Agent-facing names the unknown name probably meant (see :func:`names.near_names`)."""
        return names.near_names(agent_name, self._tools, limit=10, fuzzy=True)

    async def wait_changed(self, seen_version: int) -> int:
        """Wait until ``version`` differs from ``seen_version``; return the new version."""
        while self.version == seen_version:
            await self._changed.wait()
        return self.version

    @property
    def schema_bytes(self) -> int:
        """inputSchema bytes of every registered tool (the ``max_schema_bytes_total`` budget)."""
        return self._schema_bytes

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call the bound method ``listener`` (synchronously, must not raise) after every change.

        Held weakly: a listener's object (a front door's cache) is not kept alive by the registry.
        """
        self._listeners.append(weakref.WeakMethod(listener))

    # --- compiling, off the event loop ---------------------------------------------------

    async def compile_tools(
        self, tools: list[ToolSpec], *, existing: Iterable[str] = (), alive: Callable[[], None] | None = None
    ) -> list[CompiledTool]:
        """Compile the schemas of ``tools`` in worker threads; raises :class:`RegistrationError`.

        Chunks of :data:`COMPILE_CHUNK` tools each take one of ``schema_compile_threads``
        daemon-wide slots, so one app's big registration neither blocks the loop nor takes
        every core; the worker checks for cancellation between tools. ``alive`` is called
        after each chunk (the link's reader is paused meanwhile: the app is not silent).
        The cheap checks of the tools' names and count (``existing``: the names the instance
        has) come first, so a registration refused for them costs no compiling.
        """
        self._check_tools(tools, existing_names=existing)
        limit = self._settings.max_schema_bytes
        compiled: list[CompiledTool] = []
        for start in range(0, len(tools), COMPILE_CHUNK):
            chunk = tools[start:start + COMPILE_CHUNK]
            if _fits_inline(chunk):
                compiled += _compile_chunk(chunk, limit)  # a few ms: cheaper than a thread hop
            else:
                compiled += await trio.to_thread.run_sync(_compile_chunk, chunk, limit, limiter=self._compile_limiter)
            if alive is not None:
                alive()
            # Give up early, before compiling the rest, once these alone are over the budget (the
            # exact check, which counts what a re-registration replaces, is register's).
            self._check_schema_budget(sum(c[2] for c in compiled))
        return compiled

    def _check_schema_budget(self, total: int) -> None:
        budget = self._settings.max_schema_bytes_total
        if total > budget:
            raise RegistrationError(
                "schema_budget_exhausted",
                f"tool schemas would take {total} bytes across all apps, over the daemon's budget of "
                f"{budget} (setting max_schema_bytes_total): use smaller "
                "schemas or fewer tools, or ask the daemon's owner to raise the setting",
            )

    def _check_budgets(self, compiled: list[CompiledTool], leaving: Iterable[RegisteredTool]) -> None:
        """Refuse ``compiled`` if the daemon-wide budgets cannot take it (``leaving`` goes first)."""
        gone = list(leaving)
        tools = len(self._tools) - len(gone) + len(compiled)
        budget = self._settings.max_tools_total
        if tools > budget:
            raise RegistrationError(
                "tool_budget_exhausted",
                f"the daemon would hold {tools} tools, over its budget of {budget} across all apps "
                "(setting max_tools_total): offer fewer tools, or ask the daemon's owner to raise it",
            )
        self._check_schema_budget(self._schema_bytes - sum(t.schema_bytes for t in gone) + sum(c[2] for c in compiled))

    def _check_apps_per_token(self, token: str | None, key: tuple[str, str]) -> None:
        if token is None:
            return
        limit = self._settings.max_apps_per_token
        count = sum(1 for k, i in self._instances.items() if i.token == token and k != key)
        if count >= limit:
            raise RegistrationError(
                "too_many_apps",
                f"{count} app instances are already registered with the token {token!r}, its limit "
                f"(setting max_apps_per_token): close some, or issue the app a token of its own "
                "(`toolbridge token --issue NAME --scope app:NAME`), or raise the setting",
            )

    # --- changes -------------------------------------------------------------------------

    def _bump(self) -> None:
        self.version += 1
        self._sorted_cache = None
        self._changed.set()
        self._changed = trio.Event()
        self.changed.pulse()
        alive = []
        for ref in self._listeners:
            listener = ref()
            if listener is not None:
                listener()
                alive.append(ref)
        self._listeners = alive

    def register(
        self,
        link: AppPort,
        *,
        app_name: str,
        instance_id: str | None,
        tools: list[ToolSpec],
        max_concurrency: int,
        app_version: str | None,
        compiled: list[CompiledTool] | None = None,
        token: str | None = None,
    ) -> tuple[Instance, AppPort | None]:
        """Link ``link`` as an instance; return it and the link it replaced, if any.

        ``compiled``: ``tools`` from :meth:`compile_tools` (compiled here, on the loop, if
        None: for small in-process uses). ``token``: the name of the token it registered with.
        Raises :class:`RegistrationError` (nothing changed) for an invalid name or tool, or a
        daemon-wide budget it would break.
        """
        check_app_name(app_name)
        if max_concurrency < 1:
            raise RegistrationError("invalid_register", "maxConcurrency must be at least 1")
        if instance_id is not None and not (0 < len(instance_id) <= 200):
            raise RegistrationError("invalid_register", "instanceId must be 1-200 characters")
        if instance_id is not None and instance_id.startswith("#"):
            # "#1", "#2", ... are the ids the broker gives apps that send none: an app naming one
            # would take over (replace) another app's anonymous instance.
            raise RegistrationError("invalid_register", "instanceId must not start with '#' (reserved for "
                                    "the ids the broker assigns)")
        key = (app_name, instance_id if instance_id is not None else f"#{next(self._anonymous_ids)}")
        existing = self._instances.get(key)
        if compiled is None:  # else compile_tools checked the same tools already
            self._check_tools(tools, existing_names=())
            compiled = _compile_chunk(tools, self._settings.max_schema_bytes)
        # May raise: all before anything changes.
        self._check_budgets(compiled, existing.tools.values() if existing is not None else ())
        self._check_apps_per_token(token, key)

        if existing is None:
            label = names.make_label(app_name, self._labels)
            instance = Instance(
                app_name=app_name,
                instance_id=key[1],
                label=label,
                app_id=f"app-{next(self._app_ids)}",
                admission=Admission(max_concurrency, self._settings.max_queue),
                token=token,
            )
            self._labels.add(label)
            self._instances[key] = instance
            replaced = None
        else:
            instance = existing
            replaced = existing.link
            self._drop_tools(instance, list(instance.tools))
            instance.admission.set_limit(max_concurrency)
        instance.link = link
        instance.grace_deadline = None
        instance.app_version = app_version
        instance.token = token
        instance.connected_at = trio.current_time()
        self._add_tools(instance, compiled)
        instance.relinked.set()
        self._bump()
        # The calls waiting for this link are woken by the link once it has said `registered`.
        return instance, replaced

    def _check_tools(self, tools: Iterable[ToolSpec], existing_names: Iterable[str]) -> None:
        seen = set(existing_names)
        count = len(seen)
        for spec in tools:
            check_tool_name(spec.name)
            if spec.name in seen:
                raise RegistrationError("duplicate_tool", f"tool {spec.name!r} is declared twice")
            seen.add(spec.name)
            count += 1
            if spec.timeout_ms is not None and spec.timeout_ms <= 0:
                raise RegistrationError(
                    "invalid_tool", f"tool {spec.name!r}: timeoutMs must be positive"
                )
            if spec.example_requests is not None:
                problem = example_requests_problem(spec.example_requests)
                if problem is not None:
                    raise RegistrationError("invalid_tool", f"tool {spec.name!r}: {problem}")
        if count > self._settings.max_tools_per_app:
            raise RegistrationError(
                "too_many_tools",
                f"{count} tools is over the limit of {self._settings.max_tools_per_app} per app",
            )

    def _add_tools(self, instance: Instance, compiled: list[CompiledTool]) -> None:
        agent_names = names.assign_agent_names(
            instance.label, (spec.name for spec, _, _ in compiled), self._tools, instance.given_names
        )
        for spec, validate, size in compiled:
            agent_name = agent_names[spec.name]
            tool = RegisteredTool(spec.name, agent_name, spec, instance, validate, size)
            instance.tools[spec.name] = tool
            self._tools[agent_name] = tool
            self._schema_bytes += size
        self._remember_names(instance, agent_names)

    def _remember_names(self, instance: Instance, agent_names: dict[str, str]) -> None:
        given = instance.given_names
        given.update(agent_names)
        if len(given) > 2 * self._settings.max_tools_per_app:
            # An app churning through tool names must not grow this without bound: forget the
            # names of tools it no longer offers (their names may then be reused).
            instance.given_names = {name: given[name] for name in instance.tools}

    def _drop_tools(self, instance: Instance, tool_names: Iterable[str]) -> None:
        for name in tool_names:
            tool = instance.tools.pop(name, None)
            if tool is not None:
                self._tools.pop(tool.agent_name, None)
                self._schema_bytes -= tool.schema_bytes

    def add_tools(self, instance: Instance, tools: list[ToolSpec], compiled: list[CompiledTool] | None = None) -> None:
        """Add ``tools`` (``compiled`` by :meth:`compile_tools`, or here if None) to ``instance``."""
        self._check_tools(tools, existing_names=instance.tools)
        if compiled is None:
            compiled = _compile_chunk(tools, self._settings.max_schema_bytes)
        self._check_budgets(compiled, ())
        self._add_tools(instance, compiled)
        self._bump()

    def remove_tools(self, instance: Instance, tool_names: list[str]) -> None:
        unknown = [n for n in tool_names if n not in instance.tools]
        if unknown:
            raise RegistrationError("unknown_tool", f"no such tools to remove: {unknown[:5]}")
        self._drop_tools(instance, tool_names)
        self._bump()

    def unlink(self, instance: Instance, link: AppPort) -> bool:
        """The link of ``instance`` closed: start its grace period. False if already replaced."""
        if instance.link is not link:
            return False
        instance.link = None
        instance.relinked = trio.Event()
        instance.grace_deadline = trio.current_time() + self._settings.reconnect_grace
        self.changed.pulse()
        return True

    def expire(self, instance: Instance) -> bool:
        """Drop ``instance`` if it is still unlinked; True if it was dropped."""
        if instance.link is not None or self._instances.get(instance.key) is not instance:
            return False
        del self._instances[instance.key]
        self._labels.discard(instance.label)
        self._drop_tools(instance, list(instance.tools))
        instance.relinked.set()
        self._bump()
        wake_link_waiters(instance)  # waiting calls see the instance is gone
        return True

    def is_current(self, instance: Instance) -> bool:
        return self._instances.get(instance.key) is instance

    def summary(self) -> list[dict[str, Any]]:
        return [
            {
                "app": i.app_name,
                "instance": i.instance_id,
                "label": i.label,
                "appId": i.app_id,
                "connected": i.link is not None,
                "tools": len(i.tools),
                "inFlight": i.admission.active,
                "queued": i.admission.waiting,
            }
            for i in self.instances()
        ]


#: A tool's spec, its validator and its schema's size in bytes (see :meth:`Registry.compile_tools`).
CompiledTool = tuple[ToolSpec, ArgumentValidator, int]
#: Tools compiled per worker-thread job: a 256 KiB schema takes up to ~1 s, so a job is at most a few
#: seconds of one thread, and other apps' registrations interleave between jobs.
COMPILE_CHUNK = 8


#: Chunks whose schemas total at most this many bytes (as JSON) compile on the loop: a few
#: milliseconds at most (the metaschema check costs ~3-7 ms per KiB), less than a thread hop costs
#: in latency, and deterministic under a test's mock clock.
INLINE_COMPILE_BYTES = 2048


def _fits_inline(tools: list[ToolSpec]) -> bool:
    """Whether the chunk's schemas total at most :data:`INLINE_COMPILE_BYTES` as JSON. Stops at
    the first schema past the bound, so a chunk of big schemas costs the loop one encoding, not
    all of them (the worker measures each schema's size again anyway)."""
    total = 0
    for spec in tools:
        total += len(_encode(spec.input_schema))
        if total > INLINE_COMPILE_BYTES:
            return False
    return True


def _compile_chunk(tools: list[ToolSpec], max_bytes: int) -> list[CompiledTool]:
    """Compile ``tools`` (in a worker thread: stops between tools if the caller was cancelled)."""
    compiled: list[CompiledTool] = []
    for spec in tools:
        try:
            trio.from_thread.check_cancelled()  # raises trio.Cancelled if the link went away
        except RuntimeError:
            pass  # not a trio worker thread: compiling on the loop (small in-process uses)
        validate, size = compile_sized(spec.name, spec.input_schema, max_bytes)
        compiled.append((spec, validate, size))
    return compiled


def wake_link_waiters(instance: Instance) -> None:
    """Let the calls waiting for ``instance`` go on: it has a new link, or it is gone."""
    waiters, instance.link_waiters = instance.link_waiters, []
    for waiter in waiters:
        waiter()
