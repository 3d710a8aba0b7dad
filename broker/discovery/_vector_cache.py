"""Tool embeddings kept on disk, so a restarted daemon does not embed its tools again.

Theory of operation
-------------------
Embedding a tool costs ~21 ms of one core (the semantic extra's model, batched or not), so
10,000 tools take minutes; the same tools come back after every restart. :class:`VectorCache`
is one SQLite file in the daemon's home (``embeddings.sqlite3``, owner-only like every file
there) mapping a key to a float32 vector. The key is a hash of the model's identity (package,
version, model name: a new model never reads an old model's vectors) and the exact text that
was embedded (a changed description is a new key), so nothing needs invalidating: a stale
entry is simply never asked for again. The file holds at most :data:`MAX_ROWS` vectors (the
oldest are deleted beyond that, ~1.6 KB each: ~160 MB at most), and a corrupt or unwritable
file only means embedding again (the error is logged once, by kind, never with tool text).

It is used from the background embedding thread and from searches that find a candidate not
yet embedded; one lock serialises its connection. Never from the event loop.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

import structlog

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vector = npt.NDArray[np.float32]

__all__ = ["VectorCache", "CACHE_FILE", "MAX_ROWS"]

CACHE_FILE: Final = "embeddings.sqlite3"
#: At most this many vectors are kept (the oldest go first).
MAX_ROWS: Final = 100_000

log = structlog.get_logger("toolbridge.discovery")


class VectorCache:
    """Vectors by (model identity, text) in one SQLite file; thread-safe; failures mean misses."""

    def __init__(self, path: Path, model_id: str, *, max_rows: int = MAX_ROWS) -> None:
        self.path = path
        self._model = model_id.encode()
        self._max_rows = max_rows
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._broken = False

    def _key(self, text: str) -> bytes:
        return hashlib.blake2b(self._model + b"\0" + text.encode(), digest_size=16).digest()

    def _connect(self) -> sqlite3.Connection | None:  # with self._lock held
        if self._db is None and not self._broken:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)  # owner-only from the start
                os.close(fd)
                db = sqlite3.connect(self.path, check_same_thread=False, timeout=1.0)
                db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL)")
                db.commit()
                self._db = db
            except (OSError, sqlite3.Error) as exc:
                self._fail(exc)
        return self._db

    def _fail(self, exc: BaseException) -> None:
        if not self._broken:
            log.warning("embedding_cache_off", error=type(exc).__name__, path=str(self.path))
        self._broken = True
        if self._db is not None:
            self._db.close()
            self._db = None

    def get_many(self, texts: Sequence[str], dim: int | None = None) -> dict[str, Vector]:
        """The cached vectors of ``texts`` (those not cached are missing from the answer)."""
        import numpy as np

        out: dict[str, Vector] = {}
        with self._lock:
            db = self._connect()
            if db is None or not texts:
                return out
            try:
                for text in texts:
                    row = db.execute("SELECT vector FROM vectors WHERE key = ?", (self._key(text),)).fetchone()
                    if row is not None:
                        vector = np.frombuffer(row[0], dtype=np.float32)
                        if dim is None or vector.shape[0] == dim:
                            out[text] = vector
            except sqlite3.Error as exc:
                self._fail(exc)
        return out

    def put_many(self, items: Sequence[tuple[str, Vector]]) -> None:
        """Store ``(text, vector)`` pairs, then trim the file to :attr:`max_rows`."""
        import numpy as np

        with self._lock:
            db = self._connect()
            if db is None or not items:
                return
            try:
                db.executemany("INSERT OR REPLACE INTO vectors (key, vector) VALUES (?, ?)",
                               [(self._key(text), np.asarray(v, dtype=np.float32).tobytes()) for text, v in items])
                db.execute("DELETE FROM vectors WHERE rowid <= (SELECT MAX(rowid) FROM vectors) - ?",
                           (self._max_rows,))
                db.commit()
            except sqlite3.Error as exc:
                self._fail(exc)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
