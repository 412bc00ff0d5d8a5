"""What the day rollups beside the usage rollups share: events summed per key (sorted,
the sinks' lock order), and the upsert that adds a batch's sums to a table's rows."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tokenplane.metering.events import UsageEvent

DAY_S = 86400


def day(ts: float) -> int:
    """The start of the UTC day of ``ts`` (the rollups' bucket)."""
    return int(ts) // DAY_S * DAY_S


def sums_by_key(events: Iterable[UsageEvent], key: Callable[[UsageEvent], tuple[Any, ...]],
                measures: Callable[[UsageEvent], list[int]]) -> list[tuple[Any, ...]]:
    """``(*key, *measures)`` per key of the events, the measures summed, sorted by key."""
    acc: dict[tuple[Any, ...], list[int]] = {}
    for ev in events:
        k = key(ev)
        values = measures(ev)
        cur = acc.get(k)
        if cur is None:
            acc[k] = values
        else:
            for i, v in enumerate(values):
                cur[i] += v
    return [(*k, *vals) for k, vals in sorted(acc.items())]


def upsert_sums_sql(table: str, key: Sequence[str], measures: Sequence[str],
                    placeholder: Callable[[int], str], source: str | None = None) -> str:
    """Upsert of one row of ``table``; with ``source`` (a SELECT), of all the rows it
    yields: a key already there gains the measures."""
    columns = (*key, *measures)
    cols = ", ".join(columns)
    values = ", ".join(placeholder(i) for i in range(len(columns)))
    rows = f"VALUES ({values})" if source is None else source
    sums = ", ".join(f"{m} = {table}.{m} + excluded.{m}" for m in measures)
    return (f"INSERT INTO {table} ({cols}) {rows} "
            f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {sums}")
