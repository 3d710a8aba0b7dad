"""One-app scopes: exactly one app's tools, under the app's own names.

Theory of operation
-------------------
``toolbridge stdio --app NAME`` (``agentConnect`` with ``"app": NAME``) and the HTTP endpoint
``/mcp/apps/NAME`` give a session that sees one app instance: the one whose *label* is
``NAME`` (``WatchTower``; a second running copy is ``WatchTower_2``, as ``toolbridge status``
shows). The match is exact and case-sensitive, like the labels themselves: ``Demo`` and
``demo`` can be two different apps. ``NAME`` must look like a label (:func:`check_app_name`:
1-64 of ``A-Z a-z 0-9 _ -``); anything else (a path, ``..``, a space, a very long string) is
refused before a session exists. A name that is valid but belongs to no connected app is
accepted: the app may start later.

A restarted app (a new process: a new instance) comes back while its old instance still waits
out the reconnect grace, so it gets the next label (``WatchTower_2``) and the old label goes
with the grace. So that the scope does not lose the app then, ``NAME`` resolves to the first
of these that is connected: the instance labelled ``NAME``, then the instances whose *first*
label (what their ``appName`` makes with no other copy running) is ``NAME``, in label order;
when none is connected, the instance labelled ``NAME`` while it waits out its grace (calls wait
for it, as on ``/mcp``). ``WatchTower_2`` itself names exactly that label. Since the list's
digest covers only what is listed, moving to a restarted copy with the same tools is
invisible to the agent (no ``list_changed``); its calls go to the connected copy.

Resources and prompts (apps' protocol v2): :class:`ScopedResources` is a session's view of the
registry's resource directory (``broker.core.resources``) through the same resolution. It has
the directory's face (``list_resources``, ``resolve``, ``list_prompts``, ``resolve_prompt``,
``version`` / ``wait_changed`` ...), so the session's handlers use either one alike, but it
holds only the scope's instance's entries, under the app's *own* URIs (``test://static-text``,
not ``toolbridge://Demo/test://static-text``) and own prompt names (no ``Demo__``). A URI is
resolved against that one app's offer alone (:meth:`AppResources.offers`: listed exactly, or
matched by one of its templates and passing the traversal guard), so no spelling of another
app's resource (its own URI, its ``toolbridge://`` form, a ``..`` path) reaches it: each is
"unknown resource", as a URI no app offers is. ``resourceUpdated`` arrives at sessions as
agent-facing URIs; :meth:`ScopedResources.own_uri` keeps only the scope's app's, cut to its own
URI, and the URIs in what a read or a prompt returns (which the app link makes agent-facing)
are cut back to the app's own (:meth:`ScopedResources.own_contents`). Its versions count
changes of a digest of the scope's own list (resources and templates;
prompts), re-checked at every change of the directory *or* of the registry (a restarted copy
taking over the scope), so ``list_changed`` follows that app alone, as for tools.

In such a session ``tools/list`` holds the app's tools under the names the app registered
(``export_pdf``, not ``WatchTower__export_pdf``), sorted by that name, without the
meta-tools; while no app has that label the list is empty. A ``tools/call`` is resolved
against that app alone (so an app's tool named ``search_tools`` or ``Other__echo`` is that
app's tool, never a meta-tool or another app's) and then goes through the router under the
tool's agent-facing name, exactly as a call on ``/mcp`` does: validation, guards,
deadlines, audit, the call log (whose rows show the agent-facing name). An unknown name is
a JSON-RPC ``-32602`` error saying what to do — and, when the app is not connected, that.

:class:`AppScopes` (one per :class:`~broker.mcp.server.McpServer`) keeps, per label asked
for, a :class:`ScopeView` built at most once per registry version and shared by every
session: the own names, their encoded ``tools/list`` entries and a digest of them. Sessions
compare digests after each registry change, so a scoped session hears
``notifications/tools/list_changed`` only when *its* app comes, goes or changes its tools
(an app reconnecting with the same tools changes nothing). During an app's reconnect grace
its tools stay listed (calls wait for it), as on ``/mcp``. Only views of present apps are
cached, so asking for many absent names costs no memory.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

import attrs
import msgspec
import trio

from app_client.protocol import PromptSpec

from ..core.listing import Listing
from ..core.names import make_label, near_names
from ..core.resources import (
    AppResources,
    ResourceDirectory,
    ResourceError,
    ResourcePort,
    agent_uri,
    prompt_entry,
    prompt_name,
    resource_entry,
    split_uri,
    template_entry,
)
from .jsonrpc import INVALID_PARAMS, RpcError
from .results import tool_entry

if TYPE_CHECKING:
    from ..core.registry import Instance, RegisteredTool, Registry

__all__ = [
    "APPS_PATH_PREFIX", "MAX_APP_NAME", "AppScopes", "ScopeView", "ScopedResources", "check_app_name",
    "scope_instructions", "unknown_tool_error",
]

#: HTTP: ``/mcp/apps/<label>`` serves one app's scope.
APPS_PATH_PREFIX: Final = "/mcp/apps/"
#: Labels are at most 24 characters plus a ``_N`` suffix; 64 leaves room and bounds the input.
MAX_APP_NAME: Final = 64
_LABEL: Final = re.compile(r"[A-Za-z0-9_-]+")
_encoder: Final = msgspec.json.Encoder()
_EMPTY_DIGEST: Final = hashlib.sha256().digest()


def check_app_name(name: object) -> str | None:
    """Why ``name`` cannot name an app's scope, or None when it can (it looks like a label)."""
    if not isinstance(name, str) or not name:
        return "name the app: its label, as `toolbridge status` shows it (for example WatchTower)"
    if len(name) > MAX_APP_NAME:
        return f"an app label is at most {MAX_APP_NAME} characters; this one has {len(name)}"
    if not _LABEL.fullmatch(name):
        return (f"{name[:80]!r} is not an app label: labels are letters, digits, '_' and '-' only "
                "(use the label `toolbridge status` shows, for example WatchTower or WatchTower_2)")
    return None


