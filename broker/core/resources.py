"""Apps' resources (protocol v2): the agent-facing URI scheme, the directory, reads and updates.

Theory of operation
-------------------
Each app instance that negotiated protocol version 2 may offer resources and resource
templates under its own URIs. Agents see each one under the instance's label::

    toolbridge://<label>/<the app's own URI, exactly as the app wrote it>

(the label percent-encoded, though labels are ``[A-Za-z0-9_-]`` anyway). The app's URI is kept
verbatim, not percent-encoded, so a template stays a template: ``file:///notes/{name}`` is
offered as ``toolbridge://Notes/file:///notes/{name}``, and what an agent expands it to maps
back to exactly what the app's own expansion would be. The mapping is reversible by cutting
the prefix. :func:`split_uri` is the one place an agent's URI is parsed: a URI without the
prefix, with a label no app has, or naming an app URI the app neither listed nor matches with a
template, is refused (:class:`ResourceError`, ``-32002`` with a message naming the cause), so an
agent can name only resources an app offered, and only to that app. A URI a *template* matched
also passes the path-traversal guard (``..`` segments, percent-encoded or look-alike), as tool
arguments do; listed URIs are the app's own words and need no guard. Templates are matched in
time linear in the URI (``app_client.protocol.UriTemplate``, nothing compiled), in 5 ms turns
with the loop across an app's templates (:meth:`AppResources.offers`, so
:meth:`ResourceDirectory.resolve` is async), and an unlisted app URI over 8,192 characters is
refused without matching.

:class:`ResourceDirectory` holds each instance's offer (``AppResources``: what it listed, and
its link, the :class:`ResourcePort` a read goes to), a ``version`` bumped and an event pulsed at
every change of the set (for ``notifications/resources/list_changed``), and the listeners that
hear ``resourceUpdated`` (MCP sessions, which pass it on to agents that subscribed to exactly
that URI; an update is not matched against the app's templates, and a session's listener goes
when the session ends). It is the registry's (``Registry.resources``), so both the app links
and the MCP sessions reach it.
A one-app scope reads one instance's part (``offer_of``, ``prompts_of``) through its own view
(``broker.mcp.scope.ScopedResources``), which lists it under the app's own URIs and names.

Completions (protocol v2, section 12): :meth:`ResourceDirectory.resolve_completion` maps an
agent's ``completion/complete`` reference (a prompt's agent-facing name, a template's
agent-facing URI; in a one-app scope the app's own name or URI template, and only that app's)
back to the owning app's link and its own name, as a :class:`CompletionTarget`, whose
:meth:`~CompletionTarget.check` refuses an argument the prompt or template does not declare,
an over-long value, and (for a template, whose values end up in a URI) a value with a ``..``
path segment — all before the app sees anything.

Reconnects: when an instance that offered resources or prompts loses its link and enters its
reconnect grace period, its offer leaves the lists at once but the directory remembers the label
as *away* until the grace deadline (:meth:`ResourceDirectory.await_return`). A read or prompt
get naming an away label waits (:meth:`ResourceDirectory.wait_for_uri`,
:meth:`ResourceDirectory.wait_for_prompt`, bounded by the request's own deadline) until the app
registers again (its new offer is then used) or the grace ends (then it fails as for a label
nobody has), as tool calls wait for their app.
"""

from __future__ import annotations

import itertools
import time
import urllib.parse
import weakref
from collections.abc import Callable, Iterable
from typing import Any, Final, Protocol

import attrs
import msgspec
import trio

from app_client.protocol import BROKER_EXPRESSION as EXPRESSION
from app_client.protocol import MAX_RESOURCE_URI_CHARS as MAX_URI_CHARS
from app_client.protocol import PromptSpec, ResourceSpec, ResourceTemplateSpec, UriTemplate

from ..errors import BrokerError
from .guards import find_path_traversal
from .listing import Entry, Listing, Run, sorted_run

__all__ = ["SCHEME", "AppResources", "CompletionTarget", "ResourceDirectory", "ResourceError", "ResourcePort",
           "agent_uri", "split_uri"]

