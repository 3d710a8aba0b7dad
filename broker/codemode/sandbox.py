"""One program run: a Deno process with no permissions, its bridge, its limits.

Theory of operation
-------------------
:func:`run_program` starts ``deno run`` (the binary from PyPI's ``deno`` package, the extra
``toolbridge[code]``) in a fresh temporary folder with a minimal environment, no permission
flags at all (so file system, network, environment, subprocesses and FFI are refused by
Deno), ``--no-prompt`` (refused, never asked), no config, lock file, npm or remote modules,
and ``--v8-flags=--max-old-space-size=N`` for the heap. Memory outside the V8 heap
(``ArrayBuffer``s) is not bounded by that flag: on Linux the process's data limit
(``RLIMIT_DATA``, set with ``prlimit`` before the program is sent) caps everything at the heap
plus :data:`DATA_HEADROOM_MB` (what Deno reserves for itself, ~0.5 GiB, and room), so a larger
allocation fails with a ``RangeError``; other systems have the heap limit only. Local files
cannot be *imported*
either (Deno does not check read permission for module loading): the main module is a
``data:`` URL (:mod:`.prelude`) and an import map sends every ``file:`` URL to a remote host
that ``--no-remote`` refuses. What Deno offers with no permission at all is switched off
where it reaches native code or the disk: WebGPU (:func:`_environment`) and everything Deno
would write to the run's folder for the program (web storage, module caches: :func:`_make_folder`).
Replies the program has not read yet are bounded per run (:meth:`_Run.tool_call`).

The process runs inside a nursery owned by the call (``trio.run_process`` started in it,
killed when the nursery is cancelled): one task reads the bridge (stdout), one drains stderr
keeping its first few KiB for the error message, and each tool call the program makes runs
as a task in the same nursery, through ``call_tool`` (the router pipeline, as the agent).
The run ends at the first of: the ``done`` message, the process exiting, a bridge violation,
the tool-call limit, or the wall-time limit; then the nursery is cancelled, which kills
Deno and cancels the calls still running (their apps are told). Cancelling the caller does
the same. Nothing blocks the event loop: file work (the temporary folder) runs in a worker
thread.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final
from urllib.parse import quote

import attrs
import structlog
import trio

from ..core.outcome import CallOutcome, OutcomeKind
from ..core.passthrough import plain
from ..errors import BrokerError
from .bridge import BridgeReader, BridgeViolation, CallMessage, DoneMessage, LogMessage, encode_reply, encode_start
from .prelude import prelude_source

log = structlog.get_logger("toolbridge.code")

__all__ = ["Limits", "RunReport", "CallRecord", "SandboxUnavailable", "find_deno", "run_program", "deno_argv"]

#: Stderr kept for the error message of a crashed run.
_STDERR_KEEP: Final = 8 * 1024
#: On Linux the sandbox's data limit is the heap limit plus this (MiB): Deno reserves ~0.5 GiB
#: of writable address space at start (measured with Deno 2.9), the rest is room for buffers.
DATA_HEADROOM_MB: Final = 1024
#: The import map: every ``file:`` URL goes to a host ``--no-remote`` refuses.
_IMPORT_MAP: Final = b'{"imports": {"file:///": "https://local-files.invalid/", "file://": "https://local-files.invalid/"}}'
#: An empty file in the run's folder where a folder would be needed (see :func:`_make_folder`).
_BLOCKED: Final = "no-storage"

ToolCaller = Callable[[str, Any], Awaitable[CallOutcome]]
#: The error kind (and call record outcome) of a result dropped for the unread-result budget.
UNREAD_LIMIT: Final = "unread_limit"


class SandboxUnavailable(BrokerError):
    """No Deno binary: code mode needs the ``code`` extra (the message says how to install it)."""


@attrs.frozen
class Limits:
    timeout: float = 30.0
    heap_mb: int = 512
    max_output_bytes: int = 64 * 1024
    max_tool_calls: int = 200
    #: The longest bridge message (a tool call's arguments, the result).
    max_message_bytes: int = 4 * 1024 * 1024
    #: Bytes of tool results the daemon holds for the program until it reads them (see
    #: :meth:`_Run.tool_call`); a result that would go over reaches it as an error instead.
    max_unread_result_bytes: int = 32 * 1024 * 1024


@attrs.frozen
class CallRecord:
    tool: str
    outcome: str
    duration_ms: float


@attrs.define
class RunReport:
    """How a run ended. ``error_kind``: None (it returned), ``error`` (it threw), ``timeout``,
    ``memory``, ``limit``, ``bridge``, ``exited``."""

    value: Any = None
    error_kind: str | None = None
    error: dict[str, Any] | None = None
    console: str = ""
    console_truncated: bool = False
    calls: list[CallRecord] = attrs.Factory(list)
    duration_ms: float = 0.0
    #: Time until the sandbox asked for its first message (start-up), in ms.
    startup_ms: float | None = None


@functools.cache
def find_deno() -> str:
    """The path of the Deno binary (``TOOLBRIDGE_DENO`` overrides), or SandboxUnavailable.

    Looked up once per process (a failure is not cached: installing the extra and retrying
    works without a restart)."""
    override = os.environ.get("TOOLBRIDGE_DENO")
    if override:
        if not os.path.isfile(override):
            raise SandboxUnavailable(f"TOOLBRIDGE_DENO names {override!r}, which is not a file: "
                                     "point it at a deno binary, or unset it")
        return override
    try:
        from deno import find_deno_bin  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        found = shutil.which("deno")
        if found:
            return found
        from ..extras import install_hint

        raise SandboxUnavailable(
            f"code mode needs Deno (PyPI's deno package ships the binary): install the code extra where "
            f"the daemon runs, `{install_hint('code')}`, then run the program again"
        ) from None
    try:
        return str(find_deno_bin())
    except FileNotFoundError as exc:
        raise SandboxUnavailable(f"the deno package is installed but its binary is missing ({exc})") from exc


@functools.cache
def _prelude_url() -> str:
    return "data:application/javascript;charset=utf-8," + quote(prelude_source(), safe="")


def deno_argv(deno: str, folder: str, heap_mb: int) -> list[str]:
    """The command line: no --allow-* flag at all (every permission is refused)."""
    return [
        deno, "run",
        "--no-prompt", "--no-remote", "--no-npm", "--no-config", "--no-lock", "--cached-only",
        "--deny-import", "--no-code-cache", "--quiet",
        f"--v8-flags=--max-old-space-size={heap_mb}",
        f"--import-map={os.path.join(folder, 'import_map.json')}",
        _prelude_url(),
    ]


def _environment(folder: str) -> dict[str, str]:
    """Only what Deno needs; nothing of the daemon's environment (its token, say) is passed.

    Two variables switch off what Deno offers without any permission, for the whole process
    (a Web Worker has a fresh global scope, so removing globals in the prelude would not do):
    ``DENO_WEBGPU_BACKEND`` names no backend, so ``navigator.gpu.requestAdapter()`` gives null
    and no GPU driver (Vulkan loader, Mesa, their LLVM) is ever loaded into the sandbox; and
    ``TMPDIR`` is a file, so nothing can make a folder under the temporary directory (Deno
    releases kept the Cache API's store there, shared by every run).
    """
    env = {
        "DENO_DIR": os.path.join(folder, "deno_dir"),
        "NO_COLOR": "1",
        "DENO_NO_UPDATE_CHECK": "1",
        "DENO_NO_PACKAGE_JSON": "1",
        "DENO_WEBGPU_BACKEND": "none",
        "HOME": folder,
    }
    if os.name == "nt":  # Windows processes need these to start at all
        for name in ("SYSTEMROOT", "SystemRoot", "TEMP", "TMP"):
            if name in os.environ:
                env[name] = os.environ[name]
    else:
        env["TMPDIR"] = os.path.join(folder, _BLOCKED)
    return env


def _make_folder() -> str:
    """The run's folder, where the program may not write anything (no ``--allow-write``).

    Deno writes there for it anyway: web storage (the Cache API, without a quota;
    ``localStorage``) under ``DENO_DIR/location_data``, and each TypeScript module the
    program imports, transpiled, under ``DENO_DIR/gen`` (plus its analysis in SQLite caches).
    Those folder paths and the ``TMPDIR`` path are made empty *files*, so creating a folder
    there fails (``ENOTDIR``, for root too) and the storage APIs throw; the SQLite caches'
    paths are made folders, which Deno cannot open as a database and replaces with one in
    memory. Nothing is lost: every run starts with an empty ``DENO_DIR`` anyway."""
    folder = tempfile.mkdtemp(prefix="toolbridge-code-")
    with open(os.path.join(folder, "import_map.json"), "wb") as f:
        f.write(_IMPORT_MAP)
    os.mkdir(os.path.join(folder, "deno_dir"))
    for blocked in (os.path.join(folder, "deno_dir", "location_data"), os.path.join(folder, "deno_dir", "gen"),
                    os.path.join(folder, _BLOCKED)):
        with open(blocked, "wb"):
            pass
    for cache in ("dep_analysis_cache_v2", "node_analysis_cache_v2", "v8_code_cache_v2"):
        os.mkdir(os.path.join(folder, "deno_dir", cache))
    return folder


def result_value(outcome: CallOutcome) -> Any:
    """What ``await apps.X.y()`` resolves to for a successful call."""
    result = plain(outcome.result) if outcome.result is not None else None  # content decoded
    if result is None:
        return None
    if result.structured_content is not None:
        return result.structured_content
    if result.data is not None:
        return result.data
    content = result.content or []
    if all(block.get("type") == "text" for block in content):
        return "".join(str(block.get("text", "")) for block in content)
    return content


async def _kill(process: trio.Process) -> None:
    process.kill()


def cap_memory(pid: int, heap_mb: int) -> bool:
    """Limit process ``pid``'s data memory to the heap plus :data:`DATA_HEADROOM_MB` (Linux's
    ``prlimit``; False where there is none, or it failed)."""
    try:
        import resource
    except ImportError:  # Windows
        return False
    prlimit = getattr(resource, "prlimit", None)  # Linux only
    if prlimit is None:
        return False
    limit = (heap_mb + DATA_HEADROOM_MB) * 1024 * 1024
    try:
        prlimit(pid, resource.RLIMIT_DATA, (limit, limit))
    except (OSError, ValueError) as exc:
        log.warning("code_memory_cap_failed", error=str(exc))
        return False
    return True


class _Run:
    def __init__(self, code: str, apps: dict[str, dict[str, str]], call_tool: ToolCaller, limits: Limits) -> None:
        self.code = code
        self.apps = apps
        self.call_tool = call_tool
        self.limits = limits
        self.report = RunReport()
        self.stderr = bytearray()
        self.write_lock = trio.Lock()
        self.console: list[str] = []
        self.console_bytes = 0
        #: Encoded replies waiting to be written to a program that is not reading its stdin.
        self.unread_result_bytes = 0
        self.started = time.perf_counter()

    def end(self, kind: str, name: str, message: str) -> None:
        if self.report.error_kind is None and self.report.error is None:
            self.report.error_kind = kind
            self.report.error = {"name": name, "message": message}

    async def write(self, process: trio.Process, data: bytes) -> None:
        assert process.stdin is not None
        async with self.write_lock:
            try:
                await process.stdin.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the sandbox is gone; the reader reports why

    async def drain_stderr(self, process: trio.Process) -> None:
        assert process.stderr is not None
        while data := await process.stderr.receive_some(65536):
            room = _STDERR_KEEP - len(self.stderr)
            if room > 0:
                self.stderr += data[:room]

    async def tool_call(self, process: trio.Process, message: CallMessage) -> None:
        started = time.perf_counter()
        name = message.tool
        try:
            outcome = await self.call_tool(name, message.args)
        except Exception:
            log.exception("code_tool_call_failed", tool=name)
            outcome = CallOutcome(OutcomeKind.INTERNAL_ERROR, "toolbridge hit an internal error on this call")
        recorded = outcome.kind.value
        if outcome.kind is OutcomeKind.OK:
            reply = encode_reply(message.id, value=result_value(outcome))
        else:
            reply = encode_reply(message.id, kind=outcome.kind.value, message=outcome.message, tool=name)
        del outcome  # from here on only the encoded reply is held
        # A program that starts calls and then keeps its event loop busy does not read its
        # stdin: the pipe fills and every later reply would wait here, in the daemon's memory
        # (60 results of 4 MiB grew it by 237 MiB). What waits is bounded per run; a reply
        # that does not fit is dropped and the program gets a short error in its place.
        size = len(reply)
        budget = self.limits.max_unread_result_bytes
        if self.unread_result_bytes + size > budget:
            recorded = UNREAD_LIMIT
            reply = encode_reply(message.id, kind=UNREAD_LIMIT, tool=name, message=(
                f"the result of {name} ({size} bytes) was dropped: the program had not read "
                f"{self.unread_result_bytes} bytes of earlier results, and at most {budget} may wait "
                "(the code_max_unread_result_bytes setting); await results as they arrive, or start "
                "fewer calls at once"))
            size = 0  # a short error, bounded by the tool-call limit
        self.report.calls.append(CallRecord(name, recorded, round((time.perf_counter() - started) * 1000, 3)))
        self.unread_result_bytes += size
        try:
            await self.write(process, reply)
        finally:
            self.unread_result_bytes -= size

    def add_console(self, text: str, truncated: bool = False) -> None:
        """Keep console output up to the limit; ``truncated``: the prelude cut it already."""
        if self.report.console_truncated:
            return
        size = len(text.encode())
        room = self.limits.max_output_bytes - self.console_bytes
        if size > room:
            text = text.encode()[:max(room, 0)].decode(errors="ignore")
            self.report.console_truncated = True
        self.console.append(text)
        self.console_bytes += len(text.encode())
        self.report.console_truncated |= truncated

    async def read_bridge(self, process: trio.Process, nursery: trio.Nursery) -> None:
        """Read messages until ``done`` (or the stream ends), then end the run."""
        assert process.stdout is not None
        reader = BridgeReader(self.limits.max_message_bytes)
        calls = 0
        try:
            while True:
                message = reader.next_message()
                if message is None:
                    data = await process.stdout.receive_some(65536)
                    if not data:
                        break
                    if self.report.startup_ms is None:
                        self.report.startup_ms = round((time.perf_counter() - self.started) * 1000, 3)
                    reader.receive_data(data)
                    continue
                if isinstance(message, CallMessage):
                    calls += 1
                    if calls > self.limits.max_tool_calls:
                        self.end("limit", "ToolCallLimit",
                                 f"the program made more than {self.limits.max_tool_calls} tool calls "
                                 "(the code_max_tool_calls setting); it was stopped")
                        break
                    nursery.start_soon(self.tool_call, process, message, name=f"code call {message.tool}")
                elif isinstance(message, LogMessage):
                    self.add_console(message.text, message.truncated)
                elif isinstance(message, DoneMessage):
                    if message.ok:
                        self.report.value = message.value
                    else:
                        error = message.error if isinstance(message.error, dict) else {}
                        self.report.error_kind = "error"
                        self.report.error = {
                            "name": str(error.get("name", "Error"))[:200],
                            "message": str(error.get("message", ""))[:4000],
                            "stack": str(error.get("stack", ""))[:4000],
                        }
                    break
        except BridgeViolation as exc:
            self.end("bridge", "BridgeViolation", str(exc))
        if not reader.finished and self.report.error is None:
            with trio.move_on_after(2):  # the process is exiting: its status and stderr say why
                await process.wait()
            self.end(*self._exit_reason(process.returncode))
        nursery.cancel_scope.cancel()

    def _exit_reason(self, returncode: int | None) -> tuple[str, str, str]:
        text = bytes(self.stderr).decode(errors="replace")
        if "out of memory" in text.lower() or "heap limit" in text.lower():
            return ("memory", "OutOfMemory",
                    f"the program ran out of memory (heap limit {self.limits.heap_mb} MiB, the code_max_heap_mb setting)")
        detail = text.strip()[-2000:]
        return ("exited", "SandboxExited",
                f"the program ended without a result (exit status {returncode}; Deno.exit() or a crash)"
                + (f": {detail}" if detail else ""))


async def run_program(
    code: str,
    *,
    apps: dict[str, dict[str, str]],
    call_tool: ToolCaller,
    limits: Limits,
    deno: str | None = None,
) -> RunReport:
    """Run ``code`` in a fresh sandbox and report how it ended (see the module docstring).

    Raises SandboxUnavailable if there is no Deno; cancelling the caller kills the sandbox
    and cancels its tool calls.
    """
    deno = deno or find_deno()
    run = _Run(code, apps, call_tool, limits)
    folder = await trio.to_thread.run_sync(_make_folder)
    try:
        with trio.move_on_after(limits.timeout) as scope:
            async with trio.open_nursery() as nursery:
                process: trio.Process = await nursery.start(functools.partial(
                    trio.run_process, deno_argv(deno, folder, limits.heap_mb),
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    env=_environment(folder), cwd=folder, check=False, deliver_cancel=_kill,
                ))
                # Before the program is sent: nothing of it has run yet.
                cap_memory(process.pid, limits.heap_mb)
                nursery.start_soon(run.drain_stderr, process)
                nursery.start_soon(run.read_bridge, process, nursery)
                await run.write(process, encode_start(code, apps, limits.max_output_bytes))
        if scope.cancelled_caught:
            run.end("timeout", "Timeout", f"the program ran longer than {limits.timeout:g} s and was stopped")
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(functools.partial(shutil.rmtree, folder, ignore_errors=True))
    run.report.console = "".join(run.console)
    run.report.duration_ms = round((time.perf_counter() - run.started) * 1000, 3)
    return run.report

