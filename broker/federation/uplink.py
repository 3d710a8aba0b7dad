"""The uplink: this daemon appears in a parent broker as one app carrying all of its apps' tools.

Theory of operation
-------------------
``toolbridge serve --uplink HOST:PORT --uplink-name NAME`` (or ``uplink`` / ``uplink_name``
in the config) makes :func:`run_uplink` a task of the daemon's nursery. It is an ordinary
``app_client.App`` — reconnecting with backoff when the parent restarts — whose tools are
given as specs (:meth:`app_client.App.set_tool_specs`) with one handler, :meth:`Uplink.relay`:

* **Tools.** Each tool of this broker's registry is offered under its agent-facing name here
  (``WatchTower__ClickElement``), so the parent names it ``<NAME>__WatchTower__ClickElement``
  (cut and hashed to 64 characters when longer, stably). Its ``via`` is this broker's id
  followed by the tool's own ``via`` (the path it came by). A watcher follows
  ``registry.version``; bursts of changes are coalesced for :data:`COALESCE_SECONDS`, then
  one ``removeTools`` / ``addTools`` pair brings the parent up to date.
* **Calls.** An invocation from the parent goes through this broker's own router pipeline
  (validation, guards, admission, audit with ``transport="uplink"``) with the parent's
  remaining budget minus a margin (:func:`hop_budget`), so the error nearest the app arrives
  first; progress is relayed when the parent asked for it; a ``toolCancel`` from the parent
  cancels the handler and so the router call, which cancels the app's call in turn.
  Failures that happen here say so: ``at hop 'NAME': ...``; an app's own error passes as it is.
* **Loops and depth** (see ``broker.federation.rules``): the register carries ``via``; a parent
  whose ``chain`` names this broker or one below it is refused (the link is closed and
  retried with backoff) and tools the parent would refuse are left out. While registered,
  the parent's chain is this broker's ``upstream``, announced to its own children.
* **Resources and prompts** (protocol v2): the uplink registers with version 2 and offers every
  resource, template and prompt of this broker's directory under its agent-facing URI or name
  here (``toolbridge://WatchTower/notes://a``, ``WatchTower__review``), so the parent shows
  ``toolbridge://NAME/toolbridge://WatchTower/notes://a`` and ``NAME__WatchTower__review``:
  each hop adds its prefix and cutting it gives back exactly the URI one hop down, as tool
  names do. A watcher follows the directory's versions (coalesced like tools) and sends the
  new sets (``setResources`` / ``setPrompts``); a read or prompt get from the parent is
  resolved in this directory and relayed to the owning app with the parent's remaining budget
  minus the hop margin (a refusal here says ``at hop 'NAME': ...``); ``resourceUpdated`` from
  an app here is passed up with its agent-facing URI. Entries the parent could not take (a URI
  over 2,048 characters, a prompt name over 128) are left out.
* **Waiting on it.** :attr:`Uplink.changed` (a :class:`~broker.core.signals.Changed`) is pulsed
  on each change of the app's connection state (its ``last_error`` is set just before) and
  when the parent's chain is taken up, so code (mostly tests) waits with
  ``changed.wait_until(predicate)`` instead of polling. ``app_client`` reports transitions
  only: a ``last_error`` that changes while the state stays the same (one failed reconnect
  after another, each for a new reason) is not pulsed until the next transition.
"""

from __future__ import annotations

import functools
import math
import socket
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs
import msgspec
import structlog
import trio

from app_client import App, ConnectionState, ToolContext
from app_client.errors import (
    InstanceReplaced,
    RegistrationRejected,
    ToolDefinitionError,
    ToolUpdateRejected,
)
from app_client.tls import client_context
from app_client.protocol import (
    MAX_RESOURCES,
    PROTOCOL_VERSION,
    PromptSpec,
    Register,
    Registered,
    ResourceSpec,
    ResourceTemplateSpec,
    ToolResult,
    ToolSpec,
)
from app_client.resources import PromptDefinition, ResourceDefinition, define_template

from ..config.net import is_loopback
from ..core.resources import ResourceError
from ..errors import BrokerError, ConfigError, RegistrationError, StartupError
from .rules import MAX_HOPS
from ..core.outcome import CallerInfo, CallOutcome, OutcomeKind
from ..core.passthrough import plain
from ..core.signals import Changed
from ..core.validation import check_app_name

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..core.registry import Registry
    from ..core.router import Router
    from .rules import FederationState

log = structlog.get_logger("toolbridge.uplink")

#: Changes of the tool set within this long are sent to the parent together.
COALESCE_SECONDS: Final = 0.05
#: Invocations the parent may send at once (beyond that they queue at the parent).
UPLINK_CONCURRENCY: Final = 64
#: Wait after the parent refused the registration for good (e.g. an invalid tool).
RETRY_AFTER_REFUSAL: Final = 10.0
#: A read or prompt get from the parent without a deadline gets this long here (as an agent's).
READ_TIMEOUT: Final = 30.0


