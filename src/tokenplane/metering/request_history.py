"""Finished requests from the ledger: the last attempt of each request that ended in
a time range (what the client finally got), for SLO evaluation and replay."""

from __future__ import annotations

from typing import Any

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


# What an SLI needs of a row (slo.facts): read alone, and without the last-attempt
# subquery (the SLO feed keeps each request's highest attempt itself), this is the
# cheap read of the gateway's repeated evaluation rounds.
SLO_COLUMNS = ("request_id", "attempt", "ts", "model", "tenant", "department", "app",
               "slo_class", "status", "http_status", "error_code", "stream", "arrival_ts",
               "first_token_ts", "last_token_ts", "output_tokens", "model_version")
_SLO_ROWS = f"""
SELECT {", ".join(SLO_COLUMNS)} FROM usage_events
WHERE ts >= ? AND ts < ?
ORDER BY ts
"""


async def slo_rows(sink: LedgerSink, since: float, until: float) -> list[dict[str, Any]]:
    """Every attempt that ended in ``[since, until)``, only the columns SLOs read."""
    return await sink.fetch(_SLO_ROWS, [since, until])


# the whole second of ts, rounded down in both stores (SQLite's CAST truncates,
# PostgreSQL's rounds): the minute is that second // 60
_SECOND = "(CAST(ts AS BIGINT) - CASE WHEN CAST(ts AS BIGINT) > ts THEN 1 ELSE 0 END)"
_DEMAND = f"""
SELECT model, {_SECOND} / 60 AS minute,
       SUM(input_tokens - cached_input_tokens) AS prompt, SUM(output_tokens) AS output
FROM usage_events
WHERE ts >= ? AND ts < ?
GROUP BY model, {_SECOND} / 60
ORDER BY minute
"""


async def demand_by_minute(sink: LedgerSink, since: float,
                           until: float) -> list[dict[str, Any]]:
    """Per model alias and minute (``minute`` = epoch seconds // 60) that ended in
    ``[since, until)``: uncached prompt tokens and output tokens of every attempt (the
    autoscaler's forecaster learns its times of day from them)."""
    return await sink.fetch(_DEMAND, [since, until])
