"""The :class:`App` an application embeds: declare tools, then run (and keep) a connection.

Theory of operation
-------------------
An :class:`App` holds the tool table (filled by ``@app.tool`` before it runs and by
:meth:`App.add_tool` / :meth:`App.remove_tool` while it runs) and the connection loop.
Protocol v2 (protocol.md sections 11 and 12): ``@app.resource``, ``@app.resource_template`` and
``@app.prompt`` (with ``complete=`` for argument completions) fill their own tables, and
:meth:`App.log` sends log messages to agents; an app that uses any of them registers version 2
(a tools-only app that logs says so with ``App(..., logs=True)``).
Programs that relay tools rather than implement them (a broker uplinking into another)
replace the whole table with wire specs and one handler: :meth:`App.set_tool_specs`.

:meth:`App.run` loops forever: find the daemon (:func:`~app_client.discovery.find_daemon`,
re-read each attempt so a restarted daemon or a rotated token is picked up), open a stream,
register within ``CONNECT_TIMEOUT``, serve the :class:`~app_client.session.Session` until
the link ends, then wait a :class:`~app_client.backoff.Backoff` delay (0.1 s doubling to
5 s, full jitter; reset by each successful registration) and try again. Stopping
(cancelling :meth:`run`) sends ``goodbye`` on a live link, so the broker releases the names
at once and a restarted app is not ``App_2``. Every attempt uses the same ``instance_id``
(one random id per ``App`` object by default), so the broker treats a reconnect as the same
instance coming back and replaces its old link.

Registration errors follow protocol.md's retry rules: ``unauthorized`` (state
``UNAUTHORIZED``), the codes that may clear up (``register_timeout``,
``too_many_connections``, ``too_many_apps``, the budgets, ``forbidden``, ...) and unknown
codes are retried with backoff — runtime.json and the token file are re-read each time, and
a missing runtime.json is retried, never replaced by a default port; codes in
:data:`FATAL_REGISTRATION_CODES` (a tool or the register message is invalid: retrying
cannot help) end :meth:`run` with :class:`~app_client.errors.RegistrationRejected`, as does a
``registered`` whose ``protocolVersion`` is above the one this client speaks, and
``replaced`` on a live link (another process registered the same instance) ends it with
:class:`~app_client.errors.InstanceReplaced`. Cancel :meth:`run` to stop; it never returns
otherwise.

State: :attr:`App.state` is a :class:`ConnectionState`; ``on_state_change(state)`` is called
in the trio thread on each change (with a ``ThreadedApp``, marshal to your GUI thread
yourself). Log lines: one per connect and disconnect; while the daemon stays unreachable,
the first failed attempt is logged (a warning, with the delay before the next attempt), then
at most one line per :data:`FAILURE_LOG_INTERVAL` (still failing: how many attempts, for how
long, the latest reason, the next retry) — nothing per attempt, so an app left running while
the daemon is down does not fill its log. The time is trio's clock (tests use a mock clock).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import ssl
import types
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, TypeVar, overload

import trio

from .backoff import Backoff
from .connection import MessageStream
from .discovery import DaemonAddress, find_daemon
from .errors import (
    ConnectionClosed,
    DaemonNotFound,
    InstanceReplaced,
    LocalProtocolError,
    RegistrationRejected,
    ToolDefinitionError,
    ToolUpdateRejected,
)
from .interrupt import cancel_on_ctrl_c, owns_ctrl_c
from .invoke import GuiExecutor
from .applog import log_message
from .logs import get_logger
from .protocol import PROTOCOL_VERSION, SetPrompts, SetResources
from .resources import (
    CompleterSpec,
    PromptDefinition,
    ResourceDefinition,
    define_prompt,
    define_resource,
    define_template,
)
from .session import Session
from .state import ConnectionState
from .threaded import AppThread
from .tools import RemoteHandler, ToolDefinition, define_remote_tool, define_tool
from .transport import connect_daemon, connect_tcp, describe
from .protocol import FATAL_REGISTRATION_CODES, AddTools, Register, Registered, RemoveTools, ToolSpec

__all__ = [
    "APP_NAME_PATTERN",
    "CONNECT_TIMEOUT",
    "FATAL_REGISTRATION_CODES",
    "App",
    "ConnectionState",
    "Connector",
    "connect_tcp",
]

F = TypeVar("F", bound=Callable[..., Any])

#: Seconds allowed for opening the stream plus the ``register`` / ``registered`` exchange.
CONNECT_TIMEOUT: Final = 10.0
#: While connection attempts keep failing, at most one log line per this many seconds.
FAILURE_LOG_INTERVAL: Final = 60.0
#: App names protocol.md allows (plus: no ``__``, not ``toolbridge``).
APP_NAME_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.\-]{0,63}")
UNAUTHORIZED: Final = "unauthorized"

_log = get_logger(__name__)


#: Opens the byte stream to the daemon; the default is :func:`~app_client.transport.connect_daemon`
#: (the daemon's Unix socket when ``runtime.json`` names one, else TCP).
Connector = Callable[[DaemonAddress], Awaitable[trio.abc.Stream]]


def _sole_error(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The one non-Cancelled leaf of ``group``, if there is exactly one."""
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        elif not isinstance(exc, trio.Cancelled):
            leaves.append(exc)

    walk(group)
    return leaves[0] if len(leaves) == 1 else None


