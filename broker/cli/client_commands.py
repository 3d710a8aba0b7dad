"""``toolbridge status``, ``toolbridge tools`` and ``toolbridge call``: the daemon seen from a terminal.

Exit codes (documented in docs/cli.md): 0 ok; 1 the tool reported an error; 2 usage error;
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

from ._common import EXIT_USAGE, SubParsers, add_command, add_home, home_from, short_id
from .call_args import argument_hints, parse_arguments, unknown_tool_message
from .daemon_client import DaemonUnavailable, McpLineClient, admin_request, locate, open_agent_stream

EXIT_TOOL_ERROR = 1
EXIT_NOT_FOUND = 3
EXIT_DAEMON_DOWN = 4
#: Where a tool result says why the daemon failed the call (broker.mcp.results.ERROR_KIND_KEY;
#: the wire name is spelled here because importing the MCP package would import the daemon).
ERROR_KIND_KEY = "toolbridge/errorKind"


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
    # What the user came for first (the apps, then the agents); the set-up; the event loop last.
    apps = status["apps"]
    print(
        f"{len(apps)} app instance(s), {status['tools']} tool(s), {status['callsInFlight']} call(s) in flight, "
        f"{status['agentSessions']} agent session(s) on stdio"
    )
    for app in apps:
        state = "connected" if app["connected"] else "reconnecting"
        # The label is the app's name unless two instances share it (``Notes_2``): name it then.
        name = app["label"] if app["label"] == app["app"] else f"{app['label']} ({app['app']})"
        print(
            f"  {name:<24} instance {short_id(app['instance'])}: {state}, {app['tools']} tools, "
            f"{app['inFlight']} running, {app['queued']} queued"
        )
    if agents is not None:
        print(f"agents: {len(agents)} session(s) open (stdio relays and HTTP sessions; "
              "2026-07-28 HTTP requests are stateless and not listed)")
        for agent in agents:
            client = f"{agent['client'] or 'unknown client'} {agent.get('clientVersion') or ''}".strip()
            # Code mode is discovery with other tools: its sessions say "code mode", not "discovery".
            mode = ", code mode" if agent.get("code") else ", discovery mode" if agent.get("discovery") else ""
            if agent.get("app"):  # a one-app scope (stdio --app, /mcp/apps/NAME)
                mode += f", only the app {agent['app']}"
            print(f"  {agent['session']:<24} {client} over {agent['transport']}"
                  f" (protocol {agent.get('protocolVersion') or 'not initialized'}){mode}")
    print(f"home: {status['home']}")
    if status.get("httpPort"):
        print(f"MCP URL: {mcp_url(home, status['httpPort'], status['host'])} (header 'Authorization: Bearer "
              "<token>', see `toolbridge token`)")
    uplink = status.get("uplink")
    if uplink:
        error = f" ({uplink['lastError']})" if uplink.get("lastError") else ""
        print(f"uplink: as {uplink['name']!r} to {uplink['parent']}: {uplink['state']}, {uplink['tools']} tools{error}")
    nats = status.get("nats")
    if nats:
        state = "connected" if nats["connected"] else f"not connected (retrying: {nats.get('lastError') or '...'})"
        others = ", ".join(nats["brokers"]) or "none yet"
        print(f"NATS: as {nats['name']!r} at {nats['url']}: {state}; other brokers: {others}")
        for broker, why in sorted((nats.get("refused") or {}).items()):
            print(f"  NATS broker {broker!r}: tools refused: {why}")
        if nats.get("nameTaken"):
            print(f"  NATS: {nats['nameTaken']}")
    loop = status.get("eventLoop")
    if loop:
        print(f"event loop: longest stall {loop['maxStallMs']:g} ms ({loop['lastMinuteMaxStallMs']:g} ms in the last "
              f"minute), {loop['stallsOver100Ms']} stall(s) over 100 ms; woken at most {loop['maxLateMs']:g} ms "
              "late (includes waiting for a busy machine)")
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
            if tool.get("exampleRequests"):  # what the search reads besides (agents never see them)
                print("    typical requests: " + "; ".join(tool["exampleRequests"]))
    return 0


# --- call --------------------------------------------------------------------------------


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


class _CallRequest:
    """What ``toolbridge call`` sends: the raw ``--arg`` pairs are read by the tool's schema."""

    def __init__(self, name: str, pairs: list[str], json_text: str | None, json_flag: str) -> None:
        self.name = name
        self.pairs = pairs
        self.json_text = json_text
        self.json_flag = json_flag


