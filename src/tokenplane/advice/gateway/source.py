"""The advisor's shell: reads the aggregates from the ledger and runs the pure advisor.

It reads ``advice_rollups`` summed over the window's days by the database (day
buckets: ``since`` is rounded down to its day), the ``feedback`` sums, and the newest
price table the meter stored (``price_versions``); never the raw events.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson

from tokenplane.advice.advisor import KINDS, advise
from tokenplane.advice.coverage import coverage
from tokenplane.advice.model import Aggregate, FeedbackAggregate, Rates, Thresholds, Window
from tokenplane.advice.tool_calls import tool_aggregates
from tokenplane.governance.audit.multi import log_dirs
from tokenplane.governance.audit.segments import iter_records
from tokenplane.metering.advice_rollups import ADVICE_MEASURES
from tokenplane.metering.day_sums import DAY_S
from tokenplane.metering.events import UsageEvent
from tokenplane.metering.feedback import feedback_sums
from tokenplane.metering.pricing import PriceBook
from tokenplane.metering.stores.base import LedgerSink

DEFAULT_WINDOW_S = 30 * DAY_S
_DIMS = "tenant, app, model, version, template, currency"


def _window(since: float | None, until: float | None, now: float) -> tuple[float, float]:
    hi = now if until is None else until
    lo = hi - DEFAULT_WINDOW_S if since is None else since
    return lo, hi


def _where(lo: float, hi: float, tenant: str | None) -> tuple[str, list[Any]]:
    """The window (and tenant) as a WHERE clause on the day buckets."""
    clauses = ["bucket >= ?", "bucket < ?"]
    params: list[Any] = [int(lo // DAY_S * DAY_S), math.ceil(hi)]
    if tenant is not None:
        clauses.append("tenant = ?")
        params.append(tenant)
    return " AND ".join(clauses), params


async def data_days(sink: LedgerSink, lo: float, hi: float,
                    tenant: str | None) -> tuple[int, int] | None:
    """The first and last day with traffic in the window (the rollups' key order)."""
    where, params = _where(lo, hi, tenant)
    rows = await sink.fetch(f"SELECT MIN(bucket) AS lo, MAX(bucket) AS hi FROM advice_rollups "
                            f"WHERE {where}", params)
    if not rows or rows[0]["lo"] is None:
        return None
    return int(rows[0]["lo"]), int(rows[0]["hi"])


def _sum(expr: str, name: str, dialect: str) -> str:
    # PostgreSQL sums BIGINT as NUMERIC: cast back; SQLite's SUM of integers is one
    return (f"SUM({expr}) AS {name}" if dialect == "sqlite"
            else f"CAST(SUM({expr}) AS BIGINT) AS {name}")


def window_sums_sql(where: str, dialect: str) -> str:
    """The window's rollups summed per (tenant, app, alias, version, template,
    currency). Besides the measures, three per-day sums (first parameter: the first
    day of the later half): ``day_prefix_writes``, each day's system tokens per
    request (``input_system / requests``, integer division, per rollup row; every row
    holds a request, since each event counts one), and the requests and
    history tokens of the earlier half. ``to_aggregate`` derives the rest."""
    sums = [_sum(m, m, dialect) for m in ADVICE_MEASURES]
    derived = [
        _sum("input_system / NULLIF(requests, 0)", "day_prefix_writes", dialect),
        _sum("CASE WHEN bucket < ? THEN requests ELSE 0 END", "early_requests", dialect),
        _sum("CASE WHEN bucket < ? THEN input_history ELSE 0 END", "early_history", dialect),
    ]
    return (f"SELECT {_DIMS}, {', '.join(sums + derived)} FROM advice_rollups "
            f"WHERE {where} GROUP BY {_DIMS}")


def to_aggregate(row: dict[str, Any]) -> Aggregate:
    """One grouped row as the advisor's aggregate (``advice/model.py`` says what the
    derived measures are): per day and template, the first request's system tokens
    write a prefix cache (``day_prefix_writes``) and the others' could read it (the
    rest of ``input_system``; a group without a template has neither, a group is one
    template); the later half's requests and history are the total less the earlier
    half's."""
    writes = int(row.pop("day_prefix_writes"))
    templated = row["template"] != ""
    row["prefix_write_tokens"] = writes if templated else 0
    row["prefix_repeat_tokens"] = int(row["input_system"]) - writes if templated else 0
    row["late_requests"] = int(row["requests"]) - int(row["early_requests"])
    row["late_history"] = int(row["input_history"]) - int(row["early_history"])
    return Aggregate(**row)


async def advice_rows(sink: LedgerSink, lo: float, hi: float, tenant: str | None,
                      days: tuple[int, int]) -> list[dict[str, Any]]:
    """The window's rollups summed over its days, in the database (one grouped query,
    ``window_sums_sql``); ``to_aggregate`` makes each an ``Aggregate``."""
    where, params = _where(lo, hi, tenant)
    first, last = days
    mid = first + ((last - first) // DAY_S + 1) // 2 * DAY_S
    return await sink.fetch(window_sums_sql(where, sink.dialect), [mid, mid, *params])


async def latest_prices(sink: LedgerSink) -> PriceBook:
    rows = await sink.fetch("SELECT price_table FROM price_versions "
                            "ORDER BY first_seen DESC, version LIMIT 1")
    if not rows:
        return PriceBook.empty()
    return PriceBook(orjson.loads(rows[0]["price_table"]))


def rates_of(book: PriceBook) -> Callable[[str], Rates]:
    cache: dict[str, Rates] = {}

    def rates(alias: str) -> Rates:
        got = cache.get(alias)
        if got is None:
            price = book.model_price(UsageEvent("", 0, 0.0, model=alias))
            if price is None:
                got = Rates()
            else:
                b = price.base
                got = Rates(b.input, b.cached_input, b.cache_write, b.output)
            cache[alias] = got
        return got

    return rates


def analyse(rows: list[dict[str, Any]], feedback: list[FeedbackAggregate], book: PriceBook,
            *, tenant: str | None, lo: float, hi: float, effective: Window, now: float,
            thresholds: Thresholds | None, audit: Path | None = None) -> dict[str, Any]:
    """The advice document from the grouped rows and, given the audit log's root, its
    MCP tool calls (pure work but the log's read: ``gather_advice`` runs it on a worker
    thread, off the event loop)."""
    tools = None
    if audit is not None:
        tools = tool_aggregates(tool_records(audit, lo, hi), tenant, book.currency)
    aggregates = [to_aggregate(r) for r in rows]
    result = advise(aggregates, feedback, rates_of(book), effective, thresholds, tools=tools)
    findings = [f.as_dict() for f in result.findings]
    total_micros = sum(f.cost_micros_per_month for f in result.findings)
    return {
        "object": "advice", "tenant": tenant, "since": lo, "until": hi,
        "window_days": round(effective.days, 2), "generated_at": now,
        "currency": book.currency, "price_version": book.version,
        "kinds": list(KINDS), "findings": findings,
        "total": {"findings": len(findings),
                  "tokens_per_month": sum(f.tokens_per_month for f in result.findings),
                  "cost_micros_per_month": total_micros,
                  "cost_per_month": str(Decimal(total_micros).scaleb(-6))},
        "not_evaluated": result.not_evaluated,
        # what was checked, what lacks data and when it will have enough
        "coverage": coverage(aggregates, feedback, effective, thresholds or Thresholds(),
                             now),
    }


async def gather_advice(sink: LedgerSink, *, since: float | None = None,
                        until: float | None = None, tenant: str | None = None,
                        now: float | None = None, thresholds: Thresholds | None = None,
                        progress: Callable[[str], None] | None = None,
                        audit: Path | None = None) -> dict[str, Any]:
    """The advice document (docs/ADVICE.md) for ``tenant`` (None: every tenant). The
    sums are the database's; the analyses run on a worker thread, so a gateway's
    event loop is not held by them."""
    say = progress or (lambda _: None)
    now = time.time() if now is None else now
    lo, hi = _window(since, until, now)
    say("reading advice rollups")
    days = await data_days(sink, lo, hi, tenant)
    rows = await advice_rows(sink, lo, hi, tenant, days) if days is not None else []
    say("reading feedback and prices")
    feedback = [FeedbackAggregate(r["tenant"], r["app"], r["model"], int(r["n"]),
                                  float(r["total"] or 0))
                for r in await feedback_sums(sink, lo, hi, tenant)]
    book = await latest_prices(sink)
    start = lo // DAY_S * DAY_S  # the rollups hold whole days
    effective = Window(max(start, float(days[0])) if days is not None else start,
                       min(hi, now))
    say(f"analysing {len(rows)} aggregate rows")
    return await asyncio.to_thread(analyse, rows, feedback, book, tenant=tenant, lo=lo, hi=hi,
                                   effective=effective, now=now, thresholds=thresholds,
                                   audit=audit)


def tool_records(root: Path, lo: float, hi: float) -> list[dict[str, Any]]:
    """The audit log's MCP and request records of [lo, hi) (the MCP tools' findings)."""
    first = time.strftime("%Y%m%d", time.gmtime(lo))
    last = time.strftime("%Y%m%d", time.gmtime(hi))
    return [r for d in log_dirs(root) for r in iter_records(d, first, last)
            if r.get("kind") in ("mcp", "request") and lo <= float(r.get("ts") or 0) < hi]
