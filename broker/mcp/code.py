"""Code mode at the front door: ``search_tools`` with TypeScript signatures, and ``run_code``.

Theory of operation
-------------------
A session in *code mode* (``toolbridge stdio --code``, or HTTP at ``/mcp/code``) lists two tools. ``search_tools`` is
discovery mode's search (``meta``, the same index), with each hit's TypeScript declaration
from ``broker.codegen`` (:func:`~broker.codegen.typescript_bindings`) added, and the text the
agent reads made of those declarations. ``run_code`` runs the agent's program in a Deno
sandbox (``broker.codemode``): ``apps.<App>.<tool>(args)`` there is one call through the
router's pipeline — validation, guards, admission, deadlines, audit, call log — as the agent,
with the caller's session ``<session>/run-<n>``, and ``searchTools(query)`` there is
``search_tools`` (the hits, with their declarations); the ``run_code`` call itself is one call-log
row (tool ``run_code``, session ``<session>``) whose result names that run id, so each inner
row points at its run. Limits come from the settings (``code_*``); the wall time is also
capped by the request's own deadline (``timeoutMs`` argument, ``_meta`` timeout).

Both tools run as tasks of the session (like a semantic search), so ``notifications/cancelled``
cancels them: for ``run_code`` that kills the sandbox and cancels its calls at the apps. The
bindings (names and declarations for every tool) are rebuilt when the registry's version
moves, in a worker thread, at most one build at a time.
"""

from __future__ import annotations

import itertools
import time
import weakref
from typing import TYPE_CHECKING, Any, Final, Protocol

import msgspec
import structlog
import trio

from app_client.wire import ToolResult

from ..codegen import ToolBinding, tools_from_registry, typescript_bindings
from ..codemode import Limits, RunReport, SandboxUnavailable, run_program
from ..core.outcome import CallerInfo, CallOutcome, OutcomeKind
from ..core.validation import compile_schema
from ..discovery import SEARCH_TOOLS, meta_tools
from .results import error_result

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..core.registry import Registry
    from ..core.router import Router
    from .meta import MetaTools


class McpServer(Protocol):
    """What code mode uses of ``server.McpServer`` (structural: this module needs no more of it)."""

    settings: Settings
    router: Router
    registry: Registry
    meta: MetaTools

log = structlog.get_logger("toolbridge.code")

__all__ = ["RUN_CODE", "CODE_TOOL_NAMES", "CODE_INSTRUCTIONS", "CodeMode", "code_mode", "code_tools"]

RUN_CODE: Final = "run_code"
CODE_TOOL_NAMES: Final = frozenset({SEARCH_TOOLS, RUN_CODE})
#: The longest program accepted (characters).
MAX_CODE_CHARS: Final = 256 * 1024
#: The deepest nesting of lists and objects a program's result may have.
MAX_RESULT_DEPTH: Final = 64
#: Tool calls listed one by one in a run's answer; beyond, only counted.
_LISTED_CALLS: Final = 50
CODE_INSTRUCTIONS: Final = (
    "toolbridge connects you to desktop applications running on this computer. Write a short "
    f"TypeScript program and run it with {RUN_CODE}: inside it every tool is an async function "
    "apps.<App>.<tool>(args), so one program can call many tools, loop, filter and combine "
    f"results, and return only what you need. Find tools and their TypeScript signatures with "
    f"{SEARCH_TOOLS} (also inside a program: await searchTools(query, limit?)). A failed call throws ToolError (subclasses ToolTimeout, ToolNotFound, "
    "ToolInvalidArguments, ToolBusy; .kind says which); images come back as ToolImage objects "
    "(return them to see them). The program's `return` value, its console output and the calls "
    "it made come back as the result. No file system, network or environment inside the sandbox."
)

_encoder: Final = msgspec.json.Encoder()


def code_tools() -> list[dict[str, Any]]:
    """The ``tools/list`` entries of code mode (fresh on each call)."""
    search = next(tool for tool in meta_tools() if tool["name"] == SEARCH_TOOLS)
    search["description"] = (
        "Find tools of the desktop apps connected to toolbridge. Describe the task in a few words; "
        "returns the best matching tools with their TypeScript declaration, e.g. "
        "`apps.Notes.typeText(args: NotesTypeTextArgs): Promise<unknown>`, to call from "
        f"{RUN_CODE}."
    )
    search["outputSchema"]["properties"]["tools"]["items"]["properties"]["typescript"] = {"type": "string"}
    run = {
        "name": RUN_CODE,
        "title": "Run a program",
        "description": (
            "Run a TypeScript (or JavaScript) program in a sandbox. The code is the body of an async "
            "function: use await, and `return` the result. Tools are async functions "
            "apps.<App>.<tool>(args) (see search_tools); a failed call throws ToolError. "
            "Returns {ok, result, console, calls}."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "The program (TypeScript or JavaScript)."},
                "timeoutMs": {"type": "integer", "minimum": 1, "description": "Wall-time limit (capped by the daemon's)."},
            },
            "required": ["code"],
        },
        "annotations": {"openWorldHint": False},
    }
    return [search, run]


