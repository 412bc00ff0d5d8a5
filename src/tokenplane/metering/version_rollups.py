"""Rollups per model version, with where each request's time went (the console's
Versions page and the Overview's latency per model read them, never raw events).

One row per (grain, bucket, tenant, department, app, model, model version, currency)
for the hour and day grains, written by both sinks in the transaction that inserts
the events, like ``usage_rollups``. Only attempts that reached an upstream count
(a refused request has no version and no engine time). Times are summed in whole
microseconds over the ``timed`` attempts (those with an arrival time):

- ``queue_us``: waiting at the gateway (the scheduler's queue, ``queue_wait_s``);
- ``gateway_us``: the gateway's own work before the upstream call (auth, counting,
  guards, admission, routing) and after the last token (finishers);
- ``ttft_us``: the upstream call's start to its first token (the engine's TTFT);
- ``decode_us``: the first token to the last one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import add
from typing import Any

from tokenplane.metering.events import UsageEvent

VERSION_GRAINS: dict[str, int] = {"hour": 3600, "day": 86400}
VERSION_DIMENSIONS: tuple[str, ...] = (
    "tenant", "department", "app", "model", "model_version", "currency")
VERSION_MEASURES: tuple[str, ...] = (
    "requests", "errors", "input_tokens", "output_tokens", "cost_micros",
    "timed", "queue_us", "gateway_us", "ttft_us", "decode_us",
)
VERSION_KEY: tuple[str, ...] = ("grain", "bucket", *VERSION_DIMENSIONS)
VERSION_COLUMNS: tuple[str, ...] = (*VERSION_KEY, *VERSION_MEASURES)
LATENCY_PARTS: tuple[str, ...] = ("queue_us", "gateway_us", "ttft_us", "decode_us")


def version_rows(events: Iterable[UsageEvent]) -> list[tuple[object, ...]]:
    """The hour and day rows of the attempts that ran, sorted (lock order).

    One pass, no call per event (the flusher runs it on every batch): counts and
    tokens are summed as integers, the four times as float seconds, turned into whole
    microseconds once per row."""
    hours: dict[tuple[Any, ...], list[Any]] = {}
    for ev in events:
        start = ev.upstream_start_ts
        if start is None:
            continue
        key = (int(ev.ts) // 3600 * 3600, ev.tenant, ev.department, ev.app, ev.model,
               ev.model_version or "", ev.currency)
        acc = hours.get(key)
        if acc is None:
            acc = hours[key] = [0, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0]
        acc[0] += 1
        if ev.status != "ok":
            acc[1] += 1
        acc[2] += ev.input_tokens
        acc[3] += ev.output_tokens
        acc[4] += ev.cost_micros
        arrival = ev.arrival_ts
        if arrival is None:
            continue
        ts = ev.ts
        end = ev.last_token_ts if ev.last_token_ts is not None else ts
        first = ev.first_token_ts if ev.first_token_ts is not None else end
        before = start - arrival if start > arrival else 0.0
        queue = ev.queue_wait_s or 0.0
        queue = before if queue > before else (queue if queue > 0.0 else 0.0)
        acc[5] += 1
        acc[6] += queue
        acc[7] += before - queue + (ts - end if ts > end else 0.0)
        acc[8] += first - start if first > start else 0.0
        acc[9] += end - first if end > first else 0.0
    days: dict[tuple[Any, ...], list[Any]] = {}
    for (bucket, *dims), values in hours.items():
        key = (bucket // 86400 * 86400, *dims)
        acc = days.get(key)
        days[key] = list(values) if acc is None else list(map(add, acc, values))
    rows = [(grain, *k, *v[:6], *(round(x * 1e6) for x in v[6:]))
            for grain, level in (("hour", hours), ("day", days)) for k, v in level.items()]
    rows.sort()
    return rows


def upsert_version_rollups_sql(placeholder: Callable[[int], str],
                               source: str | None = None) -> str:
    """Upsert of one version row; with ``source`` (a SELECT), of all its rows."""
    cols = ", ".join(VERSION_COLUMNS)
    values = ", ".join(placeholder(i) for i in range(len(VERSION_COLUMNS)))
    rows = f"VALUES ({values})" if source is None else source
    sets = ", ".join(f"{m} = version_rollups.{m} + excluded.{m}" for m in VERSION_MEASURES)
    return (f"INSERT INTO version_rollups ({cols}) {rows} "
            f"ON CONFLICT ({', '.join(VERSION_KEY)}) DO UPDATE SET {sets}")