SCHEME: Final = "toolbridge://"
#: JSON-RPC code for a resource that does not exist (MCP's "Resource not found").
RESOURCE_NOT_FOUND: Final = -32002
#: How long template matching runs on the loop before it lets other tasks run (``offers``).
MATCH_SLICE: Final = 0.005


class ResourceError(BrokerError):
    """A read or subscription the broker refuses: ``code`` is the JSON-RPC code to answer with."""

    def __init__(self, message: str, code: int = RESOURCE_NOT_FOUND, kind: str = "unknown_tool") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        #: The call log's outcome (an ``OutcomeKind`` value): an unknown URI is logged like an
        #: unknown tool name.
        self.kind = kind


class ResourcePort(Protocol):
    """The link a read goes to (``AppLink``)."""

    async def read_resource(self, uri: str, timeout: float) -> list[dict[str, Any]]:
        """The app's contents for its own ``uri``; raises ResourceError for its refusal, a
        timeout or a disconnect."""

    async def get_prompt(self, name: str, arguments: dict[str, str], timeout: float) -> dict[str, Any]:
        """The app's rendering of its prompt ``name`` (``messages``, ``description``); raises
        ResourceError as :meth:`read_resource` does."""

    @property
    def completions(self) -> bool:
        """Whether the app answers completion requests (``register.completions``)."""

    async def complete(self, ref: tuple[str, str], argument: str, value: str, arguments: dict[str, str],
                       timeout: float) -> dict[str, Any]:
        """The app's suggestions (``values``, ``total``?, ``hasMore``) for ``argument`` of
        ``ref`` (``("prompt", name)`` or ``("uriTemplate", template)``, the app's own); raises
        ResourceError as :meth:`read_resource` does."""


def agent_uri(label: str, uri: str) -> str:
    """The agent-facing URI (or template) of an app's own ``uri``."""
    return f"{SCHEME}{urllib.parse.quote(label, safe='')}/{uri}"


@attrs.define(eq=False)
class AppResources:
    """One instance's resources, as the app declared them, and its link."""

    label: str
    port: ResourcePort
    resources: list[ResourceSpec]
    templates: list[ResourceTemplateSpec]
    _by_uri: dict[str, ResourceSpec] = attrs.field(init=False)
    #: Split on first use, not compiled (``app_client.protocol.UriTemplate``).
    _patterns: list[UriTemplate] = attrs.field(init=False)

    #: The list entries, made once (``listing``): by agent-facing URI, and by template.
    resource_run: Run = attrs.field(init=False)
    template_run: Run = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._by_uri = {spec.uri: spec for spec in self.resources}
        self._patterns = [UriTemplate(t.uri_template) for t in self.templates]
        self.resource_run = sorted_run((resource_entry(self.label, spec) for spec in self.resources), _uri_key)
        self.template_run = sorted_run((template_entry(self.label, spec) for spec in self.templates), _template_key)

    async def offers(self, uri: str) -> bool:
        """Whether ``uri`` (the app's own) is listed or matches a template (guarded). Matching
        yields to the loop every :data:`MATCH_SLICE` seconds: an app may declare 1,000 templates,
        each matched in time linear in the URI but together worth a stall."""
        if uri in self._by_uri:
            return True
        if len(uri) > MAX_URI_CHARS:
            raise ResourceError(f"the resource URI is {len(uri)} characters; toolbridge reads resource URIs of at "
                                f"most {MAX_URI_CHARS} (take them from resources/list or expand a template of "
                                "resources/templates/list)", code=-32602, kind="invalid_arguments")
        if not await self._matches_a_template(uri):
            return False
        if find_path_traversal(uri) is not None:
            raise ResourceError(f"the resource URI {uri!r} has a '..' path segment; toolbridge refuses path "
                                "traversal in resource URIs", code=-32602, kind="guard_rejected")
        return True

    async def _matches_a_template(self, uri: str) -> bool:
        resume_by = time.perf_counter() + MATCH_SLICE
        for pattern in self._patterns:
            if pattern.matches(uri):
                return True
            if time.perf_counter() > resume_by:
                await trio.sleep(0)
                resume_by = time.perf_counter() + MATCH_SLICE
        return False


