"""``toolbridge status``, ``toolbridge tools`` and ``toolbridge call``: the daemon seen from a terminal.

Exit codes (documented in the README): 0 ok; 1 the tool reported an error; 2 usage error;
3 no such tool; 4 the daemon is not running or not answering.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import mimetypes
import sys
import time
from pathlib import Path
from typing import Any

import trio

from ._common import EXIT_USAGE, SubParsers, add_home, home_from
from .daemon_client import DaemonUnavailable, McpLineClient, admin_request, locate, open_agent_stream

EXIT_TOOL_ERROR = 1
EXIT_NOT_FOUND = 3
EXIT_DAEMON_DOWN = 4


def _down(exc: DaemonUnavailable) -> int:
    print(f"toolbridge: {exc}", file=sys.stderr)
    return EXIT_DAEMON_DOWN


# --- status ------------------------------------------------------------------------------


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


async def _status_and_agents(home: Path) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    status: dict[str, Any] = await admin_request(home, "status")
    try:
        agents: list[dict[str, Any]] | None = await admin_request(home, "agents")
    except DaemonUnavailable:  # a daemon from before the ``agents`` command
        agents = None
    return status, agents


def mcp_url(home: Path, http_port: int, host: str = "127.0.0.1") -> str:
    """The daemon's MCP endpoint over HTTP (https when runtime.json says its ports speak TLS)."""
    from ..config import home as home_files

    runtime = home_files.read_runtime(home) or {}
    scheme = "https" if runtime.get("tls") else "http"
    host = str(runtime.get("host") or host)  # runtime.json's is one to connect to (not 0.0.0.0)
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}:{http_port}/mcp"


def cmd_status(args: argparse.Namespace) -> int:
    home = home_from(args)
    try:
        status, agents = trio.run(_status_and_agents, home)
    except DaemonUnavailable as exc:
        return _down(exc)
    if args.json:
        print(json.dumps(status if agents is None else {**status, "agents": agents}, indent=2))
        return 0
    http = f", MCP over HTTP on port {status['httpPort']}" if status.get("httpPort") else ""
    print(
        f"toolbridge {status['version']} is running (pid {status['pid']}, up {_duration(status['uptimeSeconds'])}): "
        f"apps on {status['host']}:{status['port']}{http}"
    )
    print(f"home: {status['home']}")
    if status.get("httpPort"):
        print(f"MCP URL: {mcp_url(home, status['httpPort'], status['host'])} (header 'Authorization: Bearer "
              "<token>', see `toolbridge token`)")
    uplink = status.get("uplink")
    if uplink:
        error = f" ({uplink['lastError']})" if uplink.get("lastError") else ""
        print(f"uplink: as {uplink['name']!r} to {uplink['parent']}: {uplink['state']}, {uplink['tools']} tools{error}")
    apps = status["apps"]
    print(
        f"{len(apps)} app instance(s), {status['tools']} tool(s), {status['callsInFlight']} call(s) in flight, "
        f"{status['agentSessions']} agent session(s) on stdio"
    )
    loop = status.get("eventLoop")
    if loop:
        print(f"event loop: longest stall {loop['maxStallMs']:g} ms ({loop['lastMinuteMaxStallMs']:g} ms in the last "
              f"minute), {loop['stallsOver100Ms']} stall(s) over 100 ms; woken at most {loop['maxLateMs']:g} ms "
              "late (includes waiting for a busy machine)")
    for app in apps:
        state = "connected" if app["connected"] else "reconnecting"
        # The label is the app's name unless two instances share it (``Notes_2``): name it then.
        name = app["label"] if app["label"] == app["app"] else f"{app['label']} ({app['app']})"
        print(
            f"  {name:<24} instance {app['instance']}: {state}, {app['tools']} tools, "
            f"{app['inFlight']} running, {app['queued']} queued"
        )
    if agents is not None:
        print(f"agents: {len(agents)} session(s) open (stdio relays and HTTP sessions; "
              "2026-07-28 HTTP requests are stateless and not listed)")
        for agent in agents:
            client = f"{agent['client'] or 'unknown client'} {agent.get('clientVersion') or ''}".strip()
            mode = ", discovery mode" if agent.get("discovery") else ""
            print(f"  {agent['session']:<24} {client} over {agent['transport']}"
                  f" (protocol {agent.get('protocolVersion') or 'not initialized'}){mode}")
    return 0


# --- tools -------------------------------------------------------------------------------


def cmd_tools(args: argparse.Namespace) -> int:
    try:
        tools = trio.run(admin_request, home_from(args), "tools")
    except DaemonUnavailable as exc:
        return _down(exc)
    if args.json:
        print(json.dumps(tools, indent=2))
        return 0
    if not tools:
        print("no tools: no app is connected (see `toolbridge status`)", file=sys.stderr)
        return 0
    width = max(len(t["name"]) for t in tools)
    for tool in tools:
        description = (tool.get("description") or "").strip().splitlines()
        print(f"{tool['name']:<{width}}  {tool['app']:<16} {description[0] if description else ''}")
        if args.schema:
            print("    " + json.dumps(tool.get("inputSchema"), indent=2).replace("\n", "\n    "))
    return 0


# --- call --------------------------------------------------------------------------------