def scope_instructions(label: str) -> str:
    return (
        f"toolbridge connects you to the desktop application {label} running on this computer. "
        f"Its tools have the app's own names. The list is empty while {label} is not running "
        "and fills in when it starts: list the tools again when told they changed, or when a "
        "call says a tool is unknown. A result with isError explains what went wrong and "
        "whether retrying can help."
    )


@attrs.frozen(eq=False)
class ScopeView:
    """One label's tools at one registry version."""

    label: str
    #: The instance with that label; None while no app has it.
    instance: Instance | None
    #: Own names, sorted (the cursor order of ``tools/list``), and their encoded entries.
    names: list[str]
    entries: list[msgspec.Raw]
    tools: dict[str, RegisteredTool]
    #: Changes exactly when the listed entries change.
    digest: bytes

    @property
    def present(self) -> bool:
        return self.instance is not None


def _entry(tool: RegisteredTool) -> msgspec.Raw:
    entry = tool_entry(tool)
    entry["name"] = tool.name
    # The /mcp entry names the app and the tool when its agent name hides them; here the
    # name is the tool's own and the app is the scope.
    entry.pop("_meta", None)
    return msgspec.Raw(_encoder.encode(entry))


def _absent(label: str) -> ScopeView:
    return ScopeView(label, None, [], [], {}, _EMPTY_DIGEST)


class AppScopes:
    """The per-label views of the registry that scoped sessions share (see the module docstring)."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._version = -1
        self._labels: dict[str, Instance] = {}
        #: First label (``names.make_label`` with nothing taken) -> its instances, by label.
        self._bases: dict[str, list[Instance]] = {}
        self._views: dict[str, ScopeView] = {}
        # Dropped at once on a change, so a departed app's schemas do not outlive it here.
        registry.on_change(self._drop)

    def _drop(self) -> None:
        self._views = {}
        self._labels = {}
        self._bases = {}
        self._version = -1

    def view(self, label: str) -> ScopeView:
        registry = self._registry
        if self._version != registry.version:
            self._views = {}
            instances = registry.instances()  # sorted by label
            self._labels = {instance.label: instance for instance in instances}
            self._bases = {}
            for each in instances:
                self._bases.setdefault(make_label(each.app_name, ()), []).append(each)
            self._version = registry.version
        view = self._views.get(label)
        if view is not None:
            return view
        found = self._resolve(label)
        if found is None:
            return _absent(label)
        instance = found
        tools = dict(sorted(instance.tools.items()))
        entries = [_entry(tool) for tool in tools.values()]
        digest = hashlib.sha256(b"\n".join(bytes(entry) for entry in entries)).digest()
        view = self._views[label] = ScopeView(label, instance, list(tools), entries, tools, digest)
        return view

    def _resolve(self, label: str) -> Instance | None:
        """The instance the scope ``label`` serves now (see the module docstring)."""
        return _first_connected(self._labels.get(label), self._bases.get(label, []))


def _first_connected(exact: Instance | None, others: list[Instance]) -> Instance | None:
    for candidate in (exact, *others):
        if candidate is not None and candidate.link is not None:
            return candidate
    return exact


def unknown_tool_error(view: ScopeView, name: str) -> RpcError:
    """The ``-32602`` error for a ``tools/call`` of a name the scope's app does not have."""
    shown = name[:128]
    if not view.present:
        return RpcError(
            INVALID_PARAMS,
            f"Unknown tool: {shown!r}. The app {view.label!r} is not connected to toolbridge now, so "
            "this connection offers no tools. Start the app (its tools are listed as soon as it "
            "connects, and notifications/tools/list_changed says so); if it is running, check the "
            f"name: {view.label!r} must be its label exactly as `toolbridge status` shows it "
            "(case-sensitive; a second copy is <App>_2).",
            {"name": shown, "app": view.label, "connected": False},
        )
    near = near_names(name, view.names, limit=5, fuzzy=True)
    hint = f" Did you mean {', '.join(near)}?" if near else ""
    return RpcError(
        INVALID_PARAMS,
        f"Unknown tool: {shown!r}: the app {view.label!r} has no tool by that name.{hint} "
        "Call tools/list for its tools.",
        {"name": shown, "app": view.label, "connected": True},
    )


