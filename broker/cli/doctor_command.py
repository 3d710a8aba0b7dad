"""``toolbridge doctor``: check a set-up end to end and say what to fix.

Theory of operation
-------------------
Each check is a small function that appends :class:`Finding` rows (``ok``, ``warn`` or
``fail``, what was seen, and for the last two what to do). The checks run in the order a
newcomer meets the problems: the ``toolbridge`` command on ``PATH``; the environment (old or
contradictory variables); the home directory and where it came from; the token file and its
permissions; ``runtime.json`` and whether the daemon it names holds the home's lock; then,
with a daemon up, both of its doors: the app port (an ``admin status`` round trip over the
same path the CLI and apps use, and a plain TCP connect to the port) and MCP over HTTP (a
stateless 2026-07-28 ``server/discover`` POST with the token); with none up, whether its
settings load (``config.toml``, ``TOOLBRIDGE_*``) and the ports they name are free. Last, the agents' config files
(:mod:`broker.cli.agent_config` knows where they are): present or not, whether they name
``toolbridge stdio``, a command that exists and the home checked here.

Nothing is changed. The exit code is 1 when any check failed, else 0; ``--json`` prints the
rows for scripts. Network checks are bounded (a few seconds each), so a stuck daemon shows
up as a failed check, never a hang.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import socket
import ssl
import stat
import sys
from pathlib import Path
from collections.abc import Callable
from typing import Any, Final

import attrs
import trio

from app_client.discovery import ENV_HOME, ENV_PORT
from ..config import home as home_files
from ..config.settings_file import CONFIG_FILE, env_deprecations, load_settings
from ..errors import BrokerError
from ._common import EXIT_ERROR, EXIT_OK, SubParsers, add_command, add_home, home_from
from .agent_config import AGENTS, ConfigFileError, config_path, read_config, toolbridge_command
from .daemon_client import DaemonUnavailable, admin_request

__all__ = ["Finding", "add_parser", "cmd_doctor", "run_checks"]

_TIMEOUT: Final = 3.0
_MODERN: Final = "2026-07-28"


@attrs.frozen
class Finding:
    level: str  # "ok", "warn" or "fail"
    check: str
    detail: str
    fix: str = ""


def _path_check(found: list[Finding]) -> None:
    command = toolbridge_command()
    on_path = shutil.which("toolbridge")
    if on_path:
        found.append(Finding("ok", "command", f"`toolbridge` on PATH is {on_path}"))
    elif Path(command[0]).name.startswith("toolbridge"):
        folder = Path(command[0]).parent
        line = (f'set PATH={folder};%PATH%' if os.name == "nt" else f'export PATH="{folder}:$PATH"')
        found.append(Finding("warn", "command", f"`toolbridge` is not on PATH; it is {command[0]}",
                             f"add its folder to PATH (e.g. in your shell profile): {line}"))
    else:
        found.append(Finding("warn", "command", "no `toolbridge` script found; using `python -m broker`",
                             "install toolbridge with `python3 dev.py serve` once, or `pipx install .`"))


def _env_check(found: list[Finding]) -> None:
    for note in env_deprecations():
        found.append(Finding("warn", "environment", note, "rename the variable where you set it"))
    if os.environ.get(ENV_PORT, "").strip() == "0":
        found.append(Finding("warn", "environment", f"{ENV_PORT}=0 is ignored by clients (they read runtime.json)",
                             f"to let the daemon pick a free port, set TOOLBRIDGE_LISTEN_PORT=0 instead of {ENV_PORT}"))


def _home_check(home: Path, source: str, found: list[Finding]) -> bool:
    if not home.exists():
        found.append(Finding("warn", "home", f"{home} (from {source}) does not exist yet",
                             "start the daemon once (`toolbridge serve`, or an agent's `toolbridge stdio`)"))
        return False
    if not home.is_dir():
        found.append(Finding("fail", "home", f"{home} (from {source}) is not a directory",
                             "remove it or choose another --home"))
        return False
    mode = stat.S_IMODE(home.stat().st_mode)
    if os.name == "posix" and mode & 0o077:
        found.append(Finding("warn", "home", f"{home} (from {source}) is mode {mode:o}: other users can look in",
                             f"chmod 700 {home}"))
    else:
        found.append(Finding("ok", "home", f"{home} (from {source})"))
    return True


def _token_check(home: Path, found: list[Finding]) -> None:
    path = home / home_files.TOKEN_FILE
    try:
        token = path.read_text().strip()
    except FileNotFoundError:
        found.append(Finding("warn", "token", f"no token in {home} yet", "start the daemon once: it creates one"))
        return
    except OSError as exc:
        found.append(Finding("fail", "token", f"cannot read {path}: {exc.strerror}", f"check the owner of {path}"))
        return
    if not token:
        found.append(Finding("fail", "token", f"{path} is empty", "run `toolbridge token --rotate`"))
        return
    mode = stat.S_IMODE(path.stat().st_mode)
    if os.name == "posix" and mode & 0o077:
        found.append(Finding("fail", "token", f"{path} is mode {mode:o}: other users can read the token",
                             f"chmod 600 {path}, then `toolbridge token --rotate` and restart the daemon"))
    else:
        found.append(Finding("ok", "token", f"{path} (owner-only)"))


def _port_free(host: str, port: int) -> bool:
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.bind((host, port))
    except OSError:
        return False
    return True


def _ports_when_down(home: Path, found: list[Finding]) -> None:
    """The ports the daemon would listen on (config.toml, TOOLBRIDGE_LISTEN_*, defaults): free?"""
    try:
        settings = load_settings(None, home)
    except BrokerError as exc:  # ConfigError: the daemon would not start either
        found.append(Finding("fail", "config", str(exc), f"fix {home / CONFIG_FILE} or the variable it names"))
        return
    for port, what, variable in ((settings.port, "app", "TOOLBRIDGE_LISTEN_PORT"),
                                 (settings.http_port, "MCP HTTP", "TOOLBRIDGE_LISTEN_HTTP_PORT")):
        if not port:  # 0: any free port; None: HTTP off
            continue
        if _port_free(settings.host if settings.host != "0.0.0.0" else "127.0.0.1", port):
            found.append(Finding("ok", "ports", f"the {what} port {port} is free"))
        else:
            found.append(Finding("warn", "ports", f"the {what} port {port} is taken by another program",
                                 f"start the daemon on another port ({variable}=0 or a number, or "
                                 "`toolbridge serve --port/--http-port`, or port/http_port in config.toml)"))


def _http_check(home: Path, runtime: dict[str, Any], found: list[Finding]) -> None:
    http_port = runtime.get("httpPort")
    if not isinstance(http_port, int):
        found.append(Finding("ok", "http", "MCP over HTTP is off (--no-http): only `toolbridge stdio` agents"))
        return
    host = str(runtime.get("host") or "127.0.0.1")
    try:
        token = (home / home_files.TOKEN_FILE).read_text().strip()
        if runtime.get("tls"):
            context = ssl.create_default_context(cafile=runtime.get("tlsCert"))
            context.check_hostname = False  # pinned: the daemon's own certificate is the only CA
            connection: http.client.HTTPConnection = http.client.HTTPSConnection(
                host, http_port, timeout=_TIMEOUT, context=context)
        else:
            connection = http.client.HTTPConnection(host, http_port, timeout=_TIMEOUT)
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
                           "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": _MODERN,
                                                "io.modelcontextprotocol/clientCapabilities": {}}}})
        try:
            connection.request("POST", "/mcp", body, {
                "Authorization": f"Bearer {token}", "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": _MODERN,
                "Mcp-Method": "server/discover"})
            response = connection.getresponse()
            answer = response.read(65536).decode(errors="replace")
        finally:
            connection.close()
    except (OSError, http.client.HTTPException) as exc:
        found.append(Finding("fail", "http", f"MCP over HTTP on {host}:{http_port} does not answer: {exc}",
                             "restart the daemon (`toolbridge restart`); see its log"))
        return
    url = f"{'https' if runtime.get('tls') else 'http'}://{host}:{http_port}/mcp"
    if response.status == 200 and '"result"' in answer:
        found.append(Finding("ok", "http", f"MCP over HTTP answers at {url}"))
    else:
        found.append(Finding("fail", "http", f"{url} answered HTTP {response.status}: {answer[:200]}",
                             "check the token (`toolbridge token`) and the daemon's log"))


def _daemon_check(home: Path, found: list[Finding]) -> None:
    runtime = home_files.read_runtime(home)
    if runtime is None:
        if home_files.lock_held(home):
            found.append(Finding("warn", "daemon", "a daemon holds the home's lock but wrote no runtime.json yet",
                                 "wait a moment (it is starting), or see <home>/daemon.log"))
        else:
            found.append(Finding("warn", "daemon", f"no daemon is running for {home}",
                                 "start it: `toolbridge serve` (or let an agent's `toolbridge stdio` start it)"))
        _ports_when_down(home, found)
        return
    pid, port = runtime.get("pid"), runtime.get("port")
    if not home_files.lock_held(home):
        found.append(Finding("fail", "daemon", f"runtime.json names pid {pid}, but no daemon holds the home "
                             "(it was killed)", "start the daemon again (`toolbridge serve`); the stale file "
                             "is replaced"))
        _ports_when_down(home, found)
        return
    found.append(Finding("ok", "runtime", f"runtime.json: pid {pid}, app port {port}, HTTP port "
                         f"{runtime.get('httpPort')}" + (", Unix socket" if runtime.get("socket") else "")))
    try:
        status = trio.run(admin_request, home, "status", None, _TIMEOUT)
    except DaemonUnavailable as exc:
        found.append(Finding("fail", "app door", f"the daemon does not answer: {exc}",
                             "`toolbridge restart`; if that hangs, `toolbridge stop` and see its log"))
    else:
        found.append(Finding("ok", "app door", f"the daemon answers (toolbridge {status.get('version')}, "
                             f"{len(status.get('apps', []))} app(s), {status.get('tools')} tool(s))"))
    if isinstance(port, int):
        host = str(runtime.get("host") or "127.0.0.1")
        try:
            socket.create_connection((host, port), timeout=_TIMEOUT).close()
        except OSError as exc:
            found.append(Finding("fail", "app port", f"TCP {host}:{port} refuses connections: {exc.strerror}",
                                 "apps in other languages use this port: restart the daemon"))
        else:
            found.append(Finding("ok", "app port", f"apps can connect to {host}:{port}"))
    _http_check(home, runtime, found)


def _home_of_entry(entry: dict[str, Any]) -> Path | None:
    args = [str(a) for a in entry.get("args") or []]
    if "--home" in args[:-1]:
        return Path(args[args.index("--home") + 1]).expanduser()
    env = entry.get("env")
    if isinstance(env, dict) and env.get(ENV_HOME):
        return Path(env[ENV_HOME]).expanduser()
    return None


def _is_ours(name: str, entry: dict[str, Any]) -> bool:
    """A ``toolbridge stdio`` entry: by its name, its command, or ``python -m broker stdio``."""
    args = [str(a) for a in entry.get("args") or []]
    if "stdio" not in args:
        return False
    command = Path(str(entry.get("command", ""))).name
    return "toolbridge" in name.lower() or command.startswith("toolbridge") or args[:2] == ["-m", "broker"]


def _agent_configs(agent: str) -> list[tuple[str, Path, Callable[[dict[str, Any]], Any]]]:
    """Where ``agent`` may name MCP servers: (what to call the place, its file, how to find the
    servers in it). Claude Code reads the project's ``.mcp.json`` and ``~/.claude.json``, which
    holds the user's servers and each project's own (``claude mcp add``, scopes user and local)."""
    places: list[tuple[str, Path, Callable[[dict[str, Any]], Any]]] = [
        (str(config_path(agent)), config_path(agent), lambda data: data.get("mcpServers", {})),
    ]
    if agent == "claude-code":
        user_file = Path.home() / ".claude.json"
        project = str(Path.cwd())
        places += [
            (f"{user_file} (user scope)", user_file, lambda data: data.get("mcpServers", {})),
            (f"{user_file} (local scope of {project})", user_file,
             lambda data: ((data.get("projects") or {}).get(project) or {}).get("mcpServers", {})),
        ]
    return places


def _agents_check(home: Path, found: list[Finding]) -> None:
    for agent in AGENTS:
        places = [place for place in _agent_configs(agent) if place[1].exists()]
        if not places and agent != "claude-code":
            found.append(Finding("ok", f"agent {agent}", f"no config file ({config_path(agent)})"))
        for where, path, servers_in in places:
            try:
                servers = servers_in(read_config(path))
            except (ConfigFileError, AttributeError) as exc:
                detail = str(exc) if isinstance(exc, ConfigFileError) else f"{where} is not laid out as expected"
                found.append(Finding("fail", f"agent {agent}", detail))
                continue
            _check_entries(agent, where, servers if isinstance(servers, dict) else {}, home, found,
                           quiet_if_none=where != str(path))


def _check_entries(agent: str, where: str, servers: dict[str, Any], home: Path, found: list[Finding], *,
                   quiet_if_none: bool) -> None:
    """One finding per toolbridge entry of ``servers`` (read from ``where``)."""
    from app_client.discovery import default_home

    ours = {name: entry for name, entry in servers.items() if isinstance(entry, dict) and _is_ours(name, entry)}
    fix = f"`toolbridge agent-config {agent} --write`"
    if not ours:
        if not quiet_if_none:  # ~/.claude.json holds much else: no entry there is no news
            found.append(Finding("warn", f"agent {agent}", f"{where} has no toolbridge server", f"run {fix}"))
        return
    for name, entry in ours.items():
        command = str(entry.get("command", ""))
        configured = _home_of_entry(entry) or default_home()
        if not (Path(command).is_absolute() and Path(command).exists()) and not shutil.which(command):
            found.append(Finding("fail", f"agent {agent}", f"{name!r} in {where} runs {command!r}, which the "
                                 "agent will not find", f"use the absolute path: {fix}"))
        elif configured.absolute() != home.absolute():
            found.append(Finding("warn", f"agent {agent}", f"{name!r} in {where} uses the home {configured}, "
                                 f"not {home}", f"if it should use this home: {fix}"))
        else:
            found.append(Finding("ok", f"agent {agent}", f"{name!r} in {where} runs {command} with this home"))


def _extras_check(found: list[Finding]) -> None:
    """Which optional extras are installed; for the others, the command that adds each here."""
    from ..extras import EXTRAS, extra_installed, install_hint

    for extra, (purpose, _) in EXTRAS.items():
        if extra_installed(extra):
            found.append(Finding("ok", f"extra {extra}", f"installed: {purpose}"))
            if extra == "semantic":
                _semantic_model_check(found)
        else:
            then = ", then `toolbridge models fetch`" if extra == "semantic" else ""  # its model, once
            found.append(Finding("ok", f"extra {extra}", f"not installed (optional, for {purpose}); to add it: "
                                 f"{install_hint(extra)}{then}"))


def _semantic_model_check(found: list[Finding]) -> None:
    """The semantic extra without its models' files searches by words only: say how to fetch them."""
    from ..discovery._models import MODELS, model_dir, models_missing, models_root

    missing = models_missing()
    if not missing:
        found.append(Finding("ok", "semantic models", ", ".join(m.name for m in MODELS) + f" in {models_root()}"))
    else:
        found.append(Finding("warn", "semantic models", "not fetched: search_tools matches words only (no "
                             + ", ".join(f"{m.name} in {model_dir(m)}" for m in missing) + ")", "toolbridge models fetch"))


def run_checks(home: Path, source: str) -> list[Finding]:
    found: list[Finding] = []
    _path_check(found)
    _env_check(found)
    if _home_check(home, source, found):
        _token_check(home, found)
    _daemon_check(home, found)
    _agents_check(home, found)
    _extras_check(found)
    return found


def cmd_doctor(args: argparse.Namespace) -> int:
    home = home_from(args)
    source = "--home" if args.home else (f"${ENV_HOME}" if os.environ.get(ENV_HOME) else "the default")
    found = run_checks(home, source)
    if args.json:
        print(json.dumps([attrs.asdict(f) for f in found], indent=2))
    else:
        for finding in found:
            print(f"{finding.level:<4}  {finding.check:<20} {finding.detail}")
            if finding.fix:
                print(f"{'':<6}{'':<20} fix: {finding.fix}")
        problems = sum(f.level != "ok" for f in found)
        print(f"{problems} thing(s) to look at" if problems else "all good", file=sys.stderr)
    return EXIT_ERROR if any(f.level == "fail" for f in found) else EXIT_OK


def add_parser(sub: SubParsers) -> None:
    parser = add_command(sub, "doctor")
    add_home(parser)
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(func=cmd_doctor)
