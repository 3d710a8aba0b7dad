"""Python bindings: TypedDicts for arguments and results, one class per app, async methods.

Theory of operation
-------------------
The generated module needs only the standard library (Python 3.11+) and type-checks with
``mypy --strict`` on its own. It defines a ``ToolCaller`` protocol (anything with
``async def call(name, arguments)``, such as the agent library's client), one ``TypedDict``
per object type, one class per app whose async methods call
``await self._client.call("<agent-facing name>", arguments)``, and ``Apps`` with one
attribute per app::

    apps = Apps(client)
    await apps.WatchTower.click_element(x=100, y=50)

A method takes keyword arguments (``**arguments: Unpack[XArgs]``) when every property name
is a plain identifier; otherwise (``class``, ``x-y``, ``__proto__``...) it takes the
arguments dict as one positional parameter, typed by a TypedDict in the functional syntax,
whose keys are the wire keys exactly. Tools with an ``outputSchema`` return their result
type; others return ``Any``.

The module does not use ``from __future__ import annotations``, so ``__required_keys__`` and
``typing.get_type_hints`` are right at run time; a field that names an object type is written
as a string (the type may be defined further down, or be the class itself).

All generated text comes from :mod:`._names` (identifiers), ``repr`` (string literals) or
escaped docstrings and comments; nothing is evaluated, here or in the generated module.
"""

from __future__ import annotations

import keyword
from collections.abc import Sequence
from typing import Final

from ._model import AppPlan, CodegenTool, LanguageRules, Plan, ToolPlan, build_plan
from ._names import clean_text, snake_case
from ._schema import Arr, Lit, Map, ObjectDef, Prim, Ref, TypeExpr, Union_

__all__ = ["generate_python", "PYTHON_RULES"]

_TYPING_NAMES: Final = ("Any", "Literal", "NotRequired", "Protocol", "Required", "TypedDict", "Unpack")
_BUILTINS_USED: Final = frozenset({"str", "int", "float", "bool", "list", "dict", "object", "type", "None"})
_HARD_KEYWORDS: Final = frozenset(keyword.kwlist)


def _attr_name(label: str) -> str:
    name = "".join(c if (c.isascii() and (c.isalnum() or c == "_")) else "_" for c in label).strip("_")
    if not name:
        return "app"
    return name if name[0].isalpha() else "app_" + name


PYTHON_RULES: Final = LanguageRules(
    reserved_types=frozenset({*_TYPING_NAMES, "ToolCaller", "Apps", "annotations"}) | _BUILTINS_USED,
    keywords=_HARD_KEYWORDS,
    method_name=snake_case,
    reserved_methods=_BUILTINS_USED,
    attr_name=_attr_name,
)

_PRIM: Final = {"string": "str", "number": "float", "integer": "int", "boolean": "bool", "null": "None"}


def _huge(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63


def _literal(value: object) -> str:
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, (int, str)):
        return repr(value)
    raise AssertionError(value)  # pragma: no cover - floats are widened before


def render_type(expr: TypeExpr, notes: list[str]) -> str:
    """The Python annotation for ``expr``; reasons for ``Any`` are appended to ``notes``."""
    if isinstance(expr, Prim):
        return _PRIM[expr.kind]
    if isinstance(expr, Lit):
        exact = [v for v in expr.values if not isinstance(v, float) and not _huge(v)]
        parts = [f"Literal[{', '.join(_literal(v) for v in exact)}]"] if exact else []
        if any(isinstance(v, float) for v in expr.values):
            parts.append("float")  # Literal cannot hold floats
        if any(_huge(v) for v in expr.values):
            parts.append("int")  # nor integers beyond 64 bits (for mypy)
        return " | ".join(parts)
    if isinstance(expr, Arr):
        return f"list[{render_type(expr.item, notes)}]"
    if isinstance(expr, Map):
        return f"dict[str, {render_type(expr.value, notes)}]"
    if isinstance(expr, Ref):
        return expr.name
    if isinstance(expr, Union_):
        rendered = [render_type(option, notes) for option in expr.options]
        return " | ".join(dict.fromkeys(rendered))
    if expr.reason:
        notes.append(expr.reason)
    return "Any"


def _one_line(text: str) -> str:
    return " ".join(clean_text(text, 300).split())


