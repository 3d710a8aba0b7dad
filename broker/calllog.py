"""The call log (placeholder until the SQLite log lands): records nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from .config import Settings


class CallLog:
    def record(self, **fields: Any) -> None:
        pass


@asynccontextmanager
async def open_call_log(settings: Settings) -> AsyncIterator[CallLog | None]:
    yield None