_validate_run: Final = compile_schema(RUN_CODE, code_tools()[1]["inputSchema"], 1 << 20)


class CodeMode:
    """What code-mode sessions share: the bindings cache and the run counter."""

    def __init__(self, server: McpServer) -> None:
        # Weak: ``_modes`` maps the server to this object, and a value that held its key
        # strongly would keep every server (and its caches) alive for good.
        self._server_ref = weakref.ref(server)
        self._bindings: tuple[int, dict[str, ToolBinding]] | None = None
        self._build_lock = trio.Lock()
        self._runs = itertools.count(1)
        self._limiter = trio.CapacityLimiter(1)
        self._running = 0

    @property
    def _server(self) -> McpServer:
        server = self._server_ref()
        if server is None:  # pragma: no cover - sessions hold their server
            raise RuntimeError("the MCP server is gone")
        return server

    async def bindings(self) -> dict[str, ToolBinding]:
        """Names and declarations of every tool, for the registry's current version."""
        registry = self._server.registry
        async with self._build_lock:
            cached = self._bindings
            version = registry.version
            if cached is None or cached[0] != version:
                tools = tools_from_registry(self._server.router.list_tools())
                built = await trio.to_thread.run_sync(typescript_bindings, tools, limiter=self._limiter)
                cached = self._bindings = (version, built)
            return cached[1]

    async def search(self, arguments: Any, *, session: str | None) -> dict[str, Any]:
        result = await self._server.meta.search_tools_async(arguments, session=session)
        if result.get("isError"):
            return result
        bindings = await self.bindings()
        hits = result["structuredContent"]["tools"]
        declarations = []
        for hit in hits:
            binding = bindings.get(hit["name"])
            if binding is not None:
                hit["typescript"] = binding.signature
                declarations.append(binding.signature)
        text = "\n\n".join(declarations) if declarations else "No tool matches; try other words."
        result["content"] = [{"type": "text", "text": text}]
        return result

    async def run(
        self, arguments: Any, *, caller: CallerInfo, session: str, timeout: float | None,
    ) -> dict[str, Any]:
        """The ``CallToolResult`` of one ``run_code`` call (see the module docstring)."""
        errors = _validate_run(arguments) if isinstance(arguments, dict) else ["arguments: must be an object"]
        if errors:
            return error_result("invalid_arguments", f"invalid arguments for {RUN_CODE}: " + "; ".join(errors))
        code = arguments["code"]
        if len(code) > MAX_CODE_CHARS:
            return error_result("invalid_arguments", f"the program is longer than {MAX_CODE_CHARS} characters")
        settings = self._server.settings
        if self._running >= settings.code_max_concurrent_runs:
            return error_result(
                "busy", f"{self._running} programs are running already (code_max_concurrent_runs); "
                "retry when one has ended",
            )
        self._running += 1
        try:
            return await self._run(code, arguments, caller=caller, session=session, timeout=timeout)
        finally:
            self._running -= 1

    async def _run(
        self, code: str, arguments: dict[str, Any], *, caller: CallerInfo, session: str, timeout: float | None,
    ) -> dict[str, Any]:
        settings = self._server.settings
        limit = settings.code_timeout
        for cap in (timeout, arguments.get("timeoutMs", 0) / 1000 or None):
            if cap is not None:
                limit = min(limit, cap)
        limits = Limits(
            timeout=limit, heap_mb=settings.code_max_heap_mb, max_output_bytes=settings.code_max_output_bytes,
            max_tool_calls=settings.code_max_tool_calls,
            max_unread_result_bytes=settings.code_max_unread_result_bytes,
        )
        run_id = f"{session}/run-{next(self._runs)}"
        inner = CallerInfo(caller.client_name, caller.client_version, run_id, caller.transport)
        router = self._server.router
        bindings = await self.bindings()
        apps: dict[str, dict[str, str]] = {}
        for binding in bindings.values():
            apps.setdefault(binding.app_attr, {})[binding.method] = binding.agent_name

        async def call_tool(name: str, args: Any) -> CallOutcome:
            if not isinstance(args, dict):
                return CallOutcome(OutcomeKind.INVALID_ARGUMENTS, f"arguments for {name} must be an object")
            if name == SEARCH_TOOLS:  # searchTools() in the program: read-only, not an app call
                found = await self.search(args, session=run_id)
                if found.get("isError"):
                    return CallOutcome(OutcomeKind.INVALID_ARGUMENTS, str(found["content"][0]["text"]))
                return CallOutcome(OutcomeKind.OK, result=ToolResult(data=found["structuredContent"]))
            return await router.call_tool(name, args, caller=inner)

        started = time.perf_counter()
        log.info("code_run_started", session=session, run=run_id, code_chars=len(code), timeout=limit)
        # Every run_code is one row of the call log, however it ends.
        try:
            report = await run_program(code, apps=apps, call_tool=call_tool, limits=limits)
        except SandboxUnavailable as exc:
            self._record(caller, session, code, run_id, started, CallOutcome(OutcomeKind.APP_ERROR, str(exc)))
            return error_result("unavailable", str(exc))
        except trio.Cancelled:
            self._record(caller, session, code, run_id, started,
                         CallOutcome(OutcomeKind.CANCELLED, "cancelled by the agent"))
            raise
        except Exception:  # a defect of ours: the agent gets a tool error, the log the traceback
            log.exception("code_run_failed", session=session, run=run_id)
            message = "toolbridge hit an internal error running the program; the daemon log has the details"
            self._record(caller, session, code, run_id, started, CallOutcome(OutcomeKind.INTERNAL_ERROR, message))
            return error_result("internal_error", message)
        # A result of up to 4 MiB is walked (depth, images) in a worker thread: a million
        # small items take ~1 s of CPU, which must not stall the event loop.
        result = await trio.to_thread.run_sync(_finish_run, report, run_id)
        log.info("code_run_ended", session=session, run=run_id, outcome=report.error_kind or "ok",
                 calls=len(report.calls), duration_ms=report.duration_ms)
        self._record(caller, session, code, run_id, started, report)
        return result

    def _record(self, caller: CallerInfo, session: str, code: str, run_id: str, started: float,
                ended: RunReport | CallOutcome) -> None:
        """The ``run_code`` row of the call log; its result names the run id of its inner rows.
        ``ended``: the run's report, or the outcome of a run that has none (cancelled, failed)."""
        call_log = self._server.router.call_log
        if call_log is None:
            return
        report = ended if isinstance(ended, RunReport) else None
        summary = {"run": run_id, "calls": len(report.calls) if report else 0}
        if isinstance(ended, CallOutcome):
            outcome = ended
        elif ended.error_kind is None:
            outcome = CallOutcome(OutcomeKind.OK, result=ToolResult(data=summary))
        else:
            message = (ended.error or {}).get("message", ended.error_kind)
            outcome = CallOutcome(OutcomeKind.APP_ERROR, str(message),
                                  result=ToolResult(success=False, data=summary, error=str(message)))
        call_log.record(tool=RUN_CODE, app=None, instance=None, agent=caller.agent, session=session,
                        arguments={"code": code}, outcome=outcome,
                        duration_ms=round((time.perf_counter() - started) * 1000, 3))


