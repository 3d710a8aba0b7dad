"""toolbridge's daemon: the broker between MCP agents and desktop apps."""

from .config import Settings
from .core import VERSION, BrokerCore
from .daemon import DaemonInfo, run_daemon
from .router import CallerInfo, CallOutcome, Router

__all__ = ["VERSION", "BrokerCore", "CallOutcome", "CallerInfo", "DaemonInfo", "Router", "Settings", "run_daemon"]