class App:
    """A desktop app's connection to toolbridge, with the tools it offers.

    Args:
        name: the app's name (agents see tools as ``<label>__<tool>``, the label derived
            from it by the broker).
        instance_id: stable id of this instance; defaults to a random id per ``App``
            object, kept across reconnects.
        max_concurrency: calls run at once (more wait, first in the broker's queue).
        home, host, port, token: where the daemon is; see :func:`find_daemon` for the
            fallbacks (environment, then the home directory's files).
        on_state_change: called with each new :class:`ConnectionState` (trio thread).
        gui_executor: schedules a zero-argument callable on the GUI thread (for example
            :func:`app_client.tk_executor`); sync tools then run there by default.
        app_version: reported to the broker for ``toolbridge status``.
        connector: opens the stream to the daemon; defaults to
            :func:`~app_client.transport.connect_daemon` (its Unix socket when it has one,
            else TCP; tests pass memory streams here).
        backoff: reconnect delays; defaults to ``Backoff()`` (0.1 s doubling to 5 s).
        ssl_context: connect over TLS with this context (see :mod:`app_client.tls`); TCP
            only, never the Unix socket.
        tls_ca: connect over TLS, trusting the CA certificates in this PEM file (also
            ``TOOLBRIDGE_TLS_CA``); a daemon whose ``runtime.json`` says TLS is pinned anyway.
        prepare_register: called before each registration with the ``register`` message;
            returns the message to send (for programs that set more protocol fields, such as
            a broker's ``via``).
        check_registered: called with the broker's ``registered`` reply before the app
            counts as connected; raising RegistrationRejected refuses that broker: the link
            is closed and retried with backoff (ended, for a code in
            :data:`FATAL_REGISTRATION_CODES`).
        goodbye: send ``goodbye`` when the app stops, so the broker releases its names at once
            (the default). ``False`` keeps them for the reconnect grace period: for a program
            with a stable ``instance_id`` that restarts at once (a broker's uplink).
        logs: the app sends log messages to agents (:meth:`log`, ``ctx.log``): it then speaks
            protocol version 2 even when it offers only tools (section 12 of protocol.md).
        elicitation: the app's tools ask the agent's user with ``ctx.elicit`` (protocol.md
            section 13): the app registers with wire protocol version 2, which that needs
            (apps with resources or prompts do anyway).
    """

    def __init__(
        self,
        name: str,
        *,
        instance_id: str | None = None,
        max_concurrency: int = 1,
        home: str | os.PathLike[str] | None = None,
        host: str | None = None,
        port: int | None = None,
        token: str | None = None,
        on_state_change: Callable[[ConnectionState], object] | None = None,
        gui_executor: GuiExecutor | None = None,
        app_version: str | None = None,
        connector: Connector | None = None,
        backoff: Backoff | None = None,
        ssl_context: ssl.SSLContext | None = None,
        tls_ca: str | os.PathLike[str] | None = None,
        prepare_register: Callable[[Register], Register] | None = None,
        check_registered: Callable[[Registered], None] | None = None,
        goodbye: bool = True,
        logs: bool = False,
        elicitation: bool = False,
    ) -> None:
        if (
            not isinstance(name, str)
            or not APP_NAME_PATTERN.fullmatch(name)
            or "__" in name
            or name.lower() == "toolbridge"
        ):
            raise ValueError(
                f"invalid app name {name!r}: 1-64 letters, digits, spaces, '_', '-' or '.', "
                "starting with a letter or digit, without '__', not 'toolbridge'"
            )
        if instance_id is not None and not 0 < len(instance_id) <= 200:
            raise ValueError("instance_id must be 1-200 characters")
        if instance_id is not None and instance_id.startswith("#"):
            raise ValueError("instance_id must not start with '#' (reserved for ids the broker assigns)")
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.name = name
        self.instance_id = instance_id if instance_id is not None else uuid.uuid4().hex
        self.max_concurrency = max_concurrency
        self.app_version = app_version
        self.gui_executor = gui_executor
        self.on_state_change = on_state_change
        self._home = home
        self._host = host
        self._port = port
        self._token = token
        self._tls_ca = tls_ca
        self._connector: Connector = connector or functools.partial(connect_daemon, ssl_context=ssl_context)
        self._prepare_register = prepare_register
        self._check_registered = check_registered
        self._goodbye = goodbye
        self._logs = logs
        #: Tools may ask the user (``ToolContext.elicit``): register with protocol version 2.
        self._elicitation = elicitation
        #: Set by set_tool_specs: also handles invoked names not (or no longer) in the table.
        self._catch_all: RemoteHandler | None = None
        self._backoff = backoff or Backoff()
        self._tools: dict[str, ToolDefinition] = {}
        #: Protocol v2: resources and templates by URI / URI template (``resource``).
        self._resources: dict[str, ResourceDefinition] = {}
        #: Protocol v2: prompts by name (``prompt``).
        self._prompts: dict[str, PromptDefinition] = {}
        self._tools_lock = trio.Lock()
        self._listeners: list[Callable[[ConnectionState], object]] = []
        self._state = ConnectionState.DISCONNECTED
        self._state_event = trio.Event()
        self._last_error: str | None = None
        #: Failed attempts since the last registration, and when the outage's first one was
        #: logged / the next report is due (trio time): see _report_failure.
        self._failures = 0
        self._failing_since = 0.0
        self._next_failure_report = 0.0
        self._registration: Registered | None = None
        self._agent_names: dict[str, str] = {}
        self._session: Session | None = None
        self._running = False
        self._log = _log.bind(app=name, instance_id=self.instance_id)

    def __repr__(self) -> str:
        return f"App({self.name!r}, instance_id={self.instance_id!r}, state={self._state.name})"

    # --- read-only views ----------------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        return self._state

    @property
    def last_error(self) -> str | None:
        """Why the last attempt failed or the last link ended (``None`` while connected)."""
        return self._last_error

    @property
    def agent_names(self) -> Mapping[str, str]:
        """Registered tool name -> agent-facing name (empty while not connected)."""
        return types.MappingProxyType(self._agent_names)

    @property
    def registration(self) -> Registered | None:
        """The broker's ``registered`` message for the current link."""
        return self._registration

    @property
    def tools(self) -> Mapping[str, ToolDefinition]:
        """The declared tools by name."""
        return types.MappingProxyType(self._tools)

    @property
    def running(self) -> bool:
        return self._running

    # --- declaring tools ----------------------------------------------------------------

    @overload
    def tool(self, fn: F, /) -> F: ...

    @overload
    def tool(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        path_guard: bool = True,
        on_gui_thread: bool | None = None,
        example_requests: Sequence[str] | None = None,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        fn: F | None = None,
        /,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        path_guard: bool = True,
        on_gui_thread: bool | None = None,
        example_requests: Sequence[str] | None = None,
    ) -> F | Callable[[F], F]:
        """Declare a tool, as ``@app.tool`` or ``@app.tool(name=..., ...)``.

        The function is returned unchanged. See :func:`app_client.tools.define_tool` for
        the options. Declare tools before :meth:`run`; afterwards use :meth:`add_tool`.
        Raises ToolDefinitionError for an invalid or duplicate tool.
        """

        def declare(function: F) -> F:
            if self._running:
                raise RuntimeError(
                    f"{self.name} is running: use `await app.add_tool(fn)` to add tools now"
                )
            definition = define_tool(
                function,
                name=name,
                title=title,
                description=description,
                annotations=annotations,
                output_schema=output_schema,
                timeout=timeout,
                path_guard=path_guard,
                on_gui_thread=on_gui_thread,
                example_requests=example_requests,
            )
            self._check_new(definition)
            self._tools[definition.name] = definition
            return function

        return declare if fn is None else declare(fn)

    # --- declaring resources (protocol v2) -----------------------------------------------

    def resource(self, uri: str, *, name: str | None = None, title: str | None = None,
                 description: str | None = None, mime_type: str | None = None, size: int | None = None,
                 annotations: Mapping[str, Any] | None = None) -> Callable[[F], F]:
        """Declare a resource, as ``@app.resource("notes://readme", mime_type="text/plain")``.

        The handler takes no arguments and returns ``str`` (text), ``bytes`` (a blob), a content
        dict or a list of those; sync handlers run in a worker thread. Agents see it as
        ``toolbridge://<label>/<uri>`` (protocol.md section 11). Declare before :meth:`run`.
        """

        def declare(function: F) -> F:
            self._add_resource(define_resource(function, uri, name=name, title=title, description=description,
                                               mime_type=mime_type, size=size, annotations=annotations))
            return function

        return declare

    def resource_template(self, uri_template: str, *, name: str | None = None, title: str | None = None,
                          description: str | None = None, mime_type: str | None = None,
                          annotations: Mapping[str, Any] | None = None,
                          complete: Mapping[str, CompleterSpec] | None = None) -> Callable[[F], F]:
        """Declare a family of resources, as ``@app.resource_template("file:///docs/{name}")``.

        RFC 6570 level 1 (``{var}``); the handler takes the variables as keyword arguments.
        ``complete`` maps a variable to its completion: a list of strings (those starting with
        what the user typed are offered) or a function ``fn(value)`` / ``fn(value, arguments)``
        returning suggestions (see :mod:`app_client.resources`).
        """

        def declare(function: F) -> F:
            self._add_resource(define_template(function, uri_template, name=name, title=title,
                                               description=description, mime_type=mime_type,
                                               annotations=annotations, complete=complete))
            return function

        return declare

    def _add_resource(self, definition: ResourceDefinition) -> None:
        if self._running:
            raise RuntimeError(f"{self.name} is running: declare resources before run()")
        if definition.key in self._resources:
            raise ValueError(f"{self.name} already offers {definition.key!r}")
        self._resources[definition.key] = definition

    def prompt(self, fn: F | None = None, /, *, name: str | None = None, title: str | None = None,
               description: str | None = None, complete: Mapping[str, CompleterSpec] | None = None) -> Any:
        """Declare a prompt, as ``@app.prompt`` or ``@app.prompt(name=..., ...)``.

        The function's parameters are the prompt's arguments (strings; required without a
        default); it returns ``str`` (one user message), a list of messages (``str`` or
        ``{"role", "content"}`` dicts with text, image or embedded resource content), or
        ``{"messages": [...], "description": ...}``. Agents see it as ``<label>__<name>``.
        ``complete`` maps an argument to its completion (as for :meth:`resource_template`):
        ``@app.prompt(complete={"language": ["python", "rust"]})``.
        """

        def declare(function: F) -> F:
            if self._running:
                raise RuntimeError(f"{self.name} is running: declare prompts before run()")
            definition = define_prompt(function, name=name, title=title, description=description,
                                       complete=complete)
            if definition.spec.name in self._prompts:
                raise ValueError(f"{self.name} already has a prompt named {definition.spec.name!r}")
            self._prompts[definition.spec.name] = definition
            return function

        return declare if fn is None else declare(fn)

    def add_resource(self, fn: Callable[..., Any], uri: str, **options: Any) -> None:
        """Offer a resource at runtime (``options`` as for :meth:`resource`); a connected app
        sends its new set at once (``setResources``), a later connection registers it.

        The protocol version is chosen at registration: an app that registered with no
        resources and no prompts speaks version 1 on that connection, so the new set reaches
        the broker only at its next connection. Declare one resource before :meth:`run` to
        change the set live.
        """
        definition = define_resource(fn, uri, **options)
        if definition.key in self._resources:
            raise ValueError(f"{self.name} already offers {definition.key!r}")
        self._resources[definition.key] = definition
        self._publish_resources()

    def remove_resource(self, uri: str) -> None:
        """Stop offering the resource or template ``uri`` (KeyError if it is not offered)."""
        del self._resources[uri]
        self._publish_resources()

    def _publish_resources(self) -> None:
        if self._session is not None:
            self._session.send_nowait(SetResources(
                resources=[d.spec for d in self._resources.values() if d.spec is not None],
                resource_templates=[d.template for d in self._resources.values() if d.template is not None]))

    def add_prompt(self, fn: Callable[..., Any], *, name: str | None = None, title: str | None = None,
                   description: str | None = None) -> None:
        """Offer a prompt at runtime (as :meth:`prompt` declares one); a connected app sends its
        new set at once (``setPrompts``). The version rule of :meth:`add_resource` applies."""
        definition = define_prompt(fn, name=name, title=title, description=description)
        if definition.spec.name in self._prompts:
            raise ValueError(f"{self.name} already has a prompt named {definition.spec.name!r}")
        self._prompts[definition.spec.name] = definition
        self._publish_prompts()

    def remove_prompt(self, name: str) -> None:
        """Stop offering the prompt ``name`` (KeyError if it is not offered)."""
        del self._prompts[name]
        self._publish_prompts()

    def _publish_prompts(self) -> None:
        if self._session is not None:
            self._session.send_nowait(SetPrompts(prompts=[d.spec for d in self._prompts.values()]))

    def set_resource_definitions(self, definitions: list[ResourceDefinition]) -> None:
        """Replace every resource and template with ``definitions`` (made with
        :func:`~app_client.resources.define_resource` / ``define_template``) and send the new
        set when connected: for relays such as a broker's uplink."""
        self._resources.clear()
        self._resources.update((d.key, d) for d in definitions)
        self._publish_resources()

    def set_prompt_definitions(self, definitions: list[PromptDefinition]) -> None:
        """Replace every prompt with ``definitions`` and send the new set when connected."""
        self._prompts.clear()
        self._prompts.update((d.spec.name, d) for d in definitions)
        self._publish_prompts()

    def resource_updated(self, uri: str) -> None:
        """Tell subscribed agents that the resource ``uri`` (this app's own URI) changed.

        Call it from the app's trio thread; it never blocks (dropped when not connected, or
        when the broker speaks protocol 1).
        """
        if self._session is not None:
            self._session.resource_updated_nowait(uri)

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send a log message to the agents that asked for ``level`` or a less severe one.

        ``level`` is one of MCP's: ``debug``, ``info``, ``notice``, ``warning``, ``error``,
        ``critical``, ``alert``, ``emergency`` (ValueError otherwise); ``data`` any JSON-able
        value (a string, a dict, ...; at most 64 KiB as JSON, longer is cut); ``logger`` names
        the part of the app it comes from (agents see ``<label>.<logger>``). Callable from any
        thread; never blocks; dropped while not connected or over the rate (protocol.md section
        12). Needs ``App(..., logs=True)`` in an app that offers only tools. Inside a tool, use
        ``ctx.log`` to reach only the agent that made the call. Never put secrets in it.
        """
        message = log_message(level, data, logger)
        session = self._session
        if session is not None:
            session.log_threadsafe(message)

    def _check_new(self, definition: ToolDefinition) -> None:
        if definition.name in self._tools:
            raise ToolDefinitionError(f"{self.name} already has a tool named {definition.name!r}")

    async def add_tool(self, fn: Callable[..., Any], **options: Any) -> ToolDefinition:
        """Declare a tool at runtime and, when connected, register it with the broker.

        ``options`` are those of :meth:`tool`. Returns when the broker confirmed it (or at
        once when not connected: the next registration includes it). Raises
        ToolDefinitionError for an invalid or duplicate tool and ToolUpdateRejected if the
        broker refused it (the tool is then not kept).
        """
        definition = define_tool(fn, **options)
        async with self._tools_lock:
            self._check_new(definition)
            self._tools[definition.name] = definition
            session = self._session
            if session is None:
                return definition
            try:
                await session.update_tools(AddTools(tools=[definition.spec]))
            except ToolUpdateRejected:
                del self._tools[definition.name]
                raise
            except LocalProtocolError as exc:
                del self._tools[definition.name]
                raise ToolUpdateRejected(exc.code, exc.message) from exc
            except ConnectionClosed:
                pass  # the next registration carries it
        return definition

    async def remove_tool(self, name: str) -> None:
        """Withdraw a tool; when connected, wait for the broker to confirm.

        Raises KeyError if there is no such tool, ToolUpdateRejected if the broker refused
        (the tool is then kept).
        """
        async with self._tools_lock:
            if name not in self._tools:
                raise KeyError(f"{self.name} has no tool named {name!r}")
            definition = self._tools.pop(name)
            session = self._session
            if session is None:
                return
            try:
                await session.update_tools(RemoveTools(names=[name]))
            except ToolUpdateRejected:
                self._tools[name] = definition
                raise
            except ConnectionClosed:
                pass

    async def set_tool_specs(self, specs: Iterable[ToolSpec], handler: RemoteHandler) -> None:
        """Make ``specs`` the app's whole tool set, every call going to ``handler``.

        For programs that relay tools rather than implement them (a broker uplinking into
        another): see :func:`~app_client.tools.define_remote_tool`. Tools that are gone or
        whose spec changed are withdrawn, new and changed ones added; when connected this
        waits for the broker to confirm (``removeTools``, then ``addTools``), otherwise the
        next registration carries the new set. From then on ``handler`` also receives calls
        of names not in the table (a broker a moment behind), so it can say what is missing
        in its own words. Raises ToolDefinitionError for an invalid or
        duplicate name (nothing changes) and ToolUpdateRejected if the broker refused the
        additions (those tools are then not kept).
        """
        wanted: dict[str, ToolDefinition] = {}
        for spec in specs:
            if spec.name in wanted:
                raise ToolDefinitionError(f"{self.name}: two tools named {spec.name!r}")
            wanted[spec.name] = define_remote_tool(spec, handler)
        self._catch_all = handler
        async with self._tools_lock:
            tools = self._tools  # the session reads this very dict: change it in place
            removed = [n for n, d in tools.items() if n not in wanted or d.spec != wanted[n].spec]
            added = [d for n, d in wanted.items() if n not in tools or tools[n].spec != d.spec]
            for name in removed:
                del tools[name]
            for definition in added:
                tools[definition.name] = definition
            session = self._session
            if session is None:
                return
            try:
                if removed:
                    await session.update_tools(RemoveTools(names=removed))
                if added:
                    await session.update_tools(AddTools(tools=[d.spec for d in added]))
            except (ToolUpdateRejected, LocalProtocolError) as exc:
                for definition in added:
                    tools.pop(definition.name, None)
                if isinstance(exc, LocalProtocolError):
                    raise ToolUpdateRejected(exc.code, exc.message) from exc
                raise
            except ConnectionClosed:
                pass  # the next registration carries the new set

    def _catch_all_tool(self, name: str) -> ToolDefinition | None:
        if self._catch_all is None:
            return None
        try:
            return define_remote_tool(ToolSpec(name=name), self._catch_all)
        except ToolDefinitionError:
            return None

    # --- state --------------------------------------------------------------------------

    def _set_state(self, state: ConnectionState) -> None:
        if state is self._state:
            return
        self._state = state
        self._state_event.set()
        self._state_event = trio.Event()
        callbacks = [*self._listeners, *([self.on_state_change] if self.on_state_change else [])]
        for callback in callbacks:
            try:
                callback(state)
            except Exception:
                self._log.exception("connection state callback raised", state=state.name)

    def _add_listener(self, callback: Callable[[ConnectionState], object]) -> None:
        self._listeners.append(callback)

    def _remove_listener(self, callback: Callable[[ConnectionState], object]) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(callback)

    def _set_agent_names(self, names: dict[str, str]) -> None:
        self._agent_names = dict(names)

    async def wait_connected(self) -> None:
        """Wait until the app is registered (returns at once if it is).

        Only :meth:`run` (or :meth:`connected`) makes progress towards that: call this from
        another task while the app runs.
        """
        while self._state is not ConnectionState.CONNECTED:
            await self._state_event.wait()

    def _note_failure(self, message: str, state: ConnectionState = ConnectionState.RECONNECTING) -> None:
        """Count a failed attempt (logged by :meth:`_report_failure` once the retry delay is known)."""
        self._failures += 1
        self._last_error = message
        self._set_state(state)

    def _report_failure(self, retry_in: float) -> None:
        """Log the attempt that just failed: the first of an outage, then once a FAILURE_LOG_INTERVAL."""
        if not self._failures:  # the attempt registered; its end was logged as a disconnect
            return
        now = trio.current_time()
        if self._failures == 1:
            self._failing_since = now
            self._next_failure_report = now + FAILURE_LOG_INTERVAL
            self._log.warning(
                "toolbridge connection attempt failed; retrying (further failures are logged "
                f"about once every {FAILURE_LOG_INTERVAL:g} s)",
                error=self._last_error, next_retry_in_s=round(retry_in, 1),
            )
        elif now >= self._next_failure_report:
            self._next_failure_report = now + FAILURE_LOG_INTERVAL
            self._log.warning(
                "toolbridge still unreachable; retrying",
                error=self._last_error, failed_attempts=self._failures,
                failing_for_s=round(now - self._failing_since), next_retry_in_s=round(retry_in, 1),
            )

    # --- running ------------------------------------------------------------------------

    def _register_message(self, token: str) -> Register:
        register = Register(
            app_name=self.name,
            token=token,
            tools=[definition.spec for definition in self._tools.values()],
            instance_id=self.instance_id,
            max_concurrency=self.max_concurrency,
            app_version=self.app_version,
            # Version 2 only when it is needed (resources, prompts, log messages, elicitation): a
            # tools-only app stays a v1 app, as the conformance kit's vectors (protocol.md
            # section 10) describe it.
            protocol_version=(PROTOCOL_VERSION if self._resources or self._prompts or self._logs
                              or self._elicitation else 1),
            completions=any(d.completers for d in self._resources.values())
            or any(d.completers for d in self._prompts.values()),
            resources=[d.spec for d in self._resources.values() if d.spec is not None],
            resource_templates=[d.template for d in self._resources.values() if d.template is not None],
            prompts=[d.spec for d in self._prompts.values()],
        )
        return register if self._prepare_register is None else self._prepare_register(register)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Connect, register, serve calls and reconnect, until cancelled.

        ``task_status.started()`` is called after the first registration (for
        ``nursery.start``). Raises RegistrationRejected if the broker refuses the
        registration for good, InstanceReplaced if another process took over this
        instance id, ToolDefinitionError if a GUI-thread tool has no ``gui_executor``.

        When ``run`` is the program's main task (``trio.run(app.run)``), Ctrl-C stops it
        cleanly: it says goodbye and returns, with no traceback (:mod:`app_client.interrupt`).
        """
        if not owns_ctrl_c():
            await self._serve(task_status)
            return
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_on_ctrl_c, nursery.cancel_scope)
                await self._serve(task_status)
                nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:  # the app's own error, as it is (not in a group)
            sole = _sole_error(group)
            if sole is None:
                raise
            raise sole from None

    async def _serve(self, task_status: trio.TaskStatus[None]) -> None:
        if self._running:
            raise RuntimeError(f"{self.name} is already running")
        for definition in self._tools.values():
            if definition.on_gui_thread and self.gui_executor is None:
                raise ToolDefinitionError(
                    f"{definition.name} runs on the GUI thread but the App has no gui_executor"
                )
        self._running = True
        self._last_error = None
        self._failures = 0
        limiter = trio.CapacityLimiter(self.max_concurrency)
        backoff = self._backoff
        backoff.reset()
        started = False

        def on_registered() -> None:
            nonlocal started
            backoff.reset()
            if not started:
                started = True
                task_status.started()

        self._set_state(ConnectionState.CONNECTING)
        try:
            while True:
                await self._attempt(limiter, on_registered)
                delay = backoff.next_delay()
                self._report_failure(delay)
                await trio.sleep(delay)
        except (RegistrationRejected, InstanceReplaced) as exc:
            self._last_error = str(exc)
            self._set_state(ConnectionState.FAILED)
            raise
        finally:
            self._running = False
            if self._state is not ConnectionState.FAILED:
                self._set_state(ConnectionState.DISCONNECTED)

    async def _attempt(self, limiter: trio.CapacityLimiter, on_registered: Callable[[], None]) -> None:
        """One connection: returns when it failed or ended; raises only fatal errors."""
        try:
            address = find_daemon(self._home, self._host, self._port, self._token, self._tls_ca)
        except DaemonNotFound as exc:
            self._note_failure(str(exc))
            return
        session: Session | None = None
        conn: MessageStream | None = None
        try:
            try:
                with trio.fail_after(CONNECT_TIMEOUT):
                    stream = await self._connector(address)
                    conn = MessageStream(stream)
                    session = Session(
                        conn,
                        tools=self._tools,
                        limiter=limiter,
                        gui_executor=lambda: self.gui_executor,
                        on_tool_names=self._set_agent_names,
                        log=self._log,
                        unknown_tool=self._catch_all_tool,
                        resources=self._resources,
                        prompts=self._prompts,
                    )
                    async with self._tools_lock:
                        registered = await session.handshake(self._register_message(address.token))
                        if self._check_registered is not None:
                            self._check_registered(registered)
                        self._session = session
            except OSError as exc:
                hint = (
                    f" (the port came from {address.runtime_file}: the daemon may have exited; "
                    "start it with `toolbridge serve`)"
                    if address.runtime_file is not None
                    else ""
                )
                self._note_failure(
                    f"cannot connect to toolbridge at {address.host}:{address.port}: "
                    f"{exc.strerror or exc}{hint}"
                )
                return
            except trio.TooSlowError:
                self._note_failure(
                    f"toolbridge at {address.host}:{address.port} did not answer within "
                    f"{CONNECT_TIMEOUT:g} s"
                )
                return
            except ConnectionClosed as exc:
                self._note_failure(f"registration failed: {exc}")
                return
            except RegistrationRejected as exc:
                if exc.code in FATAL_REGISTRATION_CODES:
                    self._log.error("toolbridge refused the registration", code=exc.code, error=exc.message)
                    raise
                if exc.code == UNAUTHORIZED:
                    self._note_failure(
                        f"toolbridge refused the token ({exc.message}); retrying with the "
                        "current token",
                        ConnectionState.UNAUTHORIZED,
                    )
                else:
                    self._note_failure(f"toolbridge refused the registration ({exc.code}: {exc.message})")
                return
            self._registration = registered
            self._agent_names = dict(registered.tool_names)
            self._last_error = None
            failed, self._failures = self._failures, 0
            self._log.info(
                "connected to toolbridge",
                address=describe(address, stream),
                label=registered.app_label,
                tools=len(registered.tool_names),
                **({"after_failed_attempts": failed} if failed else {}),
            )
            self._set_state(ConnectionState.CONNECTED)
            on_registered()
            ended = False
            try:
                reason = await session.serve(registered.heartbeat_interval_ms)
                ended = True
            finally:
                if not ended and self._goodbye:  # stopping (cancelled): see protocol.md goodbye
                    await session.say_goodbye()
            self._log.warning("disconnected from toolbridge; reconnecting", reason=reason)
            self._last_error = reason
            self._set_state(ConnectionState.RECONNECTING)
        finally:
            self._session = None
            self._registration = None
            self._agent_names = {}
            if conn is not None:
                await conn.aclose()

    @contextlib.asynccontextmanager
    async def connected(self, *, timeout: float | None = None) -> AsyncIterator[App]:
        """Run the app in a background task for the duration of the ``async with`` block.

        Entering returns after the first registration; leaving stops the app. With
        ``timeout`` (seconds) entering raises :class:`trio.TooSlowError` if the first
        registration takes longer. Errors that end :meth:`run` are raised as they are (not
        wrapped in an exception group).
        """
        try:
            async with trio.open_nursery() as nursery:
                with trio.fail_after(timeout) if timeout is not None else contextlib.nullcontext():
                    await nursery.start(self.run)
                try:
                    yield self
                finally:
                    nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            sole = _sole_error(group)
            if sole is None:
                raise
            context, cause = sole.__context__, sole.__cause__
            try:
                raise sole
            finally:
                sole.__context__, sole.__cause__ = context, cause

    def start_in_thread(self) -> AppThread:
        """Run the app in a background thread with its own trio loop (for Tk, Qt, ...).

        Returns the started :class:`~app_client.threaded.AppThread`.
        """
        runner = AppThread(self)
        runner.start()
        return runner
