"""The sessions of 2026-07-28 requests over HTTP: one per request, reused once idle.

Theory of operation
-------------------
A 2026-07-28 request carries everything about its client in its own ``_meta``: over HTTP it
runs in a session of its own (``session.open_session``, ``stateful=False``) that serves that
one request. Opening one (a nursery, a :class:`~broker.mcp.session.Session`, its
resource-update registration) and closing it cost about as much as the rest of the
daemon's own work on a call, so a session that has served its request and is left as it
started -- no request in flight, no task in its nursery (no disconnect watcher, elicitation,
listen stream or late answer) -- goes back to a pool and serves a later request with the
same mode (plain, discovery, code), the same one-app scope and the same token; anything else
is closed exactly as before. Only 2026-07-28 methods reach these sessions (``http`` routes
every other request to a handshake-era session), and none of them leaves state in its
session: a pooled session is indistinguishable from a new one to the next request. The
token's name is part of the key, so a session (its principal, whose request states and
large-result links it may redeem) never passes between tokens; the gate checks the token on
every request before a session is taken.

At most :data:`MAX_IDLE` sessions wait in the pool (the oldest goes); each is a task in the
pool's nursery, which :meth:`StatelessSessions.run` hosts beside the deadline queue that
every one of their calls shares (no deadline task per session). While ``run`` is not running
(an ``HttpApp`` driven without ``serve_http``: tests), :meth:`StatelessSessions.take` gives
None and the caller opens a session of its own.
"""

from __future__ import annotations

from typing import Final

import trio

from ..core.calls import DeadlineQueue
from .server import McpServer
from .session import Session, open_session

__all__ = ["StatelessSessions", "MAX_IDLE"]

#: Idle sessions kept for reuse, over every mode, scope and token.
MAX_IDLE: Final = 64

#: What a session serves: discovery mode, code mode, the one-app scope, the token's name.
_Key = tuple[bool, bool, str | None, str | None]


class StatelessSessions:
    """The pool of idle stateless sessions (see the module docstring)."""

    def __init__(self, server: McpServer, *, limit: int = MAX_IDLE) -> None:
        self.server = server
        self.limit = limit
        self._nursery: trio.Nursery | None = None
        self._deadlines: DeadlineQueue | None = None
        #: Idle sessions, oldest first, with their keys; and the same by key.
        self._idle: dict[Session, _Key] = {}
        self._by_key: dict[_Key, list[Session]] = {}
        #: Every session of the pool's, idle or serving a request, with its key.
        self._keys: dict[Session, _Key] = {}

    def __len__(self) -> int:
        return len(self._idle)

    async def run(self) -> None:
        """Host the pool's sessions and their calls' deadline queue until cancelled."""
        deadlines = DeadlineQueue(self.server.router.expire)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery, self._deadlines = nursery, deadlines
                await deadlines.run()
        finally:
            self._nursery = self._deadlines = None
            self._idle.clear()
            self._by_key.clear()
            self._keys.clear()

    async def take(self, *, discovery: bool, code: bool, app: str | None, token: str | None) -> Session | None:
        """An idle session for this, or a new one; None while :meth:`run` is not running."""
        nursery = self._nursery
        if nursery is None:
            return None
        key = (discovery, code, app, token)
        idle = self._by_key.get(key)
        while idle:
            session = idle.pop()
            del self._idle[session]
            if not session.closed.is_set():
                return session
        try:
            started: Session = await nursery.start(self._run, key)
        except RuntimeError:  # the pool is stopping (the daemon is): no new sessions in it
            return None
        return started

    def give_back(self, session: Session, *, reusable: bool) -> None:
        """``session`` has served its request: back to the pool if ``reusable`` and it is
        idle (nothing in flight, no task), else closed (its calls and tasks end)."""
        if not reusable or session.busy or session.closed.is_set() or self._nursery is None:
            session.close()
            return
        if len(self._idle) >= self.limit:
            oldest = next(iter(self._idle))
            self._forget(oldest)
            oldest.close()
        key = self._keys[session]
        self._idle[session] = key
        self._by_key.setdefault(key, []).append(session)

    def _forget(self, session: Session) -> None:
        key = self._idle.pop(session, None)
        if key is not None:
            self._by_key[key].remove(session)
            if not self._by_key[key]:
                del self._by_key[key]

    async def _run(self, key: _Key, *, task_status: trio.TaskStatus[Session]) -> None:
        discovery, code, app, token = key
        async with open_session(self.server, transport="http", stateful=False, discovery=discovery, code=code,
                                app=app, principal=f"token:{token}", token=token,
                                deadlines=self._deadlines) as session:
            self._keys[session] = key
            try:
                task_status.started(session)
                await session.closed.wait()
            finally:
                self._forget(session)
                self._keys.pop(session, None)
