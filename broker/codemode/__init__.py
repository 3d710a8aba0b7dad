"""Code mode's sandbox: agent programs run in Deno with no permissions (issue 20).

``run_program`` runs one program (``sandbox``); ``bridge`` is the sans-IO NDJSON bridge
between the daemon and the sandbox; ``prelude`` is the JavaScript the sandbox runs first.
The MCP face (the ``run_code`` and ``search_tools`` tools) is ``broker.mcp.code``. This
package may import ``broker.core`` (outcomes) and ``app_client``; never ``broker.mcp``,
``broker.daemon`` or ``broker.cli``.
"""

from .bridge import BridgeReader, BridgeViolation
from .sandbox import CallRecord, Limits, RunReport, SandboxUnavailable, deno_argv, find_deno, run_program

__all__ = [
    "BridgeReader", "BridgeViolation", "CallRecord", "Limits", "RunReport", "SandboxUnavailable",
    "deno_argv", "find_deno", "run_program",
]