class HopError(BrokerError):
    """A read or prompt get this hop refuses or cannot serve; its message goes to the parent."""


def hop_budget(remaining: float) -> float:
    """The deadline given to this hop's call: the parent's budget minus a margin.

    The margin (a fifth of the budget, at most 1 s) covers this hop's own wait margin and the
    trip back, so that a timeout here reaches the parent before the parent's own deadline.
    """
    return max(remaining - min(1.0, 0.2 * remaining), 0.001)


# --- configuration -------------------------------------------------------------------------


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) → (host, port). Raises ConfigError."""
    host, sep, port_text = text.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigError(f"invalid value {text!r} for 'uplink': expected HOST:PORT, e.g. 172.17.0.2:47700")
    return host, int(port_text)


def default_uplink_name() -> str:
    """The machine's short host name, made a valid app name."""
    name = "".join(c if c.isalnum() or c in "-_." else "-" for c in socket.gethostname().split(".")[0])
    name = name.strip("-_.")[:64].replace("__", "_")
    return name if name and name.lower() != "toolbridge" else "broker"


def _token(settings: Settings) -> str:
    if settings.uplink_token:
        return settings.uplink_token.strip()
    if settings.uplink_token_file:
        try:
            token = Path(settings.uplink_token_file).expanduser().read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"cannot read uplink_token_file {settings.uplink_token_file}: {exc.strerror}") from None
        if token:
            return token
        raise ConfigError(f"uplink_token_file {settings.uplink_token_file} is empty")
    raise ConfigError(
        "an uplink needs the parent's token: set uplink_token_file (--uplink-token-file) to a file "
        "holding a token issued by the parent (`toolbridge token --issue NAME --scope uplink`), "
        "or TOOLBRIDGE_UPLINK_TOKEN"
    )


def _ssl_context(settings: Settings, host: str) -> ssl.SSLContext | None:
    if settings.uplink_tls_ca:
        try:
            return client_context(settings.uplink_tls_ca)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"cannot load uplink_tls_ca {settings.uplink_tls_ca}: {exc}") from None
    if settings.uplink_tls:
        return client_context()
    if not is_loopback(host):
        if not settings.allow_insecure_remote:
            raise StartupError(
                f"refusing to uplink to {host} without TLS: the token and every call would cross the "
                "network in clear. Serve the parent with --tls-cert/--tls-key and pass --uplink-tls-ca "
                "(or --uplink-tls for the system's trust store), or --allow-insecure-remote if you must."
            )
        log.warning("uplink_without_tls", host=host, hint="the token and every call cross the network in clear")
    return None


# --- the uplink ----------------------------------------------------------------------------


