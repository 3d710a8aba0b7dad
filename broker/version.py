"""The toolbridge version: a leaf module, so the CLI, the agent library and the MCP session can
name it without importing the daemon."""

VERSION = "0.1.0"
