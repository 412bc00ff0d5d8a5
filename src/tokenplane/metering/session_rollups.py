"""Per-session rollups: one row per (tenant, session, currency), upserted by both sinks
in the transaction that inserts the events (only those it inserted), like the usage
rollups. ``tokenplane usage sessions`` and ``GET /admin/v1/sessions`` read this table,
never the raw events; a session's waterfall reads its events (indexed by tenant and
session)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tokenplane.metering.events import UsageEvent

# the measures of the session_rollups table (migration 6)
SESSION_MEASURES: tuple[str, ...] = (
    "requests", "steps", "errors", "input_tokens", "output_tokens", "tool_output_added",
    "tool_calls", "cost_micros",
)
SESSION_KEY: tuple[str, ...] = ("tenant", "session_id", "currency")
SESSION_COLUMNS: tuple[str, ...] = (*SESSION_KEY, "app", *SESSION_MEASURES, "max_step",
                                    "first_ts", "last_ts")

SessionRow = tuple[Any, ...]


def session_rows(events: Iterable[UsageEvent]) -> list[SessionRow]:
    """Sums per session of the events that name one, sorted by key (lock order)."""
    acc: dict[tuple[str, str, str], list[Any]] = {}
    for ev in events:
        if not ev.session_id:
            continue
        key = (ev.tenant, ev.session_id, ev.currency)
        values = [
            1, 1 if ev.attempt == 0 else 0, 0 if ev.status == "ok" else 1,
            ev.input_tokens, ev.output_tokens, ev.tool_output_added, ev.tool_calls,
            ev.cost_micros,
        ]
        start = ev.arrival_ts if ev.arrival_ts is not None else ev.ts
        cur = acc.get(key)
        if cur is None:
            acc[key] = [ev.app, *values, ev.session_step or 0, start, ev.ts]
            continue
        for i, v in enumerate(values, start=1):
            cur[i] += v
        n = len(values)
        cur[n + 1] = max(cur[n + 1], ev.session_step or 0)
        cur[n + 2] = min(cur[n + 2], start)
        cur[n + 3] = max(cur[n + 3], ev.ts)
    return [(*key, *vals) for key, vals in sorted(acc.items())]


def upsert_sessions_sql(placeholder: Callable[[int], str], source: str | None = None) -> str:
    """Upsert of one session row; with ``source`` (a SELECT), of all the rows it yields.
    The app is the one of the session's first write."""
    cols = ", ".join(SESSION_COLUMNS)
    values = ", ".join(placeholder(i) for i in range(len(SESSION_COLUMNS)))
    rows = f"VALUES ({values})" if source is None else source
    t = "session_rollups"
    sums = ", ".join(f"{m} = {t}.{m} + excluded.{m}" for m in SESSION_MEASURES)
    return (
        f"INSERT INTO {t} ({cols}) {rows} "
        f"ON CONFLICT ({', '.join(SESSION_KEY)}) DO UPDATE SET {sums}, "
        f"max_step = CASE WHEN excluded.max_step > {t}.max_step "
        f"THEN excluded.max_step ELSE {t}.max_step END, "
        f"first_ts = CASE WHEN excluded.first_ts < {t}.first_ts "
        f"THEN excluded.first_ts ELSE {t}.first_ts END, "
        f"last_ts = CASE WHEN excluded.last_ts > {t}.last_ts "
        f"THEN excluded.last_ts ELSE {t}.last_ts END"
    )
