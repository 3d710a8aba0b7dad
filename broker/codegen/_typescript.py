"""TypeScript declarations: an interface per object type and per app, a method per tool.

Theory of operation
-------------------
The output is a ``.d.ts`` module that passes ``tsc --noEmit --strict``: a ``ToolCaller``
interface, one interface per object type (optional properties marked ``?``; a property name
that is not a plain identifier, or is a reserved word such as ``class``, ``constructor`` or
``__proto__``, is written as a quoted string), one ``<App>Tools`` interface per app with one
method signature per tool (camelCase, reserved words get a trailing ``_``), ``Apps`` with one
property per app, and ``ToolArguments`` mapping every agent-facing name to its argument type
(for a generic ``call<K extends keyof ToolArguments>(name: K, args: ToolArguments[K])``).

Strings and property names are written with ``json.dumps`` (a valid JavaScript string
literal); comments are cleaned and ``*/`` is escaped, so no text from an app can leave a
comment.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Final

import attrs

from ._model import AppPlan, CodegenTool, LanguageRules, Plan, ToolPlan, build_plan
from ._names import TS_RESERVED, camel_case, clean_text
from ._schema import Arr, Lit, Map, ObjectDef, Prim, Ref, TypeExpr, Union_

__all__ = ["generate_typescript", "typescript_bindings", "ToolBinding", "TYPESCRIPT_RULES"]

_IDENT = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
#: Global names the file uses, or that a declaration would confusingly shadow.
_GLOBAL_TYPES: Final = frozenset(
    """
    Array Promise Record Object String Number Boolean Symbol BigInt Function Date Error Map Set
    WeakMap WeakSet JSON Math RegExp Partial Required Readonly Pick Omit Exclude Extract
    NonNullable ReturnType Parameters Awaited Uppercase Lowercase Capitalize Uncapitalize
    ToolCaller Apps ToolArguments ToolResults
    """.split()
)


def _attr_name(label: str) -> str:
    return label or "app"


TYPESCRIPT_RULES: Final = LanguageRules(
    reserved_types=_GLOBAL_TYPES | TS_RESERVED,
    keywords=TS_RESERVED,
    method_name=camel_case,
    reserved_methods=frozenset(),
    attr_name=_attr_name,
)

#: Members every object inherits in TypeScript's ``Object`` interface: an optional property of
#: that name would reject every object literal that leaves it out (it "has" a Function there).
_OBJECT_MEMBERS: Final = frozenset(
    {"constructor", "toString", "toLocaleString", "valueOf", "hasOwnProperty", "isPrototypeOf", "propertyIsEnumerable"}
)

_PRIM: Final = {"string": "string", "number": "number", "integer": "number", "boolean": "boolean", "null": "null"}


def _string(text: str) -> str:
    return json.dumps(text, ensure_ascii=True)


def _key(key: str) -> str:
    return key if _IDENT.match(key) and key not in TS_RESERVED else _string(key)


def _literal(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, int):
        return str(value) if abs(value) <= 2**53 else "number"  # beyond that, not exact in JavaScript
    if isinstance(value, float) and math.isfinite(value):
        return json.dumps(value)
    return "number"


def _comment_text(text: str) -> str:
    return clean_text(text).replace("*/", "*\\/")


def render_type(expr: TypeExpr, notes: list[str]) -> str:
    """The TypeScript type for ``expr``; reasons for ``unknown`` are appended to ``notes``."""
    if isinstance(expr, Prim):
        return _PRIM[expr.kind]
    if isinstance(expr, Lit):
        return " | ".join(dict.fromkeys(_literal(v) for v in expr.values))
    if isinstance(expr, Arr):
        return f"Array<{render_type(expr.item, notes)}>"
    if isinstance(expr, Map):
        return f"{{ [key: string]: {render_type(expr.value, notes)} }}"
    if isinstance(expr, Ref):
        return expr.name
    if isinstance(expr, Union_):
        return " | ".join(dict.fromkeys(render_type(option, notes) for option in expr.options))
    if expr.reason:
        notes.append(expr.reason)
    return "unknown"


def _doc(text: str, indent: str) -> list[str]:
    lines = _comment_text(text).split("\n")
    if len(lines) == 1:
        return [f"{indent}/** {lines[0]} */"]
    return [f"{indent}/**", *(f"{indent} * {line}".rstrip() for line in lines), f"{indent} */"]


def _notes_text(notes: list[str]) -> str:
    return ("unknown: " + "; ".join(dict.fromkeys(notes)) + ".") if notes else ""


def _interface(obj: ObjectDef, owner: str | None) -> list[str]:
    parts = [p for p in (obj.doc or owner, "Note: " + "; ".join(obj.notes) + "." if obj.notes else "") if p]
    lines = _doc("\n\n".join(parts), "") if parts else []
    lines.append(f"export interface {obj.name} {{")
    for field in obj.fields:
        notes: list[str] = []
        annotation = render_type(field.type, notes)
        if not field.required and field.key in _OBJECT_MEMBERS and annotation != "unknown":
            notes.append(f"expected {annotation}; typed unknown because every object inherits a {field.key!r}")
            annotation = "unknown"
        field_doc = "\n\n".join(p for p in (field.doc, _notes_text(notes)) if p)
        if field_doc:
            lines += _doc(field_doc, "  ")
        optional = "" if field.required else "?"
        lines.append(f"  {_key(field.key)}{optional}: {annotation};")
    lines.append("}")
    return lines


def _owner(plan: ToolPlan, object_name: str) -> str | None:
    if isinstance(plan.args, Ref) and plan.args.name == object_name:
        return f"Arguments of {plan.tool.agent_name}."
    if isinstance(plan.result, Ref) and plan.result.name == object_name:
        return f"Result of {plan.tool.agent_name}."
    return None


def _args_type(plan: ToolPlan, objects: dict[str, ObjectDef], notes: list[str]) -> tuple[str, bool]:
    """The type of a method's ``args`` parameter and whether it may be left out."""
    args = plan.args
    target = objects.get(args.name) if isinstance(args, Ref) else None
    if target is not None and target.fields:
        return target.name, not any(f.required for f in target.fields)
    if isinstance(args, Map):
        return render_type(args, notes), True
    render_type(args, notes)
    return "{ [key: string]: unknown }", True


