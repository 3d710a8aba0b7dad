"""toolbridge's daemon: the broker between MCP agents and desktop apps."""

from .config.settings import Settings
from .daemon.broker_core import BrokerCore
from .daemon.run import DaemonInfo, run_daemon
from .core.router import CallerInfo, CallOutcome, Router
from .version import VERSION

__all__ = ["VERSION", "BrokerCore", "CallOutcome", "CallerInfo", "DaemonInfo", "Router", "Settings", "run_daemon"]
