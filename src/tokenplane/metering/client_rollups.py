"""Client rollups: per day and (tenant, app, operation, client, currency) the requests,
tokens and cost of each wire dialect's operation (``chat``, ``text_completion``,
``embeddings``, ``messages``) and each client (the User-Agent's product: ``claude-cli``,
``openai-python``, ...; "" when the request named none), upserted by both sinks in the
transaction that inserts the events (only those it inserted), like the usage rollups.
``tokenplane usage clients``, the console's Usage page and the monthly report read it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tokenplane.metering.events import UsageEvent

DAY_S = 86400
CLIENT_KEY: tuple[str, ...] = ("bucket", "tenant", "app", "operation", "client", "currency")
CLIENT_MEASURES: tuple[str, ...] = (
    "requests", "errors", "input_tokens", "cached_input_tokens", "cache_write_tokens",
    "output_tokens", "cost_micros",
)
CLIENT_COLUMNS: tuple[str, ...] = (*CLIENT_KEY, *CLIENT_MEASURES)

ClientRow = tuple[Any, ...]


def client_rows(events: Iterable[UsageEvent]) -> list[ClientRow]:
    """Sums per key of the events, sorted by key (lock order)."""
    acc: dict[tuple[Any, ...], list[int]] = {}
    for ev in events:
        key = (int(ev.ts) // DAY_S * DAY_S, ev.tenant, ev.app, ev.operation,
               ev.client or "", ev.currency)
        values = [1, 0 if ev.status == "ok" else 1, ev.input_tokens, ev.cached_input_tokens,
                  ev.cache_write_tokens, ev.output_tokens, ev.cost_micros]
        cur = acc.get(key)
        if cur is None:
            acc[key] = values
        else:
            for i, v in enumerate(values):
                cur[i] += v
    return [(*key, *vals) for key, vals in sorted(acc.items())]


def upsert_clients_sql(placeholder: Callable[[int], str], source: str | None = None) -> str:
    """Upsert of one client row; with ``source`` (a SELECT), of all the rows it yields."""
    cols = ", ".join(CLIENT_COLUMNS)
    values = ", ".join(placeholder(i) for i in range(len(CLIENT_COLUMNS)))
    rows = f"VALUES ({values})" if source is None else source
    sums = ", ".join(f"{m} = client_rollups.{m} + excluded.{m}" for m in CLIENT_MEASURES)
    return (f"INSERT INTO client_rollups ({cols}) {rows} "
            f"ON CONFLICT ({', '.join(CLIENT_KEY)}) DO UPDATE SET {sums}")
