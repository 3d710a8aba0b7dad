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

In such a session ``tools/list`` holds the app's tools under the names the app registered
(``export_pdf``, not ``WatchTower__export_pdf``), sorted by that name, without the
meta-tools; while no app has that label the list is empty. A ``tools/call`` is resolved
against that app alone (so an app's tool named ``search_tools`` or ``Other__echo`` is that
app's tool, never a meta-tool or another app's) and then goes through the router under the
tool's agent-facing name, exactly as a call on ``/mcp`` does: validation, guards,
deadlines, audit, the call log (whose rows show the agent-facing name). An unknown name is
a JSON-RPC ``-32602`` error saying what to do — and, when the app is not connected, that.

:class:`AppScopes` (one per :class:`~broker.mcp.session.McpServer`) keeps, per label asked
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
from typing import TYPE_CHECKING, Final

import attrs
import msgspec

from ..core.names import make_label, near_names
from .jsonrpc import INVALID_PARAMS, RpcError
from .results import tool_entry

if TYPE_CHECKING:
    from ..core.registry import Instance, RegisteredTool, Registry

__all__ = [
    "APPS_PATH_PREFIX", "MAX_APP_NAME", "AppScopes", "ScopeView", "check_app_name", "scope_instructions",
    "unknown_tool_error",
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
    near = near_names(name, view.names, limit=5)
    hint = f" Did you mean {', '.join(near)}?" if near else ""
    return RpcError(
        INVALID_PARAMS,
        f"Unknown tool: {shown!r}: the app {view.label!r} has no tool by that name.{hint} "
        "Call tools/list for its tools.",
        {"name": shown, "app": view.label, "connected": True},
    )