async def _list_tools(client: McpLineClient) -> list[dict[str, Any]]:
    """Every tool ``tools/list`` shows this (default-mode) agent connection, all pages."""
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(10_000):  # a bound, not a limit anyone meets: pages hold many tools
        reply = await client.request("tools/list", {"cursor": cursor} if cursor else {})
        result = reply.get("result") or {}
        tools.extend(t for t in result.get("tools") or [] if isinstance(t, dict))
        cursor = result.get("nextCursor")
        if not cursor:
            break
    return tools


async def _call(
    home: Path, request: _CallRequest, timeout: float | None, show_progress: bool
) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """Run the call; return the JSON-RPC reply and the tool list if it was fetched.

    Raises ValueError (a usage error) when an ``--arg`` value does not fit the tool's schema.
    """
    link = await open_agent_stream(locate(home))
    try:
        client = McpLineClient(link)
        await client.initialize()
        tools: list[dict[str, Any]] | None = None
        schema: dict[str, Any] | None = None
        if request.pairs:  # the schema decides how each --arg value is read
            tools = await _list_tools(client)
            schema = next((t.get("inputSchema") for t in tools if t.get("name") == request.name), None)
        arguments = parse_arguments(request.pairs, request.json_text, schema, json_flag=request.json_flag)
        params: dict[str, Any] = {"name": request.name, "arguments": arguments, "_meta": {"progressToken": "cli"}}
        if timeout is not None:
            params["_meta"]["toolbridge/timeoutMs"] = int(timeout * 1000)
        bar = ProgressLine()

        def on_notification(message: dict[str, Any]) -> None:
            if show_progress and message.get("method") == "notifications/progress":
                bar.update(message.get("params") or {})

        try:
            reply = await client.request("tools/call", params, on_notification)
        finally:
            bar.done()
        if (_is_unknown_tool(reply) or _refused_arguments(reply)) and tools is None:
            tools = await _list_tools(client)  # for the did-you-mean, or the names it accepts
        return reply, tools
    finally:
        await link.aclose()


def _is_unknown_tool(reply: dict[str, Any]) -> bool:
    error = reply.get("error")
    return isinstance(error, dict) and error.get("code") == -32602 and "unknown tool" in str(error.get("message"))


def _refused_arguments(reply: dict[str, Any]) -> bool:
    """The daemon refused the arguments (schema validation), before the app saw the call."""
    result = reply.get("result")
    meta = result.get("_meta") if isinstance(result, dict) else None
    return isinstance(meta, dict) and meta.get(ERROR_KIND_KEY) == "invalid_arguments"


def _call_options(args: argparse.Namespace) -> tuple[str, str | None, str, bool] | int:
    """``(tool name, arguments JSON, the flag it came from, JSON output)``, or an exit code.

    ``--json`` used to take the arguments object (``call NAME --json '{...}'``); it now asks
    for JSON output. argparse reads it with an optional value, so an old command line still
    gives its object here: it is used as the arguments, with a deprecation warning, rather
    than silently becoming a call without arguments. ``call --json NAME`` (the flag first)
    makes argparse take the name as the flag's value; it is given back to the name.
    """
    name: str | None = args.name
    json_output = bool(args.raw)
    json_text: str | None = args.args_json
    flag = "--args-json"
    if args.json is True:
        json_output = True
    elif isinstance(args.json, str):
        if name is None and not args.json.lstrip().startswith(("{", "[")):
            name, json_output = args.json, True  # `call --json NAME`
        else:
            if json_text is not None:
                print("toolbridge: give the arguments once, with --args-json", file=sys.stderr)
                return EXIT_USAGE
            print(
                "toolbridge: warning: `call --json OBJECT` is deprecated and will be removed in the next "
                "release: use --args-json OBJECT for the arguments (--json alone now asks for JSON output)",
                file=sys.stderr,
            )
            json_text, flag = args.json, "--json"
    if name is None:
        print("toolbridge: call: give the tool's name, as `toolbridge tools` shows it "
              "(e.g. toolbridge call Notes__type_text --arg text=hello)", file=sys.stderr)
        return EXIT_USAGE
    return name, json_text, flag, json_output


