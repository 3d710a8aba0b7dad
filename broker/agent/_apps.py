"""``tb.apps.<App>.<tool>(...)``: the live tool list as attributes, named like the generated stubs.

Theory of operation
-------------------
:func:`build_namespace` turns a tool listing (MCP ``Tool`` objects) into :class:`Apps`: one
:class:`AppTools` per app label, one :class:`ToolMethod` per tool. The names come from
``broker.codegen``'s own planner (:func:`broker.codegen._model.build_plan` with the Python
rules), fed with the same values, so ``tb.apps.WatchTower.click_element`` is the method the
generated ``Apps(client).WatchTower.click_element`` has. The app label and the tool's name
are read from the agent-facing name ``<label>__<tool>``, or, where the daemon had to sanitize
or shorten that name (over 64 characters), from the entry's ``_meta`` (``toolbridge/app``,
``toolbridge/tool``), so the method names match ``toolbridge codegen``'s in every case.

The namespace is a snapshot: the client builds a new one whenever it re-lists the tools.
Unknown attributes raise ``AttributeError`` naming what exists.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from app_client.protocol import ToolSpec

from ..codegen._model import CodegenTool, build_plan
from ..codegen._python import PYTHON_RULES
from ..core.names import APP_LABEL_KEY, SEPARATOR, TOOL_NAME_KEY

__all__ = ["Apps", "AppTools", "ToolMethod", "build_namespace"]

Caller = Callable[[str, dict[str, Any]], Awaitable[Any]]


class ToolMethod:
    """One tool, callable as ``await method(x=1)`` or ``await method({"x": 1})``."""

    def __init__(self, caller: Caller, name: str, method: str, description: str | None, schema: dict[str, Any]) -> None:
        self._caller = caller
        #: The agent-facing name it calls.
        self.name = name
        self.__name__ = method
        self.__doc__ = description
        self.input_schema = schema

    async def __call__(self, arguments: Mapping[str, Any] | None = None, /, **kwargs: Any) -> Any:
        """Call the tool; returns what :meth:`broker.agent.Toolbridge.call` returns."""
        payload = dict(arguments or {})
        payload.update(kwargs)
        return await self._caller(self.name, payload)

    def __repr__(self) -> str:
        return f"<tool {self.name} as {self.__name__}()>"


class AppTools:
    """The tools of one app instance (one label), as methods."""

    def __init__(self, label: str, methods: dict[str, ToolMethod]) -> None:
        self._label = label
        self._methods = methods

    def __getattr__(self, name: str) -> ToolMethod:
        try:
            return self.__dict__["_methods"][name]  # type: ignore[no-any-return]
        except KeyError:
            raise AttributeError(
                f"the app {self.__dict__.get('_label')!r} has no tool method {name!r}; it has: "
                + (", ".join(sorted(self.__dict__.get("_methods", {}))) or "none")
                + " (await tb.refresh() if the app changed its tools)"
            ) from None

    def __dir__(self) -> list[str]:
        return sorted(self._methods)

    def __iter__(self) -> Iterator[ToolMethod]:
        return iter(self._methods[name] for name in sorted(self._methods))

    def __repr__(self) -> str:
        return f"<app {self._label}: {', '.join(sorted(self._methods))}>"


class Apps:
    """One attribute per connected app label (``tb.apps.WatchTower``), like the generated ``Apps``."""

    def __init__(self, apps: dict[str, AppTools]) -> None:
        self._apps = apps

    def __getattr__(self, name: str) -> AppTools:
        try:
            return self.__dict__["_apps"][name]  # type: ignore[no-any-return]
        except KeyError:
            raise AttributeError(
                f"no connected app is called {name!r}; connected: "
                + (", ".join(sorted(self.__dict__.get("_apps", {}))) or "none")
                + " (await tb.refresh() if an app has just started)"
            ) from None

    def __getitem__(self, name: str) -> AppTools:
        return self._apps[name]

    def __contains__(self, name: object) -> bool:
        return name in self._apps

    def __dir__(self) -> list[str]:
        return sorted(self._apps)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._apps))

    def __len__(self) -> int:
        return len(self._apps)

    def __repr__(self) -> str:
        return f"<apps: {', '.join(sorted(self._apps)) or 'none'}>"


def _split(tool: Any) -> tuple[str, str]:
    """The app label and the tool's own name: from the entry's ``_meta`` when the daemon had to
    sanitize or shorten the agent-facing name, else from ``<label>__<tool>``."""
    meta = getattr(tool, "meta", None)
    if isinstance(meta, dict):
        label, name = meta.get(APP_LABEL_KEY), meta.get(TOOL_NAME_KEY)
        if isinstance(label, str) and isinstance(name, str) and label and name:
            return label, name
    label, sep, name = tool.name.partition(SEPARATOR)
    return (label, name) if sep and name else (tool.name, tool.name)


def build_namespace(tools: Iterable[Any], caller: Caller) -> Apps:
    """:class:`Apps` for MCP ``Tool`` objects (``.name``, ``.description``, ``.input_schema``...)."""
    listed: Sequence[Any] = [t for t in tools if SEPARATOR in t.name]  # meta-tools are not app tools
    by_name = {t.name: t for t in listed}
    codegen_tools = []
    for tool in listed:
        label, tool_name = _split(tool)
        spec = ToolSpec(
            name=tool_name,
            description=tool.description or "",
            input_schema=tool.input_schema if isinstance(tool.input_schema, dict) else {"type": "object"},
            title=tool.title,
            output_schema=tool.output_schema if isinstance(tool.output_schema, dict) else None,
        )
        codegen_tools.append(CodegenTool(tool.name, label, tool_name, spec))
    apps: dict[str, AppTools] = {}
    for app in build_plan(codegen_tools, PYTHON_RULES).apps:
        methods: dict[str, ToolMethod] = {}
        for plan in app.tools:
            tool = by_name[plan.tool.agent_name]
            doc = "\n\n".join(p for p in (tool.title, tool.description) if p) or None
            methods[plan.method] = ToolMethod(caller, tool.name, plan.method, doc, plan.tool.spec.input_schema)
        apps[app.attr] = AppTools(app.label, methods)
    return Apps(apps)
