"""A sink that opens its database on first use, so a gateway can start without it.

When the ledger database is unreachable at start, the ``Meter`` still journals every
event; the flusher's writes go through this wrapper, which tries to open the real
sink on each call and fails (to be retried with back-off) until the database is back.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

from tokenplane.metering.events import UsageEvent
from tokenplane.metering.stores.base import LedgerSink
from tokenplane.metering.stores.open import is_postgres_url, open_sink


class DeferredSink:
    def __init__(self, target: str | os.PathLike[str], **options: Any) -> None:
        self.target = target
        self.options = options
        self.dialect = "postgres" if is_postgres_url(os.fspath(target)) else "sqlite"
        self._inner: LedgerSink | None = None
        self._opening = asyncio.Lock()

    @property
    def opened(self) -> bool:
        return self._inner is not None

    async def inner(self) -> LedgerSink:
        async with self._opening:
            if self._inner is None:
                self._inner = await open_sink(self.target, **self.options)
            return self._inner

    async def write(self, batch: list[UsageEvent]) -> int:
        return await (await self.inner()).write(batch)

    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        return await (await self.inner()).fetch(sql, params)

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return await (await self.inner()).execute(sql, params)

    async def record_price_table(self, version: str, currency: str, table: bytes) -> None:
        await (await self.inner()).record_price_table(version, currency, table)

    async def close(self) -> None:
        if self._inner is not None:
            await self._inner.close()
            self._inner = None