def parse_arguments(pairs: list[str], json_text: str | None) -> dict[str, Any]:
    """``--json`` first, then each ``--arg key=value`` (value parsed as JSON when it is JSON)."""
    arguments: dict[str, Any] = {}
    if json_text:
        try:
            loaded = json.loads(json_text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--json is not valid JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise ValueError("--json must be a JSON object")
        arguments.update(loaded)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--arg {pair!r}: use key=value")
        try:
            arguments[key] = json.loads(value)
        except json.JSONDecodeError:
            arguments[key] = value
    return arguments


class ProgressLine:
    """A progress bar on stderr (redrawn in place on a terminal, one line each otherwise)."""

    def __init__(self) -> None:
        self._tty = sys.stderr.isatty()
        self._drawn = False

    def update(self, params: dict[str, Any]) -> None:
        progress, total, message = params.get("progress", 0), params.get("total"), params.get("message") or ""
        if total:
            filled = int(20 * min(progress / total, 1))
            text = f"[{'#' * filled}{'-' * (20 - filled)}] {progress:g}/{total:g} {message}"
        else:
            text = f"[{progress:g}] {message}"
        if self._tty:
            sys.stderr.write("\r\x1b[K" + text)
            self._drawn = True
        else:
            sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def done(self) -> None:
        if self._drawn:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def _save_blob(block: dict[str, Any], tool: str, index: int, save_dir: Path) -> Path | None:
    try:
        data = base64.b64decode(block.get("data", ""), validate=True)
    except (binascii.Error, ValueError):
        return None
    extension = mimetypes.guess_extension(block.get("mimeType") or "") or ".bin"
    save_dir.mkdir(parents=True, exist_ok=True)
    path = save_dir / f"{tool}-{time.strftime('%Y%m%d-%H%M%S')}-{index}{extension}"
    path.write_bytes(data)
    return path


def print_result(result: dict[str, Any], tool: str, save_dir: Path) -> None:
    content = result.get("content") or []
    printed = False
    for index, block in enumerate(content):
        kind = block.get("type")
        if kind == "text":
            print(block.get("text", ""))
            printed = True
        elif kind in ("image", "audio"):
            path = _save_blob(block, tool, index, save_dir)
            print(f"[{kind} {block.get('mimeType', '')} saved to {path}]" if path else f"[{kind}: invalid base64]")
            printed = True
        else:
            print(json.dumps(block))
            printed = True
    if not printed and "structuredContent" in result:
        print(json.dumps(result["structuredContent"], indent=2))


async def _call(home: Path, name: str, arguments: dict[str, Any], timeout: float | None, show_progress: bool) -> dict[str, Any]:
    link = await open_agent_stream(locate(home))
    try:
        client = McpLineClient(link)
        await client.initialize()
        params: dict[str, Any] = {"name": name, "arguments": arguments, "_meta": {"progressToken": "cli"}}
        if timeout is not None:
            params["_meta"]["toolbridge/timeoutMs"] = int(timeout * 1000)
        bar = ProgressLine()

        def on_notification(message: dict[str, Any]) -> None:
            if show_progress and message.get("method") == "notifications/progress":
                bar.update(message.get("params") or {})

        try:
            return await client.request("tools/call", params, on_notification)
        finally:
            bar.done()
    finally:
        await link.aclose()


def cmd_call(args: argparse.Namespace) -> int:
    try:
        arguments = parse_arguments(args.arg or [], args.json)
    except ValueError as exc:
        print(f"toolbridge: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        reply = trio.run(_call, home_from(args), args.name, arguments, args.timeout, not args.quiet)
    except DaemonUnavailable as exc:
        return _down(exc)
    if "error" in reply:
        error = reply["error"]
        print(f"toolbridge: {error.get('message')}", file=sys.stderr)
        return EXIT_NOT_FOUND if error.get("code") == -32602 and "unknown tool" in str(error.get("message")) else EXIT_TOOL_ERROR
    result = reply.get("result") or {}
    if args.raw:
        print(json.dumps(result, indent=2))
    else:
        print_result(result, args.name, Path(args.save_dir))
    return EXIT_TOOL_ERROR if result.get("isError") else 0


def add_parser(sub: SubParsers) -> None:
    status = sub.add_parser("status", help="is the daemon running; its apps, tools and calls")
    add_home(status)
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.set_defaults(func=cmd_status)

    tools = sub.add_parser("tools", help="the tools agents see")
    add_home(tools)
    tools.add_argument("--schema", action="store_true", help="show each tool's input schema")
    tools.add_argument("--json", action="store_true", help="machine-readable output")
    tools.set_defaults(func=cmd_tools)

    call = sub.add_parser("call", help="call a tool as an agent would")
    add_home(call)
    call.add_argument("name", help="agent-facing tool name, as `toolbridge tools` shows it")
    call.add_argument("--arg", action="append", metavar="KEY=VALUE", help="an argument (value parsed as JSON if it is JSON)")
    call.add_argument("--json", metavar="OBJECT", help="all arguments as one JSON object")
    call.add_argument("--timeout", type=float, help="seconds before the call times out")
    call.add_argument("--save-dir", default=".", help="where images and audio are saved (default: .)")
    call.add_argument("--raw", action="store_true", help="print the MCP result as JSON")
    call.add_argument("--quiet", action="store_true", help="no progress bar")
    call.set_defaults(func=cmd_call)
