"""The toolbridge version: a leaf module, so the CLI, the agent library and the MCP session can
name it without importing the daemon."""

VERSION = "0.1.0"

#: The MCP ``clientInfo.name`` of toolbridge's own command line (``toolbridge call``): the daemon
#: logs its one-shot sessions at debug level, so a script calling tools in a loop does not fill
#: the log with three session lines per call (the call itself still has its line).
CLI_CLIENT_NAME = "toolbridge-cli"
