"""The app's connection state, in a leaf module of its own.

Both :mod:`app_client.app` (which sets it) and :mod:`app_client.threaded` (which waits on it)
need :class:`ConnectionState`; keeping it here, importing nothing from the package, lets
``threaded`` use it without importing ``app``, so the two modules do not form an import cycle.
It is re-exported by :mod:`app_client.app` and :mod:`app_client`, its public import paths.
"""

from __future__ import annotations

import enum

__all__ = ["ConnectionState"]


class ConnectionState(enum.Enum):
    """Where the app's connection to the daemon stands."""

    #: Not running (before :meth:`App.run` and after it ends).
    DISCONNECTED = "disconnected"
    #: Running, first attempt in progress.
    CONNECTING = "connecting"
    #: Registered; tools are available to agents.
    CONNECTED = "connected"
    #: The connection was lost or an attempt failed; retrying with backoff.
    RECONNECTING = "reconnecting"
    #: The daemon refused the token; retrying with backoff, re-reading the token file.
    UNAUTHORIZED = "unauthorized"
    #: The daemon refused the registration for good; :meth:`App.run` raised.
    FAILED = "failed"
