"""The connection the advisor's long reads use in a gateway.

Summing every tenant's month of advice rollups takes the database up to a couple of
seconds. A SQLite sink runs every statement on its one thread, in turn: a computation
there would hold the meter's flusher and every console page's queries until it ends.
So the gateway's advice documents read through a second SQLite connection on a thread
of its own (the ledger is in WAL mode: a reader neither waits for the writer nor holds
it); PostgreSQL's sink is a pool, and is used as it is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tokenplane.metering.stores.base import LedgerSink
from tokenplane.metering.stores.sqlite import SqliteSink


class AdviceReader:
    """The sink the advice computations read through (opened when first needed)."""

    def __init__(self, sink: Callable[[], LedgerSink]) -> None:
        self.sink = sink
        self._own: SqliteSink | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> LedgerSink:
        shared = self.sink()
        if not isinstance(shared, SqliteSink):
            return shared
        async with self._lock:
            if self._own is None or self._own.path != shared.path:
                if self._own is not None:
                    await self._own.close()
                self._own = await SqliteSink.open(shared.path)
                await self._own.fetch("PRAGMA query_only = 1")  # it only ever reads
            return self._own

    async def close(self) -> None:
        async with self._lock:
            if self._own is not None:
                await self._own.close()
                self._own = None
