"""Loopback and port helpers shared by the daemon's listeners, the MCP HTTP server and the uplink.

They live in ``broker.config`` (not in ``broker.daemon.run``) so that ``broker.mcp.http`` and
``broker.federation.uplink`` can use them without importing the daemon's composition root.
"""

from __future__ import annotations

import errno
import ipaddress
from pathlib import Path

from ..errors import StartupError
from . import home as home_files

__all__ = ["is_loopback", "port_in_use", "port_taken_error"]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def port_in_use(exc: OSError) -> bool:
    return exc.errno in (errno.EADDRINUSE, getattr(errno, "WSAEADDRINUSE", -1))


def port_taken_error(host: str, port: int, what: str, flag: str, home: Path) -> StartupError:
    owner = home_files.read_runtime(home)
    hint = ""
    if owner and port in (owner.get("port"), owner.get("httpPort")):
        hint = f" (a toolbridge daemon, pid {owner.get('pid')}, was started there)"
    return StartupError(
        f"the {what} port {port} on {host} is already in use{hint}. "
        f"Stop the program that holds it, or choose another port with {flag}."
    )