def _lift_images(value: Any, images: list[dict[str, Any]], depth: int = 0) -> Any:
    """Image objects in the program's result become MCP image blocks (the value keeps a reference)."""
    if depth > 64:
        return value
    if isinstance(value, dict):
        if value.get("type") == "image" and isinstance(value.get("data"), str) and isinstance(value.get("mimeType"), str):
            images.append({"type": "image", "data": value["data"], "mimeType": value["mimeType"]})
            return {"type": "image", "mimeType": value["mimeType"], "content": len(images)}
        return {k: _lift_images(v, images, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_lift_images(v, images, depth + 1) for v in value]
    return value


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists and objects more than ``limit`` levels (walked with a
    stack, not recursion: the value may be nested as deep as the bridge's decoder allows)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _refuse_deep_result(report: RunReport) -> None:
    """Agents' JSON parsers have depth limits (the Python SDK's: ~200 levels, past which the
    response is lost and the agent waits for good): a deeper result ends the run as ``limit``."""
    if report.error_kind is None and _deeper_than(report.value, MAX_RESULT_DEPTH):
        report.value = None
        report.error_kind = "limit"
        report.error = {"name": "ResultTooDeep", "message": (
            f"the program's result is nested more than {MAX_RESULT_DEPTH} levels deep; return flatter data")}


def _finish_run(report: RunReport, run_id: str) -> dict[str, Any]:
    """The ``CallToolResult`` of a run that ended (refusing a result nested too deep first)."""
    _refuse_deep_result(report)
    return _run_result(report, run_id)


def _run_result(report: RunReport, run_id: str) -> dict[str, Any]:
    images: list[dict[str, Any]] = []
    structured: dict[str, Any] = {"ok": report.error_kind is None, "run": run_id}
    if report.error_kind is None:
        structured["result"] = _lift_images(report.value, images)
    else:
        structured["error"] = {"kind": report.error_kind, **(report.error or {})}
    structured["console"] = report.console
    if report.console_truncated:
        structured["consoleTruncated"] = True
    structured["calls"] = [
        {"tool": c.tool, "outcome": c.outcome, "ms": c.duration_ms} for c in report.calls[:_LISTED_CALLS]
    ]
    if len(report.calls) > _LISTED_CALLS:
        structured["callsNotListed"] = len(report.calls) - _LISTED_CALLS
    structured["durationMs"] = report.duration_ms
    result: dict[str, Any] = {
        "content": [{"type": "text", "text": _encoder.encode(structured).decode()}, *images],
        "structuredContent": structured,
        "isError": report.error_kind is not None,
    }
    if report.error_kind is not None:
        result["_meta"] = {"toolbridge/errorKind": f"code_{report.error_kind}"}
    return result


_modes: weakref.WeakKeyDictionary[McpServer, CodeMode] = weakref.WeakKeyDictionary()


def code_mode(server: McpServer) -> CodeMode:
    """The :class:`CodeMode` of ``server`` (made on first use)."""
    mode = _modes.get(server)
    if mode is None:
        mode = _modes[server] = CodeMode(server)
    return mode
