"""The MCP front door: agents reach the router only through here."""