def cmd_call(args: argparse.Namespace) -> int:
    options = _call_options(args)
    if isinstance(options, int):
        return options
    name, json_text, flag, json_output = options
    request = _CallRequest(name, args.arg or [], json_text, flag)
    try:
        # Nothing is sent for arguments that do not parse: fail before connecting if we can.
        parse_arguments([], json_text, json_flag=flag)
        reply, tools = trio.run(_call, home_from(args), request, args.timeout, not args.quiet)
    except ValueError as exc:
        print(f"toolbridge: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except DaemonUnavailable as exc:
        return _down(exc)
    if "error" in reply:
        error = reply["error"]
        unknown = _is_unknown_tool(reply)
        message = unknown_tool_message(name, [t.get("name", "") for t in tools or []]) if unknown else error.get("message")
        if json_output:
            print(json.dumps({"error": {**error, "message": message}}, indent=2))
        print(f"toolbridge: {message}", file=sys.stderr)
        return EXIT_NOT_FOUND if unknown else EXIT_TOOL_ERROR
    result = reply.get("result") or {}
    if json_output:
        print(json.dumps(result, indent=2))
    else:
        print_result(result, name, Path(args.save_dir))
    if _refused_arguments(reply):
        schema = next((t.get("inputSchema") for t in tools or [] if t.get("name") == name), None)
        arguments = parse_arguments(request.pairs, json_text, schema, json_flag=flag)
        for hint in argument_hints(arguments, schema):
            print(f"toolbridge: {hint}", file=sys.stderr)
        return EXIT_USAGE  # the command line was wrong, not the tool
    return EXIT_TOOL_ERROR if result.get("isError") else 0


def add_parser(sub: SubParsers) -> None:
    status = add_command(sub, "status")
    add_home(status)
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.set_defaults(func=cmd_status)

    tools = add_command(sub, "tools")
    add_home(tools)
    tools.add_argument("--schema", action="store_true", help="show each tool's input schema")
    tools.add_argument("--json", action="store_true", help="machine-readable output")
    tools.set_defaults(func=cmd_tools)

    call = add_command(sub, "call")
    add_home(call)
    call.add_argument("name", nargs="?", help="agent-facing tool name, as `toolbridge tools` shows it")
    call.add_argument("--arg", action="append", metavar="KEY=VALUE",
                      help="an argument, read by the tool's schema: a string stays text (text=123 sends \"123\"), "
                           "numbers, booleans, null, arrays and objects are JSON")
    call.add_argument("--args-json", metavar="OBJECT", help="all arguments as one JSON object (--arg adds to it)")
    # nargs="?": the old `--json OBJECT` (arguments) still parses, and is warned about in cmd_call.
    call.add_argument("--json", nargs="?", const=True, default=None, metavar="OBJECT",
                      help="print the MCP result (or error) as JSON (with OBJECT: the arguments, deprecated; "
                           "use --args-json)")
    call.add_argument("--timeout", type=float, help="seconds before the call times out")
    call.add_argument("--save-dir", default=".", help="where images and audio are saved (default: .)")
    call.add_argument("--raw", action="store_true", help="the same as --json")
    call.add_argument("--quiet", action="store_true", help="no progress bar")
    call.set_defaults(func=cmd_call)
