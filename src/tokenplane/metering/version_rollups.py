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


def latency_us(ev: UsageEvent) -> tuple[int, int, int, int] | None:
    """(queue, gateway, ttft, decode) in microseconds; None without the timings."""
    arrival, start = ev.arrival_ts, ev.upstream_start_ts
    if arrival is None or start is None:
        return None
    end = ev.last_token_ts if ev.last_token_ts is not None else ev.ts
    first = ev.first_token_ts if ev.first_token_ts is not None else end
    before = max(0.0, start - arrival)
    queue = min(before, max(0.0, ev.queue_wait_s or 0.0))
    gateway = before - queue + max(0.0, ev.ts - end)
    return (round(queue * 1e6), round(gateway * 1e6), round(max(0.0, first - start) * 1e6),
            round(max(0.0, end - first) * 1e6))


def version_measures(ev: UsageEvent) -> list[int]:
    parts = latency_us(ev)
    return [1, 0 if ev.status == "ok" else 1, ev.input_tokens, ev.output_tokens,
            ev.cost_micros, 0 if parts is None else 1, *(parts or (0, 0, 0, 0))]


def version_rows(events: Iterable[UsageEvent]) -> list[tuple[object, ...]]:
    """The hour and day rows of the attempts that ran, sorted (lock order)."""
    hours: dict[tuple[Any, ...], list[int]] = {}
    for ev in events:
        if ev.upstream_start_ts is None:
            continue
        key = (int(ev.ts) // 3600 * 3600, ev.tenant, ev.department, ev.app, ev.model,
               ev.model_version or "", ev.currency)
        values = version_measures(ev)
        acc = hours.get(key)
        hours[key] = values if acc is None else list(map(add, acc, values))
    days: dict[tuple[Any, ...], list[int]] = {}
    for (bucket, *dims), values in hours.items():
        key = (bucket // 86400 * 86400, *dims)
        acc = days.get(key)
        days[key] = values if acc is None else list(map(add, acc, values))
    rows = [("hour", *k, *v) for k, v in hours.items()]
    rows += [("day", *k, *v) for k, v in days.items()]
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
