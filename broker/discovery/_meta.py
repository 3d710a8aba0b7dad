"""The meta-tools an agent sees in discovery mode, and the JSON of a search answer.

Theory of operation
-------------------
In discovery mode ``tools/list`` holds only :func:`meta_tools`: ``search_tools`` (free text
in, the best tools out with name, app, description and inputSchema, see
:func:`search_result`) and ``call_tool`` (a tool's name and arguments, run through the same
pipeline as a direct call). App tools are always ``<label>__<tool>``, so these
single-underscore names cannot collide with them. The MCP front door owns the dispatch; this
module only defines the shapes, so both modes describe them in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from ._index import DEFAULT_LIMIT, MAX_LIMIT, SearchHit

__all__ = ["SEARCH_TOOLS", "CALL_TOOL", "meta_tools", "search_result"]

SEARCH_TOOLS: Final = "search_tools"
CALL_TOOL: Final = "call_tool"


def search_result(hits: Sequence[SearchHit]) -> dict[str, Any]:
    """The ``structuredContent`` of a ``search_tools`` answer: ``{"tools": [...]}``."""
    return {"tools": [hit.to_json() for hit in hits]}


_TOOL_OBJECT: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "app": {"type": "string"},
        "title": {"type": "string"},
        "description": {"type": "string"},
        "inputSchema": {"type": "object"},
    },
    "required": ["name", "app", "description", "inputSchema"],
}


def meta_tools() -> list[dict[str, Any]]:
    """The ``tools/list`` entries of discovery mode (MCP tool objects, fresh on each call)."""
    return [
        {
            "name": SEARCH_TOOLS,
            "title": "Search tools",
            "description": (
                "Find tools of the desktop apps connected to toolbridge. Describe the task in a "
                "few words; returns the best matching tools with their name, app, description "
                f"and inputSchema. Then run one with {CALL_TOOL}."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What you want to do, in plain words."},
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_LIMIT,
                        "default": DEFAULT_LIMIT,
                        "description": "How many tools to return.",
                    },
                },
                "required": ["query"],
            },
            "outputSchema": {
                "type": "object",
                "properties": {"tools": {"type": "array", "items": _TOOL_OBJECT}},
                "required": ["tools"],
            },
            "annotations": {"readOnlyHint": True, "openWorldHint": False},
        },
        {
            "name": CALL_TOOL,
            "title": "Call a tool",
            "description": (
                f"Run a tool found with {SEARCH_TOOLS}: give its exact name and arguments "
                "matching its inputSchema."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": f"The tool's name from {SEARCH_TOOLS}."},
                    "arguments": {"type": "object", "description": "The tool's arguments."},
                },
                "required": ["name"],
            },
        },
    ]
