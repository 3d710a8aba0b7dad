"""toolbridge's daemon: the broker between MCP agents and desktop apps.

Layers (each package's docstring says what it owns and may import; arrows point the way
imports go, never back)::

    transports   broker.daemon (app port: BrokerCore, links, connection, local socket, run)
                 broker.mcp.http / front_door
        |
    MCP          broker.mcp (session, jsonrpc, protocol, results, meta, gate, headers)
        |
    router       broker.core.router (+ admission, guards, validation, calllog, outcome)
        |
    registry / correlation   broker.core.registry, calls, names, ports
        |
    wire         app_client.protocol (sans-IO: messages, framing, a state machine per side)
                 app_client.channel (the trio line channel)
    beside:      broker.config (settings, home, tokens, TLS, logging): importable by all daemon layers
                 broker.federation (rules: below links; uplink: an app_client.App beside the daemon)
    clients:     broker.cli (CLI, daemon client, stdio relay), broker.agent, broker.codegen:
                 they may import the daemon's packages; no daemon package imports them.
"""

from typing import TYPE_CHECKING, Any

from .version import VERSION

if TYPE_CHECKING:
    from .config.settings import Settings
    from .core.router import CallerInfo, CallOutcome, Router
    from .daemon.broker_core import BrokerCore
    from .daemon.run import DaemonInfo, run_daemon

__all__ = ["VERSION", "BrokerCore", "CallOutcome", "CallerInfo", "DaemonInfo", "Router", "Settings", "run_daemon"]

#: Where each public name lives. They are imported on first use (PEP 562), so that a client
#: program (``toolbridge status``, the stdio relay) that imports ``broker.cli`` does not import
#: the whole daemon first: that was most of the CLI's start-up time.
_LAZY: dict[str, str] = {
    "Settings": ".config.settings",
    "BrokerCore": ".daemon.broker_core",
    "DaemonInfo": ".daemon.run",
    "run_daemon": ".daemon.run",
    "CallerInfo": ".core.router",
    "CallOutcome": ".core.router",
    "Router": ".core.router",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'broker' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value
