"""Requests, tokens and cost by API (the wire dialect's operation) and client, read
from ``client_rollups`` (day rows; never the raw events).

The rollups are by day, so ``since`` counts from the start of its day (UTC) and
``until`` up to the end of its day. Shares: of requests and of tokens, over every row
returned; of cost, over the rows of the same currency.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from tokenplane.metering.client_rollups import CLIENT_MEASURES
from tokenplane.metering.day_sums import DAY_S
from tokenplane.metering.reports import TimeBound, _epoch
from tokenplane.metering.stores.base import LedgerSink

API_LABELS: dict[str, str] = {
    "chat": "OpenAI Chat",
    "text_completion": "OpenAI Completions",
    "embeddings": "OpenAI Embeddings",
    "messages": "Anthropic Messages",
}
CLIENT_DIMENSIONS = ("tenant", "app")


def api_label(operation: str) -> str:
    """The API an operation belongs to, as the reports name it (an unknown operation
    is shown by its own name)."""
    return API_LABELS.get(operation, operation)


def day_bounds(since: TimeBound, until: TimeBound) -> tuple[int | None, int | None]:
    """The day buckets covering [since, until): the first day's start, and the end of
    the day ``until`` falls in (itself when it starts a day)."""
    lo, hi = _epoch(since), _epoch(until)
    return (None if lo is None else math.floor(lo / DAY_S) * DAY_S,
            None if hi is None else math.ceil(hi / DAY_S) * DAY_S)


def client_where(since: TimeBound, until: TimeBound, tenant: str | None,
                 apps: Sequence[str] | None = None) -> tuple[str, list[Any]]:
    lo, hi = day_bounds(since, until)
    clauses: list[str] = []
    params: list[Any] = []
    for clause, value in (("bucket >= ?", lo), ("bucket < ?", hi), ("tenant = ?", tenant)):
        if value is not None:
            clauses.append(clause)
            params.append(value)
    if apps is not None:
        clauses.append(f"app IN ({', '.join('?' for _ in apps)})" if apps else "1 = 0")
        params.extend(apps)
    return " AND ".join(clauses) or "1 = 1", params


def _int(v: Any) -> int:
    return int(v) if isinstance(v, int | Decimal) else int(v or 0)


async def client_sums(sink: LedgerSink, since: TimeBound = None, until: TimeBound = None,
                      tenant: str | None = None, by: Sequence[str] = (),
                      apps: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The rollup's measures summed per (``by``..., operation, client, currency)."""
    bad = [d for d in by if d not in CLIENT_DIMENSIONS]
    if bad:
        raise ValueError(f"cannot group by {bad}; choose from {', '.join(CLIENT_DIMENSIONS)}")
    group = [*dict.fromkeys(by), "operation", "client", "currency"]
    where, params = client_where(since, until, tenant, apps)
    cols = ", ".join(f"CAST(SUM({m}) AS BIGINT) AS {m}" for m in CLIENT_MEASURES)
    sql = (f"SELECT {', '.join(group)}, {cols} FROM client_rollups WHERE {where} "
           f"GROUP BY {', '.join(group)}")
    return [{k: (v if k in group else _int(v)) for k, v in r.items()}
            for r in await sink.fetch(sql, params)]


def client_view(sums: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Report rows from :func:`client_sums`: the API's name, the client (None when the
    requests named none), the sums, total tokens, cost and shares; the most tokens
    first."""
    total_requests = sum(r["requests"] for r in sums)
    total_tokens = sum(r["input_tokens"] + r["output_tokens"] for r in sums)
    cost_by_currency: dict[str, int] = {}
    for r in sums:
        cost_by_currency[r["currency"]] = cost_by_currency.get(r["currency"], 0) + r["cost_micros"]
    out: list[dict[str, Any]] = []
    for r in sums:
        row: dict[str, Any] = {d: r[d] for d in CLIENT_DIMENSIONS if d in r}
        tokens = r["input_tokens"] + r["output_tokens"]
        cost_total = cost_by_currency[r["currency"]]
        row.update(
            api=api_label(str(r["operation"])), operation=r["operation"],
            client=r["client"] or None,
            **{m: r[m] for m in CLIENT_MEASURES},
            total_tokens=tokens,
            cost=str(Decimal(r["cost_micros"]).scaleb(-6)),
            currency=r["currency"],
            request_share=round(r["requests"] / total_requests, 4) if total_requests else 0.0,
            token_share=round(tokens / total_tokens, 4) if total_tokens else 0.0,
            cost_share=round(r["cost_micros"] / cost_total, 4) if cost_total else 0.0,
        )
        out.append(row)
    out.sort(key=lambda r: (-r["total_tokens"], -r["requests"],
                            *(str(r.get(d)) for d in CLIENT_DIMENSIONS),
                            r["api"], r["client"] or "", r["currency"]))
    return out


async def client_report(sink: LedgerSink, since: TimeBound = None, until: TimeBound = None,
                        tenant: str | None = None, by: Sequence[str] = ()
                        ) -> list[dict[str, Any]]:
    """Requests, tokens and cost by API and client (and ``by``: tenant, app), with
    shares, the most tokens first."""
    return client_view(await client_sums(sink, since, until, tenant, by))