class Uplink:
    """One uplink of this broker to a parent broker (see the module docstring).

    It is built from the daemon's parts, not from the core: the router its calls go through,
    the registry whose tools it offers, and the federation state whose id it carries and whose
    ``upstream`` it keeps (:meth:`FederationState.set_upstream`, the one thing it writes).
    """

    def __init__(
        self,
        router: Router,
        registry: Registry,
        federation: FederationState,
        settings: Settings,
        *,
        host: str,
        port: int,
        name: str,
        token: str,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        try:
            check_app_name(name)
        except RegistrationError as exc:
            raise ConfigError(f"invalid uplink_name: {exc.message}") from None
        self.router = router
        self.registry = registry
        self.federation = federation
        self.name = name
        self.address = f"{host}:{port}"
        self.parent_chain: list[str] = []
        self._max_tools = settings.max_tools_per_app
        self._dirty = trio.Event()
        #: Pulsed when the app's state (and with it ``last_error``) or the upstream changes.
        self.changed = Changed()
        registry.resources.on_updated(self._resource_updated)
        self.app = App(
            name,
            instance_id=f"broker-{federation.broker_id or 'anonymous'}",
            max_concurrency=UPLINK_CONCURRENCY,
            host=host,
            port=port,
            token=token,
            ssl_context=ssl_context,
            app_version=f"toolbridge broker {federation.broker_id}",
            prepare_register=self._prepare_register,
            check_registered=self._check_registered,
            on_state_change=self._state_changed,
            # A restarting child comes back as the same instance: keep its names meanwhile.
            goodbye=False,
        )

    def status(self) -> dict[str, Any]:
        """For ``toolbridge status``."""
        return {"parent": self.address, "name": self.name, "state": self.app.state.value,
                "chain": self.parent_chain, "tools": len(self.app.tools), "lastError": self.app.last_error}

    # --- running ------------------------------------------------------------------------

    async def run(self) -> None:
        """Keep the uplink up and in sync until cancelled."""
        await self._sync()
        self._sync_resources()
        self._sync_prompts()
        log.info("uplink_starting", parent=self.address, name=self.name, broker_id=self.federation.broker_id)
        directory = self.registry.resources
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._follow, lambda: directory.version, directory.wait_changed, self._sync_resources)
            nursery.start_soon(self._follow, lambda: directory.prompts_version, directory.wait_prompts_changed,
                               self._sync_prompts)
            nursery.start_soon(self._watch_registry)
            nursery.start_soon(self._sync_loop)
            nursery.start_soon(self._run_app)

    async def _run_app(self) -> None:
        while True:
            try:
                await self.app.run()
            except RegistrationRejected as exc:
                log.error("uplink_refused", parent=self.address, code=exc.code, error=exc.message,
                          retry_in_s=RETRY_AFTER_REFUSAL)
            except InstanceReplaced:
                log.error("uplink_replaced", parent=self.address, retry_in_s=RETRY_AFTER_REFUSAL,
                          hint="another broker with this broker id (a copied home directory?) uplinks there")
            await trio.sleep(RETRY_AFTER_REFUSAL)

    async def _watch_registry(self) -> None:
        seen = self.registry.version
        while True:
            seen = await self.registry.wait_changed(seen)
            self._dirty.set()

    async def _sync_loop(self) -> None:
        while True:
            await self._dirty.wait()
            await trio.sleep(COALESCE_SECONDS)
            self._dirty = trio.Event()
            await self._sync()

    async def _sync(self) -> None:
        try:
            await self.app.set_tool_specs(self._specs(), self.relay)
        except (ToolUpdateRejected, ToolDefinitionError) as exc:
            log.warning("uplink_tools_refused", parent=self.address, error=str(exc))

    # --- what the parent sees -----------------------------------------------------------

    def _specs(self) -> list[ToolSpec]:
        broker_id = self.federation.broker_id
        parent = set(self.parent_chain)
        specs: list[ToolSpec] = []
        too_deep: list[str] = []
        for tool in self.registry.tools():
            spec = tool.spec
            via = [broker_id, *(spec.via or [])] if broker_id else list(spec.via or [])
            if len(via) > MAX_HOPS:
                too_deep.append(tool.agent_name)
                continue
            if parent.intersection(via):
                continue  # the parent would refuse it: it came from above
            specs.append(
                msgspec.structs.replace(
                    spec,
                    name=tool.agent_name,
                    description=spec.description or f"{spec.name} (from the app {tool.instance.label})",
                    via=via or None,
                )
            )
        if too_deep:
            log.warning("uplink_tools_too_deep", count=len(too_deep), examples=too_deep[:3], max_hops=MAX_HOPS)
        if len(specs) > self._max_tools:
            log.warning("uplink_too_many_tools", offered=len(specs), limit=self._max_tools,
                        hint="the parent's max_tools_per_app; the rest are not offered")
            specs = specs[: self._max_tools]
        return specs

    def _subtree(self) -> list[str]:
        found = dict.fromkeys([self.federation.broker_id] if self.federation.broker_id else [])
        for definition in self.app.tools.values():
            found.update(dict.fromkeys(definition.spec.via or []))
        return list(found)

    def _prepare_register(self, register: Register) -> Register:
        # Version 2 even while no resources are offered yet, so a set that comes later goes live.
        return msgspec.structs.replace(register, via=self._subtree() or None, protocol_version=PROTOCOL_VERSION)

    def _check_registered(self, registered: Registered) -> None:
        chain = list(registered.chain or [])
        below = set(self._subtree())
        hit = next((i for i in chain if i in below), None)
        if hit is not None:
            whose = "this broker" if hit == self.federation.broker_id else f"the broker {hit}, which uplinks into this one"
            raise RegistrationRejected(
                "loop_detected",
                f"the broker at {self.address} is itself (through its uplinks) below {whose}: "
                "uplinking there would make a loop",
            )
        self.parent_chain = chain
        self.federation.set_upstream(chain)
        if registered.max_tools:
            self._max_tools = registered.max_tools
        self.changed.pulse()
        self._dirty.set()  # the parent's chain and limits may leave out other tools

    def _state_changed(self, state: ConnectionState) -> None:
        if state is ConnectionState.CONNECTED:
            log.info("uplink_connected", parent=self.address, name=self.name, chain=self.parent_chain,
                     tools=len(self.app.tools))
        else:
            self.federation.set_upstream(())
        self.changed.pulse()

    # --- resources and prompts (protocol v2) --------------------------------------------

    async def _follow(self, version: Callable[[], int], wait_changed: Callable[[int], Awaitable[int]],
                      sync: Callable[[], None]) -> None:
        seen = version()
        while True:
            await wait_changed(seen)
            await trio.sleep(COALESCE_SECONDS)
            seen = version()
            sync()

    def _sync_resources(self) -> None:
        directory = self.registry.resources
        definitions: list[ResourceDefinition] = []
        for entry in directory.list_resources()[:MAX_RESOURCES]:
            try:
                spec = msgspec.convert(entry, ResourceSpec)
            except msgspec.ValidationError:
                continue  # the parent could not take it (a URI over 2,048 characters)
            definitions.append(ResourceDefinition(self.read_resource, spec=spec, takes_uri=True))
        for entry in directory.list_templates()[:MAX_RESOURCES]:
            try:
                template = msgspec.convert(entry, ResourceTemplateSpec)
                matcher = define_template(self.read_resource, template.uri_template, name=template.name, description="")
            except (msgspec.ValidationError, ValueError):
                continue  # too long, or a variable name app_client's matcher does not take
            definitions.append(attrs.evolve(matcher, template=template, takes_uri=True))
        self.app.set_resource_definitions(definitions)

    def _sync_prompts(self) -> None:
        definitions: list[PromptDefinition] = []
        for entry in self.registry.resources.list_prompts()[:MAX_RESOURCES]:
            try:
                spec = msgspec.convert(entry, PromptSpec)
            except msgspec.ValidationError:
                continue  # the parent could not take it (a name over 128 characters)
            definitions.append(PromptDefinition(functools.partial(self.get_prompt, spec.name), spec))
        self.app.set_prompt_definitions(definitions)

    def _resource_updated(self, uri: str) -> None:
        self.app.resource_updated(uri)  # its agent-facing URI here is its own URI at the parent

    @staticmethod
    def _budget() -> float:
        remaining = trio.current_effective_deadline() - trio.current_time()
        return hop_budget(remaining) if math.isfinite(remaining) else READ_TIMEOUT

    async def read_resource(self, uri: str) -> list[dict[str, Any]]:
        """A read from the parent: ``uri`` is this broker's agent-facing URI."""
        try:
            app, own = await self.registry.resources.resolve(uri)
            contents: list[dict[str, Any]] = await app.port.read_resource(own, self._budget())
        except ResourceError as exc:
            raise HopError(f"at hop {self.name!r}: {exc.message}") from None
        return contents

    async def get_prompt(self, name: str, /, **arguments: str) -> dict[str, Any]:
        """A prompt get from the parent: ``name`` is this broker's agent-facing name."""
        try:
            _, port, spec = self.registry.resources.resolve_prompt(name)
            result = await port.get_prompt(spec.name, arguments, self._budget())
        except ResourceError as exc:
            raise HopError(f"at hop {self.name!r}: {exc.message}") from None
        return {"messages": result.get("messages", []), "description": result.get("description")}

    # --- calls from the parent ----------------------------------------------------------

    async def relay(self, parameters: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Run one invocation from the parent through this broker's pipeline."""
        remaining = ctx.time_remaining()
        timeout = hop_budget(remaining) if math.isfinite(remaining) else None
        on_progress = None
        if ctx.progress_requested:

            def on_progress(progress: float, total: float | None, message: str | None) -> None:
                ctx.report_progress_threadsafe(progress, total, message)

        outcome = await self.router.call_tool(
            ctx.tool,
            parameters,
            caller=CallerInfo(client_name="uplink", session=self.name, transport="uplink"),
            timeout=timeout,
            on_progress=on_progress,
        )
        return self.result_of(ctx.tool, outcome)

    def result_of(self, tool: str, outcome: CallOutcome) -> ToolResult:
        if outcome.result is not None:
            # The app's (or a deeper hop's) own answer, failures included: its words, content and
            # error kind pass unchanged (a large one's raw content decoded: it is encoded again).
            return plain(outcome.result)
        if outcome.kind is OutcomeKind.UNKNOWN_TOOL:
            message = (
                f"unknown tool {tool!r}: the app that offered it is no longer connected there. "
                "List the tools again."
            )
        else:
            message = outcome.message or outcome.kind
        return ToolResult(
            success=False,
            error=f"at hop {self.name!r}: {message}",
            error_kind=outcome.kind.value if outcome.kind.app_reportable else None,
            retry_after_ms=outcome.retry_after_ms,
        )


def uplink_options(settings: Settings) -> dict[str, Any] | None:
    """The uplink's connection options from the settings, or None when there is no uplink.

    Checked before the daemon binds anything. Raises ConfigError, StartupError.
    """
    if not settings.uplink:
        return None
    host, port = parse_address(settings.uplink)
    name = settings.uplink_name or default_uplink_name()
    try:
        check_app_name(name)
    except RegistrationError as exc:
        raise ConfigError(f"invalid uplink_name: {exc.message}") from None
    return {"host": host, "port": port, "name": name, "token": _token(settings),
            "ssl_context": _ssl_context(settings, host)}
