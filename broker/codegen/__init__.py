"""Typed bindings for agent code, generated from the tools in the registry.

``generate_python(tools)`` writes a module of ``TypedDict``s and async methods grouped per
app (checked with ``mypy --strict``); ``generate_typescript(tools)`` writes a ``.d.ts`` of
interfaces and method signatures (checked with ``tsc --noEmit --strict``). Both take
:class:`CodegenTool` values, e.g. from :func:`tools_from_admin` on the daemon's ``tools``
admin answer (``toolbridge codegen``), or :func:`tools_from_registry` inside the daemon.

Codegen only writes source text: nothing is evaluated or executed, here or when the
generated code is imported (it defines types and methods, and calls nothing).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from ._model import CodegenTool, tools_from_admin
from ._python import generate_python
from ._typescript import ToolBinding, generate_typescript, typescript_bindings

__all__ = [
    "CodegenTool",
    "LANGUAGES",
    "generate",
    "generate_python",
    "generate_typescript",
    "tools_from_admin",
    "tools_from_registry",
    "typescript_bindings",
    "ToolBinding",
]

LANGUAGES: Final = ("python", "typescript")


def generate(lang: str, tools: Sequence[CodegenTool], *, source: str | None = None) -> str:
    """Source text for ``lang`` (``"python"`` or ``"typescript"``); ValueError for another."""
    if lang == "python":
        return generate_python(tools, source=source or "toolbridge codegen --lang python")
    if lang == "typescript":
        return generate_typescript(tools, source=source or "toolbridge codegen --lang typescript")
    raise ValueError(f"unknown language {lang!r}: use one of {', '.join(LANGUAGES)}")


def tools_from_registry(registered: Iterable[Any]) -> list[CodegenTool]:
    """Tools from ``RegisteredTool`` objects (``core.router.list_tools()``)."""
    return [
        CodegenTool(t.agent_name, t.instance.label, t.name, t.spec, t.instance.app_name) for t in registered
    ]
