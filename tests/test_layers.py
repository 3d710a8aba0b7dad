"""The package layers the package docstrings state: checked on the source, imports inside
functions and under ``TYPE_CHECKING`` included (they are edges of the design all the same)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _imports(path: Path, package: str) -> list[tuple[int, str]]:
    """Every module ``path`` imports (absolute dotted names), with its line."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.append((node.lineno, name))
            # ``from .. import daemon`` names a module too.
            found.extend((node.lineno, f"{name}.{alias.name}") for alias in node.names)
    return found


def _offenders(source: str, forbidden: str) -> list[str]:
    offenders = []
    for path in sorted((ROOT / source.replace(".", "/")).rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        # The package a relative import starts from: the module's own for an __init__.
        package = module.removesuffix(".__init__") if path.name == "__init__.py" else module.rpartition(".")[0]
        for line, name in _imports(path, package):
            if name == forbidden or name.startswith(forbidden + "."):
                offenders.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    return offenders


@pytest.mark.parametrize(
    ("source", "forbidden"),
    [
        ("broker.mcp", "broker.daemon"),  # the MCP front door gets the core's parts, not the core
        ("broker.mcp", "broker.cli"),
        ("broker.daemon", "broker.cli"),
        ("broker.core", "broker.daemon"),
        ("broker.core", "broker.mcp"),
        ("broker.daemon", "broker.conformance"),  # the kit is a client program (a scripted broker)
        ("broker.mcp", "broker.conformance"),
        ("app_client", "broker"),  # apps install only app_client
    ],
)
def test_a_lower_layer_never_imports_a_higher_one(source: str, forbidden: str) -> None:
    assert _offenders(source, forbidden) == []
