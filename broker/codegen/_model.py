"""What codegen works from: the tools, and a language-neutral plan of the file to write.

Theory of operation
-------------------
:class:`CodegenTool` is one tool as the registry knows it (agent-facing name, app label,
registered name, spec); :func:`tools_from_admin` reads them from the daemon's ``tools`` admin
answer and tolerates missing or mistyped fields. :func:`build_plan` sorts the tools (by app
label, then agent-facing name), gives every app, tool and object type a unique identifier
under the target language's rules (:class:`LanguageRules`) and converts every schema, so the
emitters only render.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from app_client.protocol import ToolSpec

from ._names import NameAllocator, pascal_case
from ._schema import ObjectDef, SchemaConverter, TypeExpr

__all__ = ["CodegenTool", "tools_from_admin", "LanguageRules", "ToolPlan", "AppPlan", "Plan", "build_plan"]


@attrs.frozen
class CodegenTool:
    agent_name: str
    app_label: str
    tool_name: str
    spec: ToolSpec
    #: The app's own name (labels add ``_2`` for a second instance); informational.
    app_name: str | None = None


def _str(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) else default


def tools_from_admin(rows: Iterable[Any]) -> list[CodegenTool]:
    """Tools from the ``tools`` admin command's result; malformed rows are skipped."""
    tools: list[CodegenTool] = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        agent_name = _str(row.get("name"))
        if not agent_name:
            continue
        label = _str(row.get("label")) or agent_name.partition("__")[0]
        tool_name = _str(row.get("tool")) or agent_name.partition("__")[2] or agent_name
        input_schema = row.get("inputSchema")
        output_schema = row.get("outputSchema")
        annotations = row.get("annotations")
        title = row.get("title")
        spec = ToolSpec(
            name=tool_name,
            description=_str(row.get("description")),
            input_schema=input_schema if isinstance(input_schema, dict) else {"type": "object"},
            title=title if isinstance(title, str) else None,
            annotations=annotations if isinstance(annotations, dict) else None,
            output_schema=output_schema if isinstance(output_schema, dict) else None,
        )
        tools.append(CodegenTool(agent_name, label, tool_name, spec, _str(row.get("app")) or None))
    return tools


@attrs.frozen
class LanguageRules:
    #: Names the generated file defines or uses itself: never given to a type.
    reserved_types: frozenset[str]
    keywords: frozenset[str]
    #: Tool name -> method name candidate (snake_case or camelCase).
    method_name: Callable[[str], str]
    #: Method names that would shadow something (``str`` in a Python class body).
    reserved_methods: frozenset[str]
    #: App label -> attribute name candidate on ``Apps``.
    attr_name: Callable[[str], str]


@attrs.define
class ToolPlan:
    tool: CodegenTool
    method: str
    args: TypeExpr
    result: TypeExpr | None
    #: Names of the object types made for this tool, in creation order.
    objects: list[str] = attrs.Factory(list)


@attrs.define
class AppPlan:
    label: str
    attr: str
    class_name: str
    tools: list[ToolPlan] = attrs.Factory(list)


@attrs.define
class Plan:
    apps: list[AppPlan]
    objects: list[ObjectDef]
    #: Every module-level name of the file (types, app classes, attributes of ``Apps``).
    module_names: frozenset[str]

    def object_map(self) -> dict[str, ObjectDef]:
        return {o.name: o for o in self.objects}


def build_plan(tools: Sequence[CodegenTool], rules: LanguageRules) -> Plan:
    ordered = sorted(tools, key=lambda t: (t.app_label, t.agent_name))
    labels = list(dict.fromkeys(t.app_label for t in ordered))

    attrs_alloc = NameAllocator(keywords=rules.keywords)
    app_attrs = {label: attrs_alloc.allocate(rules.attr_name(label)) for label in labels}
    # Types must not share a name with an Apps attribute (a class body would shadow it).
    types = NameAllocator(rules.reserved_types | set(app_attrs.values()), rules.keywords)
    apps: dict[str, AppPlan] = {}
    for label in labels:
        apps[label] = AppPlan(label, app_attrs[label], types.allocate(pascal_case(label, "App") + "Tools"))

    objects: list[ObjectDef] = []
    methods: dict[str, NameAllocator] = {
        label: NameAllocator(rules.reserved_methods, rules.keywords) for label in labels
    }
    for tool in ordered:
        app = apps[tool.app_label]
        base = pascal_case(tool.app_label, "App") + pascal_case(tool.tool_name, "Tool")
        first = len(objects)
        args = SchemaConverter(tool.spec.input_schema, types, objects, base).convert_root(base + "Args")
        result = None
        if tool.spec.output_schema is not None:
            result = SchemaConverter(tool.spec.output_schema, types, objects, base).convert_root(base + "Result")
        method = methods[tool.app_label].allocate(rules.method_name(tool.tool_name))
        app.tools.append(ToolPlan(tool, method, args, result, [o.name for o in objects[first:]]))

    module_names = frozenset(o.name for o in objects) | {a.class_name for a in apps.values()} | set(app_attrs.values())
    return Plan(list(apps.values()), objects, module_names)