_Waiter = Callable[[int], Awaitable[int]]


def _digest(entries: list[dict[str, Any]]) -> bytes:
    return hashlib.sha256(b"\n".join(_encoder.encode(entry) for entry in entries)).digest()


class ScopedResources:
    """One scoped session's view of the resource directory (see the module docstring).

    Per session (it remembers the last digests it reported); cheap to make: it holds no entries.
    """

    def __init__(self, scopes: AppScopes, directory: ResourceDirectory, registry: Registry, label: str) -> None:
        self._scopes = scopes
        self._directory = directory
        self._registry = registry
        self.label = label
        #: kind -> (digest last seen, how many times it changed): the scope's own list versions.
        self._seen: dict[str, tuple[bytes, int]] = {}

    # --- what the scope's app offers now -------------------------------------------------

    def _instance_label(self) -> str | None:
        """The label of the instance the scope serves now (None while no app has it)."""
        instance = self._scopes.view(self.label).instance
        return None if instance is None else instance.label

    def serving(self) -> str:
        """The label of the instance the scope serves now — a restarted copy's (``Demo_2``)
        while the old one waits out its grace — else the scope's own name (no app has it)."""
        return self._instance_label() or self.label

    async def wait_for_uri(self, uri: str) -> bool:
        """The directory's :meth:`~ResourceDirectory.wait_for_uri` for the app's own ``uri``: while
        the scope's app is away in its reconnect grace period (it comes back under its label)."""
        return await self._directory.wait_for_uri(agent_uri(self.label, uri))

    async def wait_for_prompt(self, name: str) -> bool:
        """As :meth:`wait_for_uri`, for the app's own prompt ``name``."""
        return await self._directory.wait_for_prompt(prompt_name(self.label, name))

    def _offer(self) -> AppResources | None:
        label = self._instance_label()
        return None if label is None else self._directory.offer_of(label)

    def list_resources(self) -> list[dict[str, Any]]:
        """The app's resources under its own URIs, sorted by URI (pagination bisects on it)."""
        app = self._offer()
        if app is None:
            return []
        entries = [{**resource_entry(app.label, spec), "uri": spec.uri} for spec in app.resources]
        return sorted(entries, key=lambda entry: str(entry["uri"]))

    def list_templates(self) -> list[dict[str, Any]]:
        app = self._offer()
        if app is None:
            return []
        entries = [{**template_entry(app.label, spec), "uriTemplate": spec.uri_template} for spec in app.templates]
        return sorted(entries, key=lambda entry: str(entry["uriTemplate"]))

    # One app's lists (at most 1,000 entries each): made per request, as sorted as the directory's.

    def resource_listing(self) -> Listing:
        return _listing(self.list_resources(), "uri")

    def template_listing(self) -> Listing:
        return _listing(self.list_templates(), "uriTemplate")

    def prompt_listing(self) -> Listing:
        return _listing(self.list_prompts(), "name")

    async def resolve(self, uri: str) -> tuple[AppResources, str]:
        """The scope's app and ``uri`` (its own URI) when it offers it; ResourceError if not."""
        app = self._offer()
        shown = uri[:200]
        if app is None:
            raise ResourceError(
                f"unknown resource {shown!r}: the app {self.label!r} is not connected to toolbridge now, so this "
                "connection offers no resources; start the app (notifications/resources/list_changed says when "
                "its resources are listed)")
        if not await app.offers(uri):
            raise ResourceError(
                f"unknown resource {shown!r}: the app {self.label!r} offers no such resource; list them with "
                "resources/list or resources/templates/list (here URIs are the app's own, with no toolbridge:// "
                "prefix)")
        return app, uri

    def own_uri(self, agent_uri: str) -> str | None:
        """The scope's app's own URI in an agent-facing ``agent_uri``; None for another app's."""
        try:
            label, own = split_uri(agent_uri)
        except ResourceError:
            return None
        return own if label == self._instance_label() else None

    def own_contents(self, label: str, contents: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A read's ``contents`` under the app's own URIs (the link made them agent-facing)."""
        prefix = agent_uri(label, "")
        return [{**item, "uri": item["uri"][len(prefix):]}
                if isinstance(item.get("uri"), str) and item["uri"].startswith(prefix) else item
                for item in contents]

    def own_prompt(self, label: str, result: dict[str, Any]) -> dict[str, Any]:
        """A rendered prompt with its embedded resources under the app's own URIs."""
        messages = []
        for message in result.get("messages") or []:
            content = message.get("content")
            if isinstance(content, dict) and content.get("type") == "resource" and isinstance(
                    content.get("resource"), dict):
                message = {**message, "content": {**content,
                                                  "resource": self.own_contents(label, [content["resource"]])[0]}}
            messages.append(message)
        return {**result, "messages": messages}

    def list_prompts(self) -> list[dict[str, Any]]:
        """The app's prompts under their own names, sorted by name."""
        offered = self._prompts()
        entries = [] if offered is None else [prompt_entry(spec.name, spec) for spec in offered[2]]
        return sorted(entries, key=lambda entry: str(entry["name"]))

    def _prompts(self) -> tuple[str, ResourcePort, list[PromptSpec]] | None:
        label = self._instance_label()
        offered = None if label is None else self._directory.prompts_of(label)
        return None if label is None or offered is None else (label, offered[0], offered[1])

    def resolve_prompt(self, name: str) -> tuple[str, ResourcePort, PromptSpec]:
        """``(instance label, link, spec)`` of the app's own prompt ``name``; ResourceError if none."""
        offered = self._prompts()
        if offered is not None:
            label, port, specs = offered
            for spec in specs:
                if spec.name == name:
                    return label, port, spec
        connected = "" if self._instance_label() is not None else " (it is not connected to toolbridge now)"
        raise ResourceError(f"unknown prompt {name[:200]!r}: the app {self.label!r} has no prompt by that "
                            f"name{connected}; list them with prompts/list", code=INVALID_PARAMS)

    # --- list_changed: versions of the scope's own lists ---------------------------------

    def _count(self, kind: str, digest: bytes) -> int:
        seen = self._seen.get(kind)
        if seen is None:
            self._seen[kind] = (digest, 0)
            return 0
        if seen[0] != digest:
            self._seen[kind] = seen = (digest, seen[1] + 1)
        return seen[1]

    @property
    def version(self) -> int:
        """Changes exactly when the listed resources or templates change."""
        return self._count("resources", _digest([*self.list_resources(), {}, *self.list_templates()]))

    @property
    def prompts_version(self) -> int:
        return self._count("prompts", _digest(self.list_prompts()))

    async def wait_changed(self, seen: int) -> int:
        while self.version == seen:
            await self._next_change(self._directory.wait_changed, self._directory.version)
        return self.version

    async def wait_prompts_changed(self, seen: int) -> int:
        while self.prompts_version == seen:
            await self._next_change(self._directory.wait_prompts_changed, self._directory.prompts_version)
        return self.prompts_version

    async def _next_change(self, wait: _Waiter, version: int) -> None:
        """Until the directory's list (``wait`` from ``version``) or the registry changes."""
        registry = self._registry
        async with trio.open_nursery() as nursery:

            async def first(waiter: _Waiter, seen: int) -> None:
                await waiter(seen)
                nursery.cancel_scope.cancel()

            nursery.start_soon(first, wait, version)
            nursery.start_soon(first, registry.wait_changed, registry.version)


def _listing(sorted_entries: list[dict[str, Any]], key: str) -> Listing:
    return Listing([str(entry[key]) for entry in sorted_entries], sorted_entries)
