"""Rollups: per-minute/hour/day sums by tenant, department, app, model, key, currency.

Both sinks compute rollup deltas here, in Python, from the events a transaction
actually inserted (never from events it skipped as duplicates), and upsert them in
that same transaction with ``... ON CONFLICT DO UPDATE SET x = x + excluded.x``.
Rows are sorted by key so concurrent writers touch rollup rows in the same order
(no deadlocks on PostgreSQL). Reports read these tables, never the raw events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import add
from typing import Any

from tokenplane.metering.events import UsageEvent
from tokenplane.metering.outcomes import OUTCOMES, outcome_of

GRAINS: dict[str, int] = {"minute": 60, "hour": 3600, "day": 86400}
DIMENSIONS: tuple[str, ...] = ("tenant", "department", "app", "model", "key_id", "currency")
MEASURES: tuple[str, ...] = (
    "requests",
    "errors",
    "input_tokens",
    "cached_input_tokens",
    "cache_write_tokens",
    "output_tokens",
    "reasoning_tokens",
    "input_system",
    "input_history",
    "input_context",
    "input_tools",
    "input_user",
    "estimated_input_tokens",
    "cost_micros",
    "refused",
    "refused_input_tokens",
    *OUTCOMES,  # migration 12: what became of the requests that did not end ok
)
ROLLUP_KEY: tuple[str, ...] = ("grain", "bucket", *DIMENSIONS)
ROLLUP_COLUMNS: tuple[str, ...] = (*ROLLUP_KEY, *MEASURES)

FINGERPRINT_KEY: tuple[str, ...] = ("tenant", "app", "fingerprint")
FINGERPRINT_COLUMNS: tuple[str, ...] = (
    *FINGERPRINT_KEY,
    "requests",
    "system_tokens",
    "first_ts",
    "last_ts",
)

RollupRow = tuple[object, ...]


def measures_of(event: UsageEvent) -> tuple[int, ...]:
    """The event's measures. A request that never reached an upstream (refused by
    admission or a guard, cancelled while queued) counts in ``refused`` with its prompt
    estimate in ``refused_input_tokens``, not in ``estimated_input_tokens``, which sums
    the gateway's count of prompts that ran (comparable to ``input_tokens``). A request
    that did not end ok also counts in one of ``OUTCOMES`` (``metering/outcomes.py``)."""
    ran = event.upstream_start_ts is not None
    kind = outcome_of(event.status, event.http_status, ran)
    return (
        1,
        0 if event.status == "ok" else 1,
        event.input_tokens,
        event.cached_input_tokens,
        event.cache_write_tokens,
        event.output_tokens,
        event.reasoning_tokens,
        event.input_system,
        event.input_history,
        event.input_context,
        event.input_tools,
        event.input_user,
        event.estimated_input_tokens if ran else 0,
        event.cost_micros,
        0 if ran else 1,
        0 if ran else event.estimated_input_tokens,
        *(1 if kind == k else 0 for k in OUTCOMES),
    )


def rollup_rows(events: Iterable[UsageEvent]) -> list[RollupRow]:
    """One row per (grain, bucket, dimensions) with the summed measures, sorted.

    Sums per minute first; hours are sums of minutes and days sums of hours.
    """
    minutes: dict[tuple[Any, ...], list[int]] = {}
    for ev in events:
        key = (
            int(ev.ts) // 60 * 60,
            ev.tenant,
            ev.department,
            ev.app,
            ev.model,
            ev.key_id,
            ev.currency,
        )
        acc = minutes.get(key)
        values = measures_of(ev)
        minutes[key] = list(values) if acc is None else list(map(add, acc, values))
    rows: list[RollupRow] = []
    level = minutes
    for grain, width in GRAINS.items():
        if grain != "minute":
            coarser: dict[tuple[Any, ...], list[int]] = {}
            for (bucket, *dims), acc in level.items():
                key = (bucket // width * width, *dims)
                cur = coarser.get(key)
                coarser[key] = acc if cur is None else list(map(add, cur, acc))
            level = coarser
        rows.extend((grain, *key, *vals) for key, vals in level.items())
    rows.sort()
    return rows


def fingerprint_rows(events: Iterable[UsageEvent]) -> list[RollupRow]:
    """Per (tenant, app, system fingerprint): requests, system tokens, first/last seen."""
    acc: dict[tuple[str, str, str], list[float]] = {}
    for ev in events:
        if not ev.system_fingerprint:
            continue
        key = (ev.tenant, ev.app, ev.system_fingerprint)
        cur = acc.get(key)
        if cur is None:
            acc[key] = [1, ev.input_system, ev.ts, ev.ts]
        else:
            cur[0] += 1
            cur[1] += ev.input_system
            cur[2] = min(cur[2], ev.ts)
            cur[3] = max(cur[3], ev.ts)
    return [(*key, int(v[0]), int(v[1]), v[2], v[3]) for key, v in sorted(acc.items())]


def upsert_rollups_sql(placeholder: Callable[[int], str], source: str | None = None) -> str:
    """Upsert of one rollup row; with ``source`` (a SELECT), of all the rows it yields."""
    cols = ", ".join(ROLLUP_COLUMNS)
    values = ", ".join(placeholder(i) for i in range(len(ROLLUP_COLUMNS)))
    rows = f"VALUES ({values})" if source is None else source
    sets = ", ".join(f"{m} = usage_rollups.{m} + excluded.{m}" for m in MEASURES)
    return (
        f"INSERT INTO usage_rollups ({cols}) {rows} "
        f"ON CONFLICT ({', '.join(ROLLUP_KEY)}) DO UPDATE SET {sets}"
    )


def upsert_fingerprints_sql(placeholder: Callable[[int], str], source: str | None = None) -> str:
    cols = ", ".join(FINGERPRINT_COLUMNS)
    values = ", ".join(placeholder(i) for i in range(len(FINGERPRINT_COLUMNS)))
    rows = f"VALUES ({values})" if source is None else source
    t = "system_fingerprints"
    return (
        f"INSERT INTO {t} ({cols}) {rows} "
        f"ON CONFLICT ({', '.join(FINGERPRINT_KEY)}) DO UPDATE SET "
        f"requests = {t}.requests + excluded.requests, "
        f"system_tokens = {t}.system_tokens + excluded.system_tokens, "
        f"first_ts = CASE WHEN excluded.first_ts < {t}.first_ts "
        f"THEN excluded.first_ts ELSE {t}.first_ts END, "
        f"last_ts = CASE WHEN excluded.last_ts > {t}.last_ts "
        f"THEN excluded.last_ts ELSE {t}.last_ts END"
    )
