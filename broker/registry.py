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

Every change bumps ``version`` and wakes ``wait_changed`` waiters, which is how the MCP front
door learns to send ``notifications/tools/list_changed`` (it coalesces bursts itself).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import attrs
import structlog
import trio

from app_client.wire import ToolSpec

from . import names
from .admission import Admission
from .errors import RegistrationError
from .validation import ArgumentValidator, check_app_name, check_tool_name, compile_schema

if TYPE_CHECKING:
    from .config import Settings
    from .links import AppLink

log = structlog.get_logger("toolbridge.registry")


@attrs.define(eq=False)
class RegisteredTool:
    """A tool as the broker holds it: the app's spec plus what was derived from it once."""

    name: str
    agent_name: str
    spec: ToolSpec
    instance: Instance
    validate: ArgumentValidator


@attrs.define(eq=False)
class Instance:
    app_name: str
    instance_id: str
    label: str
    app_id: str
    admission: Admission
    link: AppLink | None = None
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
        self._sorted_cache: list[RegisteredTool] | None = None

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
        """Agent-facing names that share the unknown name's tool part (other instances)."""
        _, _, tool_part = agent_name.partition(names.SEPARATOR)
        if not tool_part:
            return []
        return [n for n in sorted(self._tools) if n.endswith(names.SEPARATOR + tool_part)][:10]

    async def wait_changed(self, seen_version: int) -> int:
        """Wait until ``version`` differs from ``seen_version``; return the new version."""
        while self.version == seen_version:
            await self._changed.wait()
        return self.version

    # --- changes -------------------------------------------------------------------------

    def _bump(self) -> None:
        self.version += 1
        self._sorted_cache = None
        self._changed.set()
        self._changed = trio.Event()

    def register(
        self,
        link: AppLink,
        *,
        app_name: str,
        instance_id: str | None,
        tools: list[ToolSpec],
        max_concurrency: int,
        app_version: str | None,
    ) -> tuple[Instance, AppLink | None]:
        """Link ``link`` as an instance; return it and the link it replaced, if any.

        Raises :class:`RegistrationError` (nothing changed) for an invalid name or tool.
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
        self._check_tools(tools, existing_names=())
        compiled = self._compile(tools)  # may raise: before anything changes

        if existing is None:
            label = names.make_label(app_name, self._labels)
            instance = Instance(
                app_name=app_name,
                instance_id=key[1],
                label=label,
                app_id=f"app-{next(self._app_ids)}",
                admission=Admission(max_concurrency, self._settings.max_queue),
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
        if count > self._settings.max_tools_per_app:
            raise RegistrationError(
                "too_many_tools",
                f"{count} tools is over the limit of {self._settings.max_tools_per_app} per app",
            )

    def _compile(self, tools: Iterable[ToolSpec]) -> list[tuple[ToolSpec, ArgumentValidator]]:
        limit = self._settings.max_schema_bytes
        return [(spec, compile_schema(spec.name, spec.input_schema, limit)) for spec in tools]

    def _add_tools(
        self, instance: Instance, compiled: list[tuple[ToolSpec, ArgumentValidator]]
    ) -> None:
        agent_names = names.assign_agent_names(
            instance.label, (spec.name for spec, _ in compiled), self._tools, instance.given_names
        )
        for spec, validate in compiled:
            agent_name = agent_names[spec.name]
            tool = RegisteredTool(spec.name, agent_name, spec, instance, validate)
            instance.tools[spec.name] = tool
            self._tools[agent_name] = tool
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

    def add_tools(self, instance: Instance, tools: list[ToolSpec]) -> None:
        self._check_tools(tools, existing_names=instance.tools)
        self._add_tools(instance, self._compile(tools))
        self._bump()

    def remove_tools(self, instance: Instance, tool_names: list[str]) -> None:
        unknown = [n for n in tool_names if n not in instance.tools]
        if unknown:
            raise RegistrationError("unknown_tool", f"no such tools to remove: {unknown[:5]}")
        self._drop_tools(instance, tool_names)
        self._bump()

    def unlink(self, instance: Instance, link: AppLink) -> bool:
        """The link of ``instance`` closed: start its grace period. False if already replaced."""
        if instance.link is not link:
            return False
        instance.link = None
        instance.relinked = trio.Event()
        instance.grace_deadline = trio.current_time() + self._settings.reconnect_grace
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


def wake_link_waiters(instance: Instance) -> None:
    """Let the calls waiting for ``instance`` go on: it has a new link, or it is gone."""
    waiters, instance.link_waiters = instance.link_waiters, []
    for waiter in waiters:
        waiter()
