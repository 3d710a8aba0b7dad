"""What the core needs of the transports: the :class:`AppPort` an app instance is reached by.

Theory of operation
-------------------
The core (registry, correlation map, router) never imports the daemon that owns the
connections. An app's link is, to the core, an :class:`AppPort`: an id (to tell which link a
call went out on), a label (for messages), a way to queue a message that a full queue cannot
drop (invocations are bounded by admission, cancels by the calls sent), and ``replaced()``,
called when a new registration takes its instance over. ``broker.daemon.links.AppLink`` is
the one implementation; tests may pass their own.
"""

from __future__ import annotations

from typing import Protocol

from app_client.protocol import Message

__all__ = ["AppPort"]


class AppPort(Protocol):
    """One live connection to an app instance, as the core sees it."""

    @property
    def id(self) -> int:
        """The connection's id, unique for the daemon's life."""
        ...

    @property
    def label(self) -> str:
        """The instance's label (``WatchTower_2``), for messages."""
        ...

    def send_reliable_nowait(self, message: Message) -> bool:
        """Queue ``message`` past the queue's limit; False if the link is closing or closed."""
        ...

    def replaced(self) -> None:
        """A new registration of the same instance took over: fail this link's calls, close it."""
        ...
