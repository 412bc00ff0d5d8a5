"""Advice rollups: per day and (tenant, app, alias, model version, template, currency)
the sums the optimisation advisor reads (``tokenplane.advice``), upserted by both sinks
in the transaction that inserts the events (only those it inserted), like the usage
rollups. The template is the system prompt's fingerprint ("" without one)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tokenplane.metering.day_sums import day, sums_by_key, upsert_sums_sql
from tokenplane.metering.events import UsageEvent

ADVICE_KEY: tuple[str, ...] = (
    "bucket", "tenant", "app", "model", "version", "template", "currency")
ADVICE_MEASURES: tuple[str, ...] = (
    "requests", "errors", "answers", "answer_output_tokens", "answer_output_sq",
    "length_finishes", "length_output_tokens", "input_tokens", "cached_input_tokens",
    "cache_write_tokens", "output_tokens", "input_system", "input_history",
    "input_context", "input_tools", "cost_micros", "context_offered_tokens",
    "context_kept_tokens", "history_dropped_tokens", "tool_output_tokens",
    "tool_output_removed",
)
ADVICE_COLUMNS: tuple[str, ...] = (*ADVICE_KEY, *ADVICE_MEASURES)

AdviceRow = tuple[Any, ...]


def advice_measures(ev: UsageEvent) -> list[int]:
    answered = ev.status == "ok" and ev.upstream_start_ts is not None
    out = ev.output_tokens if answered else 0
    length = answered and ev.finish_reason == "length"
    return [
        1, 0 if ev.status == "ok" else 1, 1 if answered else 0, out, out * out,
        1 if length else 0, out if length else 0, ev.input_tokens, ev.cached_input_tokens,
        ev.cache_write_tokens, ev.output_tokens, ev.input_system, ev.input_history,
        ev.input_context, ev.input_tools, ev.cost_micros, ev.context_offered_tokens,
        ev.context_kept_tokens, ev.history_dropped_tokens, ev.tool_output_tokens,
        ev.tool_output_removed,
    ]


def advice_rows(events: Iterable[UsageEvent]) -> list[tuple[Any, ...]]:
    """Sums per key of the events, sorted by key (lock order)."""
    return sums_by_key(events, _key, advice_measures)


def _key(ev: UsageEvent) -> tuple[Any, ...]:
    return (day(ev.ts), ev.tenant, ev.app, ev.model, ev.model_version or "",
            ev.system_fingerprint or "", ev.currency)


def upsert_advice_sql(placeholder: Callable[[int], str], source: str | None = None) -> str:
    """Upsert of one row; with ``source`` (a SELECT), of all the rows it yields."""
    return upsert_sums_sql("advice_rollups", ADVICE_KEY, ADVICE_MEASURES, placeholder, source)