def _docstring(text: str, indent: str) -> list[str]:
    body = clean_text(text).replace("\\", "\\\\").replace('"', '\\"')
    lines = body.split("\n")
    if len(lines) == 1:
        return [f'{indent}"""{lines[0]}"""']
    return [f'{indent}"""{lines[0]}', *(f"{indent}{line}" if line else "" for line in lines[1:]), f'{indent}"""']


def _comment(text: str, indent: str) -> list[str]:
    return [f"{indent}# {line}".rstrip() for line in clean_text(text).split("\n")]


def _is_plain_key(key: str, module_names: frozenset[str]) -> bool:
    """A key usable as a class-syntax TypedDict field and as a keyword argument."""
    return (
        key.isascii()
        and key.isidentifier()
        and not keyword.iskeyword(key)
        and not key.startswith("__")
        and key not in module_names
        and key not in _TYPING_NAMES
        and key not in _BUILTINS_USED
        and key != "self"
    )


def _object_doc(obj: ObjectDef, owner: str | None) -> str:
    parts = [obj.doc] if obj.doc else []
    if owner and not parts:
        parts.append(owner)
    if obj.notes:
        parts.append("Note: " + "; ".join(obj.notes) + ".")
    return "\n\n".join(parts)


def _typeddict(obj: ObjectDef, owner: str | None, module_names: frozenset[str]) -> list[str]:
    all_required = all(f.required for f in obj.fields)
    total = "" if all_required else ", total=False"
    doc = _object_doc(obj, owner)
    if all(_is_plain_key(f.key, module_names) for f in obj.fields):
        lines = [f"class {obj.name}(TypedDict{total}):"]
        if doc:
            lines += _docstring(doc, "    ")
            lines.append("")
        if not obj.fields:
            lines.append("    pass")
        for field in obj.fields:
            notes: list[str] = []
            annotation = render_type(field.type, notes)
            if _has_ref(field.type):
                annotation = repr(annotation)  # may name a type defined further down
            if field.required and not all_required:
                annotation = f"Required[{annotation}]"
            lines.append(f"    {field.key}: {annotation}")
            field_doc = "\n\n".join(p for p in (field.doc, _notes_text(notes)) if p)
            if field_doc:
                lines += _docstring(field_doc, "    ")
        return lines
    # Functional syntax: any key is allowed, and it is the wire key exactly.
    lines = _comment(doc, "") if doc else []
    lines.append(f"{obj.name} = TypedDict(")
    lines.append(f"    {obj.name!r},")
    lines.append("    {")
    for field in obj.fields:
        notes = []
        annotation = render_type(field.type, notes)
        field_doc = "\n\n".join(p for p in (field.doc, _notes_text(notes)) if p)
        if field_doc:
            lines += _comment(field_doc, "        ")
        quoted = repr(annotation)
        value = f"Required[{quoted}]" if field.required and not all_required else quoted
        lines.append(f"        {field.key!r}: {value},")
    lines.append("    },")
    if not all_required:
        lines.append("    total=False,")
    lines.append(")")
    return lines


def _has_ref(expr: TypeExpr) -> bool:
    if isinstance(expr, Ref):
        return True
    if isinstance(expr, Arr):
        return _has_ref(expr.item)
    if isinstance(expr, Map):
        return _has_ref(expr.value)
    if isinstance(expr, Union_):
        return any(_has_ref(option) for option in expr.options)
    return False


def _notes_text(notes: list[str]) -> str:
    return ("Any: " + "; ".join(dict.fromkeys(notes)) + ".") if notes else ""


def _owner(plan: ToolPlan, object_name: str) -> str | None:
    """Fallback docstring of a tool's own argument or result type."""
    if isinstance(plan.args, Ref) and plan.args.name == object_name:
        return f"Arguments of {_one_line(plan.tool.agent_name)}."
    if isinstance(plan.result, Ref) and plan.result.name == object_name:
        return f"Result of {_one_line(plan.tool.agent_name)}."
    return None


