"""``toolbridge agent-config``: the exact MCP server entry for an agent, printed or merged in.

Theory of operation
-------------------
MCP clients launch ``toolbridge stdio`` themselves, with a ``PATH`` and an environment of their
own (they pass on only a short list of variables), so the entry names the ``toolbridge``
command by its absolute path (the script beside this Python, else the one on ``PATH``, else
``python -m broker``) and the home by ``--home`` with an absolute path: no ``TOOLBRIDGE_HOME``
needs to reach the agent.

:func:`config_path` knows where each agent keeps its configuration: Claude Desktop's
``claude_desktop_config.json`` (per OS), Cursor's ``~/.cursor/mcp.json``, and for Claude Code
the project file ``.mcp.json`` in the current directory (its ``claude mcp add`` command is
printed too). ``--write`` merges the entry into that JSON file: other servers and every other
key are kept, the previous file is saved beside it as ``*.bak``, and the new one replaces it
atomically (``os.replace``). A file that is not a JSON object is left alone, with a message.
``broker.cli.doctor_command`` reads the same files to say which agents are configured.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any, Final

from ..errors import BrokerError
from ._common import EXIT_ERROR, EXIT_OK, SubParsers, add_command, add_home, home_from

__all__ = [
    "AGENTS", "ConfigFileError", "add_parser", "cmd_agent_config", "config_path", "machine_specific", "merge_entry",
    "read_config", "server_entry", "toolbridge_command",
]

#: The agents ``agent-config`` knows, as the user names them.
AGENTS: Final = ("claude-desktop", "cursor", "claude-code")
SERVER_NAME: Final = "toolbridge"


def toolbridge_command() -> list[str]:
    """The absolute command that runs this toolbridge (what an agent should launch)."""
    scripts = Path(sys.executable).parent  # not resolved: a venv's python is a symlink out of it
    script = scripts / ("toolbridge.exe" if os.name == "nt" else "toolbridge")
    if script.exists():
        return [str(script.absolute())]
    found = shutil.which("toolbridge")
    if found:
        return [str(Path(found).absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "broker"]


def server_entry(home: Path, *, discovery: bool = False, code: bool = False, shared: bool = False) -> dict[str, Any]:
    """The ``mcpServers`` entry: absolute command, ``stdio``, and the home by ``--home``.

    ``shared``: for a file others use too (a project's ``.mcp.json``, committed with the code):
    plain ``toolbridge`` when that is the command on ``PATH``, and no ``--home`` for the default
    home, so the entry works on every machine where toolbridge is installed (see
    :func:`machine_specific`)."""
    from app_client.discovery import default_home

    command = toolbridge_command()
    on_path = shutil.which("toolbridge")
    if shared and on_path and Path(on_path).absolute() == Path(command[0]).absolute():
        command = ["toolbridge"]
    home = home.expanduser().absolute()
    args = [*command[1:], "stdio"]
    if not (shared and home == default_home().expanduser().absolute()):
        args += ["--home", str(home)]
    if discovery:
        args.append("--discovery")
    if code:
        args.append("--code")
    return {"command": command[0], "args": args}


def machine_specific(entry: dict[str, Any]) -> list[str]:
    """The paths in ``entry`` that exist only on this machine (absolute ones)."""
    words = [str(entry.get("command", "")), *(str(a) for a in entry.get("args") or [])]
    return [word for word in words if Path(word).is_absolute()]


def config_path(agent: str) -> Path:
    """Where ``agent`` reads its MCP servers from (for Claude Code: the project's ``.mcp.json``)."""
    if agent == "cursor":
        return Path.home() / ".cursor" / "mcp.json"
    if agent == "claude-code":
        return Path.cwd() / ".mcp.json"
    if sys.platform == "darwin":
        folder = Path.home() / "Library" / "Application Support" / "Claude"
    elif os.name == "nt":
        folder = Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming") / "Claude"
    else:  # Linux builds of Claude Desktop follow the XDG layout
        folder = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "Claude"
    return folder / "claude_desktop_config.json"


class ConfigFileError(BrokerError):
    """An agent's config file we will not touch; the message says why and what to do."""


def read_config(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` ({} when missing). Raises ConfigFileError otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigFileError(f"cannot read {path}: {exc.strerror}") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigFileError(f"{path} is not valid JSON ({exc}); fix it by hand, then run this again") from None
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers", {}), dict):
        raise ConfigFileError(f"{path} is not an object with an \"mcpServers\" object; fix it by hand")
    return data


def merge_entry(path: Path, name: str, entry: dict[str, Any]) -> str:
    """Put ``entry`` under ``mcpServers[name]`` in ``path``, keeping everything else. What was done."""
    data = read_config(path)
    servers = data.setdefault("mcpServers", {})
    if servers.get(name) == entry:
        return f"{path} already has this entry for {name!r}: nothing to change"
    replaced = name in servers
    servers[name] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        shutil.copy2(path, path.with_name(path.name + ".bak"))
    temporary = path.with_name(path.name + ".toolbridge-tmp")
    temporary.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, path)  # atomic: the agent never reads half a file
    kept = len(servers) - 1
    return (f"{'updated' if replaced else 'added'} {name!r} in {path} (kept {kept} other server(s)"
            f"{'; the old file is ' + path.name + '.bak' if path.with_name(path.name + '.bak').exists() else ''})")


def _claude_code_command(entry: dict[str, Any], name: str) -> str:
    return shlex.join(["claude", "mcp", "add", name, "--", entry["command"], *entry["args"]])


def cmd_agent_config(args: argparse.Namespace) -> int:
    home = home_from(args)
    shared = args.agent == "claude-code"  # the project's .mcp.json, usually committed with it
    entry = server_entry(home, discovery=args.discovery, code=args.code, shared=shared)
    path = Path(args.config).expanduser() if args.config else config_path(args.agent)
    if shared and machine_specific(entry):
        print(f"toolbridge: warning: this entry names {', '.join(machine_specific(entry))}, which exist(s) only on "
              "this machine; if .mcp.json is shared with the project, put `toolbridge` on PATH (and use the "
              "default home) so the entry works everywhere, or use `claude mcp add --scope user` instead",
              file=sys.stderr)
    if not args.write:
        # stdout is the JSON alone (`agent-config claude-code > .mcp.json`); the rest is for the user.
        print(json.dumps({"mcpServers": {args.name: entry}}, indent=2))
        if args.agent == "claude-code":
            print(f"# or, with the Claude Code CLI:\n{_claude_code_command(entry, args.name)}", file=sys.stderr)
        print(f"# put the entry into {path} (or run this again with --write to merge it in)", file=sys.stderr)
        return EXIT_OK
    try:
        done = merge_entry(path, args.name, entry)
    except ConfigFileError as exc:
        print(f"toolbridge: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as exc:
        print(f"toolbridge: cannot write {path}: {exc.strerror}", file=sys.stderr)
        return EXIT_ERROR
    print(done)
    if args.agent != "claude-code":
        print(f"restart {'Claude Desktop' if args.agent == 'claude-desktop' else 'Cursor'} to load it", file=sys.stderr)
    return EXIT_OK


def add_parser(sub: SubParsers) -> None:
    parser = add_command(sub, "agent-config")
    parser.add_argument("agent", choices=AGENTS, help="which agent's configuration")
    add_home(parser)
    parser.add_argument("--write", action="store_true",
                        help="merge the entry into the agent's config file (other servers are kept; a .bak is saved)")
    parser.add_argument("--config", metavar="PATH", help="the config file to write instead of the agent's usual one")
    parser.add_argument("--name", default=SERVER_NAME, help=f"the server's name in the config (default {SERVER_NAME})")
    parser.add_argument("--discovery", action="store_true", help="discovery mode (only search_tools and call_tool)")
    parser.add_argument("--code", action="store_true",
                        help="code mode (search_tools and run_code; needs the code extra: see `toolbridge doctor`)")
    parser.set_defaults(func=cmd_agent_config)

