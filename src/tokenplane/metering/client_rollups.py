"""Client rollups: per day and (tenant, app, operation, client, currency) the requests,
tokens and cost of each wire dialect's operation (``chat``, ``text_completion``,
``embeddings``, ``messages``) and each client (the User-Agent's product: ``claude-cli``,
``openai-python``, ...; "" when the request named none), upserted by both sinks in the
transaction that inserts the events (only those it inserted), like the usage rollups.
``tokenplane usage clients``, the console's Usage page and the monthly report read it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tokenplane.metering.day_sums import day, sums_by_key, upsert_sums_sql
from tokenplane.metering.events import UsageEvent

CLIENT_KEY: tuple[str, ...] = ("bucket", "tenant", "app", "operation", "client", "currency")
CLIENT_MEASURES: tuple[str, ...] = (
    "requests", "errors", "input_tokens", "cached_input_tokens", "cache_write_tokens",
    "output_tokens", "cost_micros",
)
CLIENT_COLUMNS: tuple[str, ...] = (*CLIENT_KEY, *CLIENT_MEASURES)

ClientRow = tuple[Any, ...]


def client_rows(events: Iterable[UsageEvent]) -> list[tuple[Any, ...]]:
    """Sums per key of the events, sorted by key (lock order)."""
    return sums_by_key(events, _key, _measures)


def _key(ev: UsageEvent) -> tuple[Any, ...]:
    return (day(ev.ts), ev.tenant, ev.app, ev.operation, ev.client or "", ev.currency)


def _measures(ev: UsageEvent) -> list[int]:
    return [1, 0 if ev.status == "ok" else 1, ev.input_tokens, ev.cached_input_tokens,
            ev.cache_write_tokens, ev.output_tokens, ev.cost_micros]


def upsert_clients_sql(placeholder: Callable[[int], str], source: str | None = None) -> str:
    """Upsert of one row; with ``source`` (a SELECT), of all the rows it yields."""
    return upsert_sums_sql("client_rollups", CLIENT_KEY, CLIENT_MEASURES, placeholder, source)