def _method(plan: ToolPlan, objects: dict[str, ObjectDef], module_names: frozenset[str]) -> list[str]:
    tool = plan.tool
    name = repr(tool.agent_name)
    notes: list[str] = []
    args = plan.args
    target = objects.get(args.name) if isinstance(args, Ref) else None
    if target is not None and target.fields and all(_is_plain_key(f.key, module_names) for f in target.fields):
        params = f"self, /, **arguments: Unpack[{target.name}]"
        payload = "dict(arguments)"
    elif target is not None and target.fields:
        if any(f.required for f in target.fields):
            params = f"self, arguments: {target.name}, /"
            payload = "dict(arguments)"
        else:
            params = f"self, arguments: {target.name} | None = None, /"
            payload = "{} if arguments is None else dict(arguments)"
    else:
        value = render_type(args.value, notes) if isinstance(args, Map) else "Any"
        if not isinstance(args, Map):
            render_type(args, notes)
        params = f"self, arguments: dict[str, {value}] | None = None, /"
        payload = "{} if arguments is None else dict(arguments)"
    result_notes: list[str] = []
    result = render_type(plan.result, result_notes) if plan.result is not None else "Any"
    lines = [f"    async def {plan.method}({params}) -> {result}:"]
    doc_parts = [p for p in (tool.spec.title, tool.spec.description) if p]
    doc_parts.append(f"Calls ``{_one_line(tool.agent_name)}``.")
    if notes or result_notes:
        doc_parts.append(_notes_text(notes + result_notes))
    lines += _docstring("\n\n".join(doc_parts), "        ")
    if result == "Any":
        lines.append(f"        return await self._client.call({name}, {payload})")
    else:
        lines.append(f"        result: {result} = await self._client.call({name}, {payload})")
        lines.append("        return result")
    return lines


def _app_class(app: AppPlan, objects: dict[str, ObjectDef], module_names: frozenset[str]) -> list[str]:
    lines = [f"class {app.class_name}:"]
    lines += _docstring(f"Tools of the app {app.label}.", "    ")
    lines += [
        "",
        "    def __init__(self, client: ToolCaller) -> None:",
        "        self._client = client",
    ]
    for plan in app.tools:
        lines.append("")
        lines += _method(plan, objects, module_names)
    return lines


def generate_python(tools: Sequence[CodegenTool], *, source: str = "toolbridge codegen --lang python") -> str:
    """A Python module with typed bindings for ``tools`` (see the module docstring)."""
    plan: Plan = build_plan(tools, PYTHON_RULES)
    objects = plan.object_map()
    names = plan.module_names
    app_list = ", ".join(app.label for app in plan.apps) or "none"
    out: list[str] = []
    out += _docstring(
        f"Typed bindings for {len(tools)} toolbridge tools (apps: {app_list}).\n\n"
        f"Generated by `{_one_line(source)}`; do not edit. Use with any object that has\n"
        "``async def call(name, arguments)``::\n\n"
        "    apps = Apps(client)\n"
        "    result = await apps.<App>.<tool>(...)",
        "",
    )
    out.append("")
    out.append(f"from typing import {', '.join(_TYPING_NAMES)}")
    out.append("")
    exported = ["ToolCaller", "Apps", *(app.class_name for app in plan.apps), *(o.name for o in plan.objects)]
    out.append("__all__ = [")
    out += [f"    {name!r}," for name in exported]
    out += ["]", "", ""]
    out += [
        "class ToolCaller(Protocol):",
        '    """Runs a tool by its agent-facing name and returns its result."""',
        "",
        "    async def call(self, name: str, arguments: dict[str, Any]) -> Any: ...",
    ]
    for app in plan.apps:
        out += ["", "", f"# --- {app.label} " + "-" * max(3, 80 - len(app.label) - 7)]
        for tool_plan in app.tools:
            for object_name in tool_plan.objects:
                owner = _owner(tool_plan, object_name)
                out += ["", ""]
                out += _typeddict(objects[object_name], owner, names)
        out += ["", ""]
        out += _app_class(app, objects, names)
    out += ["", "", "class Apps:", '    """One attribute per connected app."""', ""]
    for app in plan.apps:
        out.append(f"    {app.attr}: {app.class_name}")
    if plan.apps:
        out.append("")
    out.append("    def __init__(self, client: ToolCaller) -> None:")
    for app in plan.apps:
        out.append(f"        self.{app.attr} = {app.class_name}(client)")
    if not plan.apps:
        out.append("        self._client = client")
    return "\n".join(out) + "\n"
