"""The meta-tools an agent sees in discovery mode, and the JSON of a search answer.

Theory of operation
-------------------
In discovery mode ``tools/list`` holds only :func:`meta_tools`: ``search_tools`` (free text
in, the best tools out with name, app, description, inputSchema and how confident the match
is, see :func:`search_result`) and ``call_tool`` (a tool's name and arguments, run through the same
pipeline as a direct call). App tools are always ``<label>__<tool>``, so these
single-underscore names cannot collide with them. The MCP front door owns the dispatch; this
module only defines the shapes, so both modes describe them in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from ._index import CONFIDENCE_LEVELS, DEFAULT_LIMIT, MATCH_KINDS, MAX_LIMIT, SearchHit

__all__ = ["SEARCH_TOOLS", "CALL_TOOL", "meta_tools", "search_result"]

SEARCH_TOOLS: Final = "search_tools"
CALL_TOOL: Final = "call_tool"


def search_result(hits: Sequence[SearchHit], match: str | None = None,
                  no_clear_fit: bool | None = None) -> dict[str, Any]:
    """The ``structuredContent`` of a ``search_tools`` answer: ``{"tools": [...]}``, and
    ``"match"`` (one of :data:`~._index.MATCH_KINDS`: how the best tools were found) and
    ``"noClearFit"`` (true: no tool clearly fits the query, see ``_calibration``) when given.

    Each tool carries ``"confidence"`` (``high``, ``medium``, ``low``) when it was rated. These
    fields were added later: a client that ignores unknown fields reads the answer as before.
    """
    out: dict[str, Any] = {"tools": [hit.to_json() for hit in hits]}
    if match is not None:
        out["match"] = match
    if no_clear_fit is not None:
        out["noClearFit"] = no_clear_fit
    return out


_TOOL_OBJECT: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "app": {"type": "string"},
        "title": {"type": "string"},
        "description": {"type": "string"},
        "inputSchema": {"type": "object"},
        "confidence": {"type": "string", "enum": list(CONFIDENCE_LEVELS)},
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
                "few words; returns the best matching tools with their name, app, description, "
                "inputSchema and confidence (high, medium, low: how likely this tool is the right "
                "one; before running a medium or low one, check that its description does what "
                "was asked). noClearFit true means no connected app's tool clearly does this: "
                "read the descriptions and rephrase once at most. If no tool's description does "
                "it, tell the user that no connected app offers it rather than running the "
                f"nearest. Then run a tool with {CALL_TOOL}."
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
                "properties": {
                    "tools": {"type": "array", "items": _TOOL_OBJECT},
                    "match": {"type": "string", "enum": list(MATCH_KINDS)},
                    "noClearFit": {
                        "type": "boolean",
                        "description": "True when no tool clearly fits the query (calibrated; the "
                                       "tools listed are then only the nearest).",
                    },
                },
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