def _uri_key(entry: Entry) -> str:
    return str(entry["uri"])


def _template_key(entry: Entry) -> str:
    return str(entry["uriTemplate"])


def _name_key(entry: Entry) -> str:
    return str(entry["name"])


def resource_entry(label: str, spec: ResourceSpec) -> dict[str, Any]:
    entry: dict[str, Any] = {"uri": agent_uri(label, spec.uri), "name": spec.name}
    for key, value in (("title", spec.title), ("description", spec.description), ("mimeType", spec.mime_type),
                       ("size", spec.size), ("annotations", spec.annotations)):
        if value is not None:
            entry[key] = value
    return entry


def template_entry(label: str, spec: ResourceTemplateSpec) -> dict[str, Any]:
    entry: dict[str, Any] = {"uriTemplate": agent_uri(label, spec.uri_template), "name": spec.name}
    for key, value in (("title", spec.title), ("description", spec.description), ("mimeType", spec.mime_type),
                       ("annotations", spec.annotations)):
        if value is not None:
            entry[key] = value
    return entry


class ResourceDirectory:
    """Every instance's resources by label, and who hears of changes (module docstring)."""

    def __init__(self) -> None:
        self._apps: dict[str, AppResources] = {}
        self.version = 0
        self._changed = trio.Event()
        #: Who hears ``resourceUpdated``, by registration number: removed when the listener says
        #: so (a session or request ends) or its object is gone, never left for an update to sweep.
        self._listeners: dict[int, weakref.WeakMethod[Callable[[str], None]]] = {}
        self._listener_numbers = itertools.count()
        #: Prompts (protocol v2) by label, with the link that renders them; their own version.
        self._prompts: dict[str, tuple[ResourcePort, list[PromptSpec]]] = {}
        #: Each label's prompts as list entries, made once when it offers them (``listing``).
        self._prompt_runs: dict[str, Run] = {}
        self.prompts_version = 0
        #: The prepared lists, each with the version it was made at (rebuilt after a change).
        self._listings: dict[str, tuple[int, Listing]] = {}
        self._prompts_changed = trio.Event()
        #: Labels in their reconnect grace period, with its deadline (trio time), and an event
        #: pulsed when one comes back or its grace ends.
        self._away: dict[str, float] = {}
        self._back = trio.Event()

    # --- the app links' face -------------------------------------------------------------

    def offer(self, label: str, port: ResourcePort, resources: list[ResourceSpec],
              templates: list[ResourceTemplateSpec]) -> None:
        """``label``'s instance offers these (replacing what it offered before)."""
        self.returned(label)
        old = self._apps.get(label)
        if not resources and not templates:
            if old is not None:
                self.withdraw(label, old.port)
            return
        self._apps[label] = AppResources(label, port, list(resources), list(templates))
        self._bump()

    def withdraw(self, label: str, port: ResourcePort) -> bool:
        """The link ``port`` of ``label`` ended: its resources and prompts go (not a newer link's).
        True if it offered any."""
        withdrawn = False
        current = self._apps.get(label)
        if current is not None and current.port is port:
            del self._apps[label]
            self._bump()
            withdrawn = True
        prompts = self._prompts.get(label)
        if prompts is not None and prompts[0] is port:
            del self._prompts[label]
            self._prompt_runs.pop(label, None)
            self._bump_prompts()
            withdrawn = True
        return withdrawn

    # --- reconnects: reads wait for an app in its grace period ----------------------------

    def await_return(self, label: str, deadline: float) -> None:
        """``label`` lost its link and may come back until ``deadline``: reads naming it wait."""
        self._away[label] = deadline

    def returned(self, label: str) -> None:
        """``label`` registered again, or its grace period ended: waiting reads go on."""
        if self._away.pop(label, None) is not None:
            self._back.set()
            self._back = trio.Event()

    async def _wait_back(self, label: str) -> bool:
        """Wait while ``label`` is away; True if it was."""
        if label not in self._away:
            return False
        while label in self._away:
            with trio.move_on_at(self._away[label]):
                await self._back.wait()
                continue
            self._away.pop(label, None)  # the grace ended without the registry saying so yet
        return True

    async def wait_for_uri(self, uri: str) -> bool:
        """Return once the app of the agent-facing ``uri`` is connected or not away (in its grace
        period), True if it waited; the caller bounds the wait with the request's deadline,
        then resolves."""
        try:
            label, _ = split_uri(uri)
        except ResourceError:
            return False  # resolve() says why
        return label not in self._apps and await self._wait_back(label)

    async def wait_for_prompt(self, name: str) -> bool:
        """As :meth:`wait_for_uri`, for the agent-facing prompt ``name`` (``<label>__<name>``)."""
        label = name.split("__", 1)[0]
        return label not in self._prompts and await self._wait_back(label)

    def offer_prompts(self, label: str, port: ResourcePort, prompts: list[PromptSpec]) -> None:
        """``label``'s instance offers these prompts (replacing what it offered before)."""
        if prompts:
            self._prompts[label] = (port, list(prompts))
            self._prompt_runs[label] = sorted_run(
                (prompt_entry(prompt_name(label, spec.name), spec) for spec in prompts), _name_key)
        elif self._prompts.pop(label, None) is None:
            return
        else:
            self._prompt_runs.pop(label, None)
        self._bump_prompts()

    def _bump_prompts(self) -> None:
        self.prompts_version += 1
        self._prompts_changed.set()
        self._prompts_changed = trio.Event()

    async def wait_prompts_changed(self, seen: int) -> int:
        while self.prompts_version == seen:
            await self._prompts_changed.wait()
        return self.prompts_version

    def list_prompts(self) -> list[dict[str, Any]]:
        """Every prompt as ``<label>__<name>``, sorted (deterministic, for pagination)."""
        return list(self.prompt_listing().entries)

    def prompt_listing(self) -> Listing:
        """The prompts' list, prepared once per change (``broker.core.listing``)."""
        return self._listing("prompts", self.prompts_version, self._prompt_runs.values)

    def resource_listing(self) -> Listing:
        """The resources' list, by agent-facing URI, prepared once per change."""
        return self._listing("resources", self.version, lambda: [app.resource_run for app in self._apps.values()])

    def template_listing(self) -> Listing:
        """The templates' list, by agent-facing template, prepared once per change."""
        return self._listing("templates", self.version, lambda: [app.template_run for app in self._apps.values()])

    def _listing(self, kind: str, version: int, runs: Callable[[], Iterable[Run]]) -> Listing:
        made = self._listings.get(kind)
        if made is None or made[0] != version:
            made = self._listings[kind] = (version, Listing.of(runs()))
        return made[1]

    # --- one instance's offer (a one-app scope's view, ``broker.mcp.scope``) --------------

    def offer_of(self, label: str) -> AppResources | None:
        """What the instance ``label`` offers now (its resources and templates), or None."""
        return self._apps.get(label)

    def prompts_of(self, label: str) -> tuple[ResourcePort, list[PromptSpec]] | None:
        """The instance ``label``'s prompts and the link that renders them, or None."""
        return self._prompts.get(label)

    def resolve_prompt(self, name: str) -> tuple[str, ResourcePort, PromptSpec]:
        """``(label, link, spec)`` of the agent-facing prompt ``name``; ResourceError if none."""
        for label, (port, specs) in self._prompts.items():
            prefix = prompt_name(label, "")
            if name.startswith(prefix):
                own = name[len(prefix):]
                for spec in specs:
                    if spec.name == own:
                        return label, port, spec
        raise ResourceError(f"unknown prompt {name[:200]!r}: list them again with prompts/list "
                            "(prompts are named <App>__<prompt>)", code=-32602)

    def resolve_completion(self, ref: Any, scope: str | None = None) -> CompletionTarget:
        """The target of a ``completion/complete`` ``ref``; ResourceError (``-32602``) if none.

        ``scope`` (a one-app scope's label): the ref uses that app's own prompt name or URI
        template, and names nothing of any other app.
        """
        kind = ref.get("type") if isinstance(ref, dict) else None
        if kind == "ref/prompt" and isinstance(ref.get("name"), str):
            name: str = ref["name"]
            if scope is None:
                try:
                    label, port, spec = self.resolve_prompt(name)
                except ResourceError as exc:
                    raise _bad_ref(exc.message) from None
            else:
                label = scope
                offered = self._prompts.get(scope)
                found = [spec for spec in offered[1] if spec.name == name] if offered is not None else []
                if offered is None or not found:
                    raise _bad_ref(f"unknown prompt {name[:200]!r}: this app ({scope}) has no such prompt; list "
                                   "them again with prompts/list")
                port, spec = offered[0], found[0]
            return CompletionTarget(label, port, "prompt", spec.name, tuple(arg.name for arg in spec.arguments))
        if kind == "ref/resource" and isinstance(ref.get("uri"), str):
            uri: str = ref["uri"]
            if scope is None:
                try:
                    label, own = split_uri(uri)
                except ResourceError as exc:
                    raise _bad_ref(exc.message) from None
            else:
                label, own = scope, uri
            app = self._apps.get(label)
            template = next((t for t in app.templates if t.uri_template == own), None) if app else None
            if app is None or template is None:
                listed = app is not None and own in app._by_uri
                raise _bad_ref(f"{uri[:200]!r} is " + (
                    "a resource, not a resource template: only a template's variables complete" if listed else
                    "no resource template of a connected app: list them with resources/templates/list"))
            return CompletionTarget(label, app.port, "uriTemplate", own,
                                    tuple(dict.fromkeys(EXPRESSION.findall(template.uri_template))))
        raise _bad_ref('Invalid params: completion/complete needs "ref": {"type": "ref/prompt", "name": ...} or '
                       '{"type": "ref/resource", "uri": ...}')

    def updated(self, label: str, uri: str) -> None:
        """The app says its resource ``uri`` changed: tell the listeners its agent-facing URI."""
        # Not matched against the app's templates (up to 1,000 of them, on the loop, for every
        # update): each listener passes on only the exact URIs its agent asked to hear of, and an
        # app names only URIs under its own label, so matching would keep nothing from anyone.
        if label not in self._apps or len(uri) > MAX_URI_CHARS:
            return
        full = agent_uri(label, uri)
        for ref in list(self._listeners.values()):
            listener = ref()
            if listener is not None:
                listener(full)

    def _bump(self) -> None:
        self.version += 1
        self._changed.set()
        self._changed = trio.Event()

    # --- the MCP sessions' face ----------------------------------------------------------

    def on_updated(self, listener: Callable[[str], None]) -> Callable[[], None]:
        """Call the bound method ``listener(agent_uri)`` at each ``resourceUpdated`` (held weakly)
        until the returned function is called (or the listener's object is gone)."""
        number = next(self._listener_numbers)
        listeners = self._listeners

        def forget(_: object = None) -> None:
            listeners.pop(number, None)

        self._listeners[number] = weakref.WeakMethod(listener, forget)
        return forget

    @property
    def listener_count(self) -> int:
        """How many listeners hear ``resourceUpdated`` now (one per open session, and the uplink)."""
        return len(self._listeners)

    async def wait_changed(self, seen: int) -> int:
        while self.version == seen:
            await self._changed.wait()
        return self.version

    def list_resources(self) -> list[dict[str, Any]]:
        """Every resource, sorted by agent-facing URI (deterministic: pagination bisects on it)."""
        return list(self.resource_listing().entries)

    def list_templates(self) -> list[dict[str, Any]]:
        return list(self.template_listing().entries)

    async def resolve(self, uri: str) -> tuple[AppResources, str]:
        """The app offering the agent-facing ``uri`` and the app's own URI; ResourceError if none."""
        label, own = split_uri(uri)
        app = self._apps.get(label)
        if app is None:
            raise ResourceError(f"unknown resource {uri!r}: no connected app {label!r} offers resources; "
                                "list them again with resources/list")
        if not await app.offers(own):
            raise ResourceError(f"unknown resource {uri!r}: the app {label!r} offers no resource {own!r}; "
                                "list them again with resources/list or resources/templates/list")
        return app, own


