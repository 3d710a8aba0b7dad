"""The table of sub-commands: each one's name, one-line summary and the module that defines it.

A leaf of ``broker.cli`` that imports nothing heavy: ``toolbridge --help`` lists every command
from this table alone, and ``toolbridge COMMAND`` imports only COMMAND's module (issue 30:
importing every command module, and with them the daemon, took a second before anything ran).
Each module's ``add_parser`` adds its commands with :func:`broker.cli._common.add_command`, which
takes the summary from here, so it is written once.
"""

from __future__ import annotations

from typing import Final, NamedTuple

__all__ = ["COMMANDS", "Command", "summary_of"]


class Command(NamedTuple):
    name: str
    summary: str
    #: the module of ``broker.cli`` whose ``add_parser`` adds this command (and maybe others)
    module: str


#: Every sub-command, in the order ``toolbridge --help`` lists them.
COMMANDS: Final[tuple[Command, ...]] = (
    Command("serve", "run the daemon in the foreground", "serve_command"),
    Command("token", "print the token apps and agents use; manage scoped tokens", "token_command"),
    Command("codegen", "write typed bindings (Python or TypeScript) for the connected apps' tools", "codegen_command"),
    Command("logs", "show the calls agents made (the call log)", "logs_command"),
    Command("status", "is the daemon running; its apps, tools and calls", "client_commands"),
    Command("tools", "the tools agents see", "client_commands"),
    Command("call", "call a tool as an agent would", "client_commands"),
    Command("stdio", "MCP over stdin/stdout, relayed to the daemon (what agents launch); starts the daemon if needed",
            "stdio_relay"),
    Command("stop", "stop the daemon of this home (also one `toolbridge stdio` started)", "daemon_control"),
    Command("restart", "stop the daemon of this home and start it again in the background", "daemon_control"),
    Command("doctor", "check the set-up (home, token, daemon, ports, agents) and say what to fix", "doctor_command"),
    Command("agent-config", "print (or --write) the MCP config entry for an agent", "agent_config"),
    Command("open", "open the daemon's live status page in the browser", "open_command"),
    Command("conformance", "check an app client against the protocol's conformance kit", "conformance_command"),
    Command("nats-permissions", "print the NATS permissions a broker's user needs (--nats)", "nats_command"),
    Command("models", "show or fetch the models of semantic tool search (toolbridge[semantic])", "models_command"),
    Command("integrate", "install toolbridge's add-on into a desktop program (blender, freecad, libreoffice)", "integrate_command"),
)

_SUMMARIES: Final = {command.name: command.summary for command in COMMANDS}


def summary_of(name: str) -> str:
    return _SUMMARIES[name]
