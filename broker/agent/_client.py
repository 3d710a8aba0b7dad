"""``connect()`` and :class:`Toolbridge`: the daemon's tools for agent code, over MCP.

Theory of operation
-------------------
:func:`connect` opens an MCP connection with the official SDK's ``mcp.Client``: by default
through ``toolbridge stdio`` (``python -m broker stdio --home H``, a subprocess that starts
the daemon if none runs), or over Streamable HTTP when given a URL (with the bearer token
on an ``httpx2`` client). The connection is in the default mode: ``tools/list`` gives every
app tool, which :attr:`Toolbridge.apps` is built from, and the daemon answers the meta-tool
``search_tools`` in every mode, which :meth:`Toolbridge.search` calls.

:meth:`Toolbridge.call` sends ``tools/call`` through the SDK session's ``send_request`` (not
``Client.call_tool``, which re-lists every tool before validating a tool it has not listed,
such as ``search_tools``): the per-call ``timeout`` becomes
``_meta["toolbridge/timeoutMs"]``, ``on_progress`` the SDK's progress callback, and
cancelling the calling scope makes the SDK send ``notifications/cancelled`` (or abort the
HTTP request), which the daemon turns into ``toolCancel`` for the app. A failure becomes
the exception of its kind (``_errors``).

The tool list is kept fresh by a background task: on the handshake era the daemon's
``notifications/tools/list_changed`` wakes it; on 2026-07-28 it holds a
``subscriptions/listen`` stream. Either way it re-lists and rebuilds :attr:`Toolbridge.apps`.

Everything uses anyio (the SDK's own layer), so the library runs under trio or asyncio.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

import attrs

try:
    import anyio
    import anyio.abc
    import httpx2
    import mcp_types as types
    from mcp import Client, MCPError, StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client
except ImportError as exc:  # pragma: no cover - depends on the installation
    from ..extras import install_hint

    raise ImportError(f"broker.agent needs the MCP SDK ({exc.name} is missing): {install_hint('agent')}") from exc

from ..version import VERSION
from ._apps import Apps, build_namespace
from ._errors import ConnectError, error_from_result, error_from_rpc

__all__ = ["connect", "Toolbridge", "ToolMatch", "ProgressCallback", "relay_command"]

ProgressCallback = Callable[[float, "float | None", "str | None"], "Awaitable[None] | None"]

TIMEOUT_KEY: Final = "toolbridge/timeoutMs"
SEARCH_TOOLS: Final = "search_tools"
#: Extra seconds the client waits past a call's own timeout before giving up on the daemon.
CLIENT_GRACE: Final = 5.0
_HEADER_MISMATCH: Final = -32020
_MODERN: Final = "2026-07-28"
#: Environment the relay subprocess needs besides what the SDK passes (HOME, PATH, ...).
_PASS_ENV: Final = ("PYTHONPATH", "VIRTUAL_ENV", "SYSTEMROOT", "APPDATA", "LOCALAPPDATA", "XDG_DATA_HOME")


@attrs.frozen
class ToolMatch:
    """One ``search`` result: call it with ``tb.call(match.name, {...})``."""

    name: str
    app: str
    description: str
    input_schema: dict[str, Any]
    title: str | None = None


def _home(home: str | os.PathLike[str] | None) -> Path:
    if home is not None:
        return Path(home).expanduser()
    env = os.environ.get("TOOLBRIDGE_HOME")
    if env:
        return Path(env).expanduser()
    from ..config.settings import default_home

    return default_home()


def relay_command(home: Path, *, auto_start: bool = True) -> list[str]:
    """The ``toolbridge stdio`` command :func:`connect` runs: this Python, ``-m broker``."""
    command = [sys.executable, "-m", "broker", "stdio", "--home", str(home)]
    if not auto_start:
        command.append("--no-start")
    return command


class Toolbridge:
    """A connection to the daemon (make it with :func:`connect`).

    It has ``call`` with the signature the generated stubs expect, so
    ``Apps(tb)`` from ``toolbridge codegen --lang python`` works with it.
    """

    def __init__(self, client: Client) -> None:
        #: The underlying ``mcp.Client`` (for anything this library does not cover).
        self.mcp = client
        self._tools: dict[str, types.Tool] = {}
        self._apps = Apps({})
        self._refresh_lock = anyio.Lock()
        self._changed = anyio.Event()
        #: Set (and replaced) after each refresh: lets tests wait for one without polling.
        self._refreshed = anyio.Event()

    # --- tools ----------------------------------------------------------------------------

    @property
    def apps(self) -> Apps:
        """The connected apps' tools as ``tb.apps.<App>.<tool_method>(...)``.

        Built from the tool list as last fetched (on connect, after each change the daemon
        announces, and by :meth:`refresh`); method names are those of the generated stubs.
        """
        return self._apps

    @property
    def tools(self) -> dict[str, types.Tool]:
        """The tools as last listed, by agent-facing name (the SDK's ``Tool`` objects)."""
        return dict(self._tools)

    @property
    def protocol_version(self) -> str:
        return self.mcp.protocol_version

    async def refresh(self) -> None:
        """List the tools again and rebuild :attr:`apps` (follows ``nextCursor`` pages)."""
        async with self._refresh_lock:
            tools: dict[str, types.Tool] = {}
            cursor: str | None = None
            for _ in range(1000):
                page = await self.mcp.list_tools(cursor=cursor, cache_mode="refresh")
                tools.update((tool.name, tool) for tool in page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
            self._tools = tools
            self._apps = build_namespace(tools.values(), self.call)
            self._refreshed.set()
            self._refreshed = anyio.Event()

    async def search(self, query: str, limit: int = 5) -> list[ToolMatch]:
        """The tools that best match ``query`` (BM25 on the daemon), best first.

        Raises :class:`~broker.agent.ToolInvalidArguments` for an empty query or a ``limit``
        outside 1..50.
        """
        found = await self.call(SEARCH_TOOLS, {"query": query, "limit": limit})
        rows = found.get("tools", []) if isinstance(found, dict) else []
        return [
            ToolMatch(row["name"], row["app"], row.get("description", ""), row.get("inputSchema", {}), row.get("title"))
            for row in rows
            if isinstance(row, dict)
        ]

    # --- calls ----------------------------------------------------------------------------

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> Any:
        """Call the tool ``name`` (agent-facing, ``<App>__<tool>``) and return its result.

        The result is, in this order: the ``structuredContent`` when the answer has one (a
        dict for tools that return a JSON object or declare an outputSchema); else, for an
        answer of exactly one text block, the JSON value that text holds, or the text itself
        when it is not JSON; else the list of content blocks (``mcp_types.TextContent``,
        ``ImageContent``, ...); ``None`` for an empty answer.

        ``timeout`` (seconds) replaces the tool's deadline on the daemon, which then fails
        the call with :class:`~broker.agent.ToolTimeout` and tells the app to stop; the
        default is the tool's own or the daemon's (30 s). ``on_progress(progress, total,
        message)``, a plain or async function, gets the app's progress reports. Cancel the
        calling scope to cancel the call: the app is told.

        Raises :class:`~broker.agent.ToolCallError` (the subclass of the failure's kind):
        ``ToolNotFound``, ``ToolInvalidArguments``, ``ToolGuardRejected``, ``ToolBusy``,
        ``ToolTimeout``, ``AppDisconnected``, ``ToolAppError``, ``ConnectionLost``, ...
        """
        meta: dict[str, Any] = {}
        read_timeout = None
        if timeout is not None:
            if timeout <= 0:
                raise ValueError("timeout must be positive")
            meta[TIMEOUT_KEY] = max(1, round(timeout * 1000))
            read_timeout = timeout + CLIENT_GRACE
        progress = _progress_adapter(on_progress)
        payload = dict(arguments) if arguments is not None else {}
        try:
            try:
                result = await self._send_call(name, payload, meta, read_timeout, progress)
            except MCPError as exc:
                if exc.code != _HEADER_MISMATCH or self.protocol_version != _MODERN:
                    raise
                # The tool's schema changed since we listed it (x-mcp-header): list, resend once.
                await self.refresh()
                result = await self._send_call(name, payload, meta, read_timeout, progress)
        except MCPError as exc:
            raise error_from_rpc(name, exc.code, exc.message) from None
        if result.is_error:
            text = "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))
            raise error_from_result(name, result.meta, text, result)
        return _value_of(result)

    async def _send_call(
        self,
        name: str,
        arguments: dict[str, Any],
        meta: dict[str, Any],
        read_timeout: float | None,
        progress: Any,
    ) -> types.CallToolResult:
        params = types.CallToolRequestParams(
            name=name, arguments=arguments, _meta=meta or None  # type: ignore[arg-type]
        )
        return await self.mcp.session.send_request(
            types.CallToolRequest(params=params),
            types.CallToolResult,
            request_read_timeout_seconds=read_timeout,
            progress_callback=progress,
        )

    # --- keeping the tool list fresh --------------------------------------------------------

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._changed.set()

    async def _watch(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Re-list the tools whenever the daemon says they changed (runs until cancelled).

        Reports started once changes are being watched, so a list fetched after that
        misses nothing.
        """
        if self.protocol_version == _MODERN:
            await self._listen(task_status)
            return
        task_status.started()  # list_changed notifications come to _on_message
        while True:
            await self._changed.wait()
            self._changed = anyio.Event()
            await self._refresh_quietly()

    async def _listen(self, task_status: anyio.abc.TaskStatus[None]) -> None:
        started = False
        failures = 0
        while failures < 5:
            try:
                async with self.mcp.listen(tools_list_changed=True) as subscription:
                    if not started:
                        task_status.started()
                        started = True
                    failures = 0
                    async for _event in subscription:
                        await self._refresh_quietly()
                return  # the daemon is stopping: it ended the stream gracefully
            except Exception:  # SubscriptionLost, MCPError: e.g. the relay lost the daemon
                if not started:
                    task_status.started()
                    started = True
                failures += 1
                await anyio.sleep(0.5 * failures)
                await self._refresh_quietly()  # listen again, and catch up on what was missed

    async def _refresh_quietly(self) -> None:
        try:
            await self.refresh()
        except Exception:
            pass  # the connection is going away (the next call will say so): never break the caller


def _progress_adapter(on_progress: ProgressCallback | None) -> Any:
    if on_progress is None:
        return None

    async def progress(value: float, total: float | None, message: str | None) -> None:
        outcome = on_progress(value, total, message)
        if inspect.isawaitable(outcome):
            await outcome

    return progress


def _value_of(result: Any) -> Any:
    """A successful ``CallToolResult``'s value (see :meth:`Toolbridge.call`)."""
    if result.structured_content is not None:
        return result.structured_content
    content = list(result.content)
    if not content:
        return None
    if len(content) == 1 and getattr(content[0], "type", None) == "text":
        text = content[0].text
        try:
            return json.loads(text)
        except ValueError:
            return text
    return content


def _leaf(group: BaseExceptionGroup[Any]) -> BaseException | None:
    """The one exception inside nested single-member groups, else None."""
    current: BaseException = group
    while isinstance(current, BaseExceptionGroup):
        if len(current.exceptions) != 1:
            return None
        current = current.exceptions[0]
    return current


@asynccontextmanager
async def connect(
    url: str | None = None,
    *,
    token: str | None = None,
    home: str | os.PathLike[str] | None = None,
    auto_start: bool = True,
    mode: str = "auto",
    client_name: str = "toolbridge-agent",
) -> AsyncIterator[Toolbridge]:
    """Connect to the toolbridge daemon; leave the block to disconnect.

    Without ``url``: through ``toolbridge stdio`` (a subprocess of this Python), for the
    daemon of ``home`` (default ``$TOOLBRIDGE_HOME`` or the user data directory), started in
    the background if it is not running (``auto_start=False``: fail instead). With ``url``
    (``http://127.0.0.1:47701/mcp``): over Streamable HTTP with ``token`` (default: read from
    ``<home>/token``). ``mode`` is the MCP SDK's: ``"auto"`` (2026-07-28 when the daemon
    speaks it) or ``"legacy"`` (the initialize handshake).

    Raises :class:`~broker.agent.ConnectError` when the daemon cannot be reached or refuses
    (the relay gives up after its own timeouts; wrap the whole block in ``fail_after`` for a
    deadline of your own). An exception raised in the block leaves it as itself (not
    wrapped in an ExceptionGroup) when it is the only one.
    """
    where = _home(home)
    transport: Any
    http: Any = None
    if url is None:
        command = relay_command(where, auto_start=auto_start)
        env = {key: os.environ[key] for key in _PASS_ENV if key in os.environ}
        env.update((key, value) for key, value in os.environ.items() if key.startswith("TOOLBRIDGE_"))
        transport = StdioServerParameters(command=command[0], args=command[1:], env=env)
    else:
        if token is None:
            try:
                token = (where / "token").read_text().strip()
            except OSError as exc:
                raise ConnectError(f"no token given and none readable in {where}: {exc.strerror}") from None
        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30.0, read=300.0)
        )
        transport = streamable_http_client(url, http_client=http)

    tb: Toolbridge | None = None

    async def on_message(message: Any) -> None:
        if tb is not None:
            await tb._on_message(message)

    client = Client(
        transport,
        mode=mode,
        message_handler=on_message,
        client_info=types.Implementation(name=client_name, version=VERSION),
        cache=None,
    )
    try:
        async with AsyncExitStack() as stack:
            if http is not None:
                await stack.enter_async_context(http)
            try:
                await stack.enter_async_context(client)
            except BaseExceptionGroup as group:  # the SDK's task groups wrap what they raise
                leaf = _leaf(group)
                if not isinstance(leaf, Exception):
                    raise
                raise ConnectError(f"cannot connect to the toolbridge daemon: {_describe(leaf)}") from None
            except Exception as exc:
                raise ConnectError(f"cannot connect to the toolbridge daemon: {_describe(exc)}") from None
            tb = Toolbridge(client)
            async with anyio.create_task_group() as tasks:
                await tasks.start(tb._watch)
                await tb.refresh()
                try:
                    yield tb
                finally:
                    tasks.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        leaf = _leaf(group)
        if not isinstance(leaf, Exception):  # several errors, or Cancelled: leave them to trio
            raise
        raise leaf from leaf.__cause__


if TYPE_CHECKING:

    class _ToolCaller(Protocol):
        """The client protocol of the stubs ``toolbridge codegen --lang python`` writes."""

        async def call(self, name: str, arguments: dict[str, Any]) -> Any: ...

    def _fits_generated_stubs(tb: Toolbridge) -> _ToolCaller:
        return tb  # mypy checks that a Toolbridge is a client for the generated stubs


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