def prompt_entry(name: str, spec: PromptSpec) -> dict[str, Any]:
    """The ``prompts/list`` entry of ``spec``, listed as ``name``."""
    entry: dict[str, Any] = {"name": name}
    for key, value in (("title", spec.title), ("description", spec.description)):
        if value is not None:
            entry[key] = value
    if spec.arguments:
        entry["arguments"] = [msgspec_to_dict(arg) for arg in spec.arguments]
    return entry
#: JSON-RPC "Invalid params": what MCP's completion section answers a bad reference with.
_INVALID_PARAMS: Final = -32602
#: The longest argument value a completion request may carry (what a user typed so far).
MAX_COMPLETION_VALUE: Final = 4096


@attrs.frozen
class CompletionTarget:
    """What a ``completion/complete`` reference names: the app, its link and its own name."""

    label: str
    port: ResourcePort
    #: ``prompt`` or ``uriTemplate`` (the wire's field) ...
    kind: str
    #: ... and the app's own prompt name or URI template.
    own: str
    #: The arguments (a prompt's) or variables (a template's) it declares.
    names: tuple[str, ...]

    @property
    def what(self) -> str:
        return f"the prompt {self.own!r}" if self.kind == "prompt" else f"the resource template {self.own!r}"

    def check(self, argument: str, value: str, context: dict[str, str]) -> dict[str, str]:
        """Refuse what the app must not see (ResourceError, ``-32602``); the context arguments
        worth passing on (the declared ones, besides ``argument``)."""
        if argument not in self.names:
            raise ResourceError(f"{self.what} of {self.label} has no argument {argument[:128]!r} (it takes: "
                                f"{', '.join(self.names) or 'none'})", code=_INVALID_PARAMS, kind="invalid_arguments")
        known = {name: text for name, text in context.items() if name in self.names and name != argument}
        for text in (value, *known.values()):
            if len(text) > MAX_COMPLETION_VALUE:
                raise ResourceError(f"a completion value is {len(text)} characters; at most {MAX_COMPLETION_VALUE}",
                                    code=_INVALID_PARAMS, kind="invalid_arguments")
            # A template's values become part of a URI the app resolves: the read's guard applies.
            if self.kind == "uriTemplate" and find_path_traversal(text) is not None:
                raise ResourceError(f"a value for {self.what} has a '..' path segment; toolbridge refuses path "
                                    "traversal in resource URIs", code=_INVALID_PARAMS, kind="guard_rejected")
        return known


def _bad_ref(message: str) -> ResourceError:
    return ResourceError(message, code=_INVALID_PARAMS, kind="unknown_tool")


def prompt_name(label: str, name: str) -> str:
    """The agent-facing name of an app's prompt: ``<label>__<name>``, as tools are named."""
    return f"{label}__{name}"


def msgspec_to_dict(value: Any) -> dict[str, Any]:
    """A spec struct as its wire dict (camelCase, defaults left out)."""
    result: dict[str, Any] = msgspec.to_builtins(value)
    return result


def split_uri(uri: str) -> tuple[str, str]:
    """``toolbridge://<label>/<own>`` → ``(label, own)``; ResourceError for anything else."""
    if not uri.startswith(SCHEME):
        raise ResourceError(f"unknown resource {uri[:200]!r}: toolbridge's resource URIs start with "
                            f"{SCHEME}<App>/ (take them from resources/list)")
    label, slash, own = uri[len(SCHEME):].partition("/")
    if not slash or not label or not own:
        raise ResourceError(f"unknown resource {uri[:200]!r}: expected {SCHEME}<App>/<the app's URI>")
    return urllib.parse.unquote(label), own