def _app_interface(app: AppPlan, objects: dict[str, ObjectDef]) -> list[str]:
    lines = _doc(f"Tools of the app {app.label}.", "")
    lines.append(f"export interface {app.class_name} {{")
    for plan in app.tools:
        notes: list[str] = []
        args, optional = _args_type(plan, objects, notes)
        result = render_type(plan.result, notes) if plan.result is not None else "unknown"
        tool = plan.tool
        doc_parts = [p for p in (tool.spec.title, tool.spec.description) if p]
        doc_parts.append(f"Calls `{tool.agent_name}`.")
        if notes:
            doc_parts.append(_notes_text(notes))
        lines += _doc("\n\n".join(doc_parts), "  ")
        lines.append(f"  {plan.method}(args{'?' if optional else ''}: {args}): Promise<{result}>;")
    lines.append("}")
    return lines


def generate_typescript(tools: Sequence[CodegenTool], *, source: str = "toolbridge codegen --lang typescript") -> str:
    """A ``.d.ts`` module with typed declarations for ``tools`` (see the module docstring)."""
    plan: Plan = build_plan(tools, TYPESCRIPT_RULES)
    objects = plan.object_map()
    app_list = ", ".join(app.label for app in plan.apps) or "none"
    out = _doc(
        f"Typed declarations for {len(tools)} toolbridge tools (apps: {app_list}).\n\n"
        f"Generated by `{' '.join(clean_text(source, 300).split())}`; do not edit.",
        "",
    )
    out += [
        "",
        "/** Runs a tool by its agent-facing name and resolves to its result. */",
        "export interface ToolCaller {",
        "  call(name: string, args: { [key: string]: unknown }): Promise<unknown>;",
        "}",
    ]
    for app in plan.apps:
        out += ["", f"// --- {app.label} " + "-" * max(3, 80 - len(app.label) - 8)]
        for tool_plan in app.tools:
            for object_name in tool_plan.objects:
                out.append("")
                out += _interface(objects[object_name], _owner(tool_plan, object_name))
        out.append("")
        out += _app_interface(app, objects)
    out += ["", "/** One property per connected app. */", "export interface Apps {"]
    out += [f"  {_key(app.attr)}: {app.class_name};" for app in plan.apps]
    out += ["}", "", "/** The argument type of every tool, by agent-facing name. */", "export interface ToolArguments {"]
    for app in plan.apps:
        for tool_plan in app.tools:
            notes: list[str] = []
            args, _ = _args_type(tool_plan, objects, notes)
            out.append(f"  {_string(tool_plan.tool.agent_name)}: {args};")
    out.append("}")
    return "\n".join(out) + "\n"


@attrs.frozen
class ToolBinding:
    """How code mode exposes one tool: ``apps[app_attr][method](args)``, and its declaration."""

    agent_name: str
    app_attr: str
    method: str
    #: The tool's object types and its method signature, as ``apps.<App>.<method>(...)``.
    signature: str


def typescript_bindings(tools: Sequence[CodegenTool]) -> dict[str, ToolBinding]:
    """Per agent-facing name: the ``apps.<App>.<method>`` path and a TypeScript declaration.

    Names come from the same plan as :func:`generate_typescript`, so a program written against
    ``toolbridge codegen --lang typescript`` output calls the same methods (code mode).
    """
    plan: Plan = build_plan(tools, TYPESCRIPT_RULES)
    objects = plan.object_map()
    bindings: dict[str, ToolBinding] = {}
    for app in plan.apps:
        path = f"apps.{app.attr}" if _IDENT.match(app.attr) else f"apps[{_string(app.attr)}]"
        for tool_plan in app.tools:
            lines: list[str] = []
            for object_name in tool_plan.objects:
                lines += _interface(objects[object_name], _owner(tool_plan, object_name))
            notes: list[str] = []
            args, optional = _args_type(tool_plan, objects, notes)
            result = render_type(tool_plan.result, notes) if tool_plan.result is not None else "unknown"
            spec = tool_plan.tool.spec
            doc = [p for p in (spec.title, spec.description, _notes_text(notes)) if p]
            if doc:
                lines += _doc("\n\n".join(doc), "")
            lines.append(f"{path}.{tool_plan.method}(args{'?' if optional else ''}: {args}): Promise<{result}>;")
            name = tool_plan.tool.agent_name
            bindings[name] = ToolBinding(name, app.attr, tool_plan.method, "\n".join(lines))
    return bindings
