"""The handshake-era (2025-11-25 and older) HTTP sessions: how many, whose, and which one goes.

Theory of operation
-------------------
A legacy session lives from ``initialize`` until its client sends ``DELETE``, it is evicted,
or it expires; its GET stream (``list_changed``, resource updates) is open for as long as the
client keeps it. The table holds at most :data:`MAX_SESSIONS` of them, so room has to be made:

* a new session when the table is full evicts the *idle* session (nothing in flight) whose
  client was heard from least recently, one without a GET stream first. A session with an open
  stream is evictable too: an open stream costs its client nothing, so 256 of them used to
  lock every new session out for as long as their connections lasted. Its stream ends; its
  client gets 404 at its next request and starts a new session, as the specification says;
* one token holds at most :data:`MAX_STREAMS_PER_TOKEN` GET streams: the next one evicts that
  token's least recently heard idle streaming session (429 when all of them have calls in
  flight), so one client (or one leaking client) cannot hold every stream and push everyone
  else's sessions out through the full table;
* sessions without a stream that nobody used for :data:`SESSION_IDLE_SECONDS` expire.

"Heard from" is the session's ``last_activity``: its last request, not the keep-alives its
stream gets. A session with calls in flight is never evicted (its calls would lose their
answers); when every session has calls in flight a new one gets 503.
"""

from __future__ import annotations

from typing import Final

import attrs
import structlog
import trio

from .session import Session

__all__ = ["MAX_SESSIONS", "MAX_STREAMS_PER_TOKEN", "SESSION_IDLE_SECONDS", "HttpSession", "SessionTable"]

log = structlog.get_logger("toolbridge.http")

MAX_SESSIONS: Final = 256
#: Open GET streams one token may hold (a quarter of the table).
MAX_STREAMS_PER_TOKEN: Final = 64
#: Legacy sessions with nothing in flight and no GET stream are dropped after this long.
SESSION_IDLE_SECONDS: Final = 3600.0


@attrs.define(eq=False)
class HttpSession:
    id: str
    session: Session
    streaming: bool = False


class SessionTable:
    """The legacy sessions by id, with the eviction rules of the module docstring."""

    def __init__(self, *, max_sessions: int = MAX_SESSIONS, max_streams_per_token: int = MAX_STREAMS_PER_TOKEN) -> None:
        self.max_sessions = max_sessions
        self.max_streams_per_token = max_streams_per_token
        self._entries: dict[str, HttpSession] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, session_id: str) -> HttpSession | None:
        return self._entries.get(session_id)

    def add(self, session_id: str, session: Session) -> None:
        self._entries[session_id] = HttpSession(session_id, session)

    def remove(self, session_id: str) -> HttpSession | None:
        return self._entries.pop(session_id, None)

    def make_room(self) -> bool:
        """Room for one more session: True at once below the cap, else after evicting the
        idle session heard from least recently (streamless ones first); False when every
        session has calls in flight."""
        if len(self._entries) < self.max_sessions:
            return True
        idle = [e for e in self._entries.values() if e.session.in_flight == 0]
        if not idle:
            return False
        self._evict(min(idle, key=lambda e: (e.streaming, e.session.last_activity)), "table full")
        return True

    def make_stream_room(self, entry: HttpSession) -> bool:
        """Room for ``entry``'s GET stream within its token's share: True when there is (after
        evicting that token's least recently heard idle streaming session, if it had to);
        False when every one of that token's streams has calls in flight."""
        token = entry.session.token
        streams = [e for e in self._entries.values() if e.streaming and e.session.token == token and e is not entry]
        if len(streams) < self.max_streams_per_token:
            return True
        idle = [e for e in streams if e.session.in_flight == 0]
        if not idle:
            return False
        self._evict(min(idle, key=lambda e: e.session.last_activity), "token's streams")
        return True

    def _evict(self, entry: HttpSession, reason: str) -> None:
        log.info("http_session_evicted", session=entry.session.label, reason=reason, streaming=entry.streaming)
        entry.session.close()  # ends its GET stream too
        del self._entries[entry.id]

    async def expire_idle(self) -> None:
        """Drop legacy sessions nobody has used for a long time (clients that never DELETE)."""
        while True:
            await trio.sleep(min(60.0, SESSION_IDLE_SECONDS / 4))
            now = trio.current_time()
            for entry in list(self._entries.values()):
                session = entry.session
                idle = now - session.last_activity
                if not entry.streaming and session.in_flight == 0 and idle > SESSION_IDLE_SECONDS:
                    log.info("http_session_expired", session=session.label)
                    session.close()
                    self._entries.pop(entry.id, None)
