"""Finished requests from the ledger: the last attempt of each request that ended in
a time range (what the client finally got), for SLO evaluation and replay."""

from __future__ import annotations

from tokenplane.metering.events import UsageEvent
from tokenplane.metering.stores.base import LedgerSink, row_event

_LAST_ATTEMPTS = """
SELECT e.* FROM usage_events e
WHERE e.ts >= ? AND e.ts < ?
  AND e.attempt = (SELECT MAX(x.attempt) FROM usage_events x WHERE x.request_id = e.request_id)
ORDER BY e.ts
"""


async def last_attempts(sink: LedgerSink, since: float, until: float) -> list[UsageEvent]:
    rows = await sink.fetch(_LAST_ATTEMPTS, [since, until])
    return [row_event(r) for r in rows]
