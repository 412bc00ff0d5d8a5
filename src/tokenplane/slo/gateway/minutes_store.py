"""The ``slo_minutes`` table (ledger migration 8): the SLIs' sealed minutes
(``slo/minutes.py``), in the ledger database every gateway replica reads."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tokenplane.metering.stores.base import LedgerSink
from tokenplane.slo.minutes import Minute

_COLUMNS = "slo_key, slo, sli, version, minute, valid, bad"
_CHUNK = 400  # rows per INSERT (7 parameters each: under SQLite's 32,766)


class MinuteStore:
    def __init__(self, sink: Callable[[], LedgerSink]) -> None:
        self.sink = sink

    async def read(self, keys: Sequence[str], first: int) -> list[Minute]:
        """The stored minutes of these definitions from bucket ``first`` on."""
        if not keys:
            return []
        marks = ", ".join("?" for _ in keys)
        rows = await self.sink().fetch(
            f"SELECT {_COLUMNS} FROM slo_minutes WHERE slo_key IN ({marks}) AND minute >= ?",
            [*keys, first])
        return [Minute(str(r["slo_key"]), str(r["slo"]), str(r["sli"]), str(r["version"]),
                       int(r["minute"]), int(r["valid"]), int(r["bad"])) for r in rows]

    async def write(self, minutes: Sequence[Minute]) -> None:
        """Upsert whole minutes (their counts replace what was there: every replica
        writes the same final counts)."""
        for i in range(0, len(minutes), _CHUNK):
            chunk = minutes[i:i + _CHUNK]
            values = ", ".join("(?, ?, ?, ?, ?, ?, ?)" for _ in chunk)
            params: list[object] = []
            for m in chunk:
                params += [m.key, m.slo, m.sli, m.version, m.minute, m.valid, m.bad]
            await self.sink().execute(
                f"INSERT INTO slo_minutes ({_COLUMNS}) VALUES {values} "
                "ON CONFLICT (slo_key, version, minute) DO UPDATE SET "
                "valid = excluded.valid, bad = excluded.bad", params)

    async def prune(self, before: int) -> int:
        """Forget minutes older than bucket ``before``."""
        return await self.sink().execute("DELETE FROM slo_minutes WHERE minute < ?", [before])
