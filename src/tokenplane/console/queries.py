"""The console's reads of the ledger: sums over the rollup tables (``usage_rollups``,
``version_rollups``, ``client_rollups``), never the raw events. Every query is scoped:
``Filter.tenant`` is forced to the signed-in key's tenant unless the key is an admin's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from tokenplane.metering.client_reports import client_sums, client_view, day_bounds
from tokenplane.metering.outcomes import OUTCOMES
from tokenplane.metering.stores.base import LedgerSink
from tokenplane.metering.version_rollups import LATENCY_PARTS

SOURCES = ("system", "history", "context", "tools", "user")
USAGE_SUMS = ("requests", "errors", "refused", "input_tokens", "cached_input_tokens",
              "output_tokens", *(f"input_{s}" for s in SOURCES), "cost_micros", *OUTCOMES)
VERSION_SUMS = ("requests", "errors", "input_tokens", "output_tokens", "cost_micros",
                "timed", *LATENCY_PARTS)
GROUPS = ("tenant", "department", "app", "key_id", "model", "model_version", "bucket",
          "currency")


@dataclass(frozen=True, slots=True)
class Filter:
    """Which rows: a grain, bucket bounds [since, until), and names to match."""

    grain: str
    since: int | None = None
    until: int | None = None
    tenant: str | None = None
    department: str | None = None
    app: str | None = None

    def where(self) -> tuple[str, list[Any]]:
        clauses: list[str] = ["grain = ?"]
        params: list[Any] = [self.grain]
        if self.since is not None:
            clauses.append("bucket >= ?")
            params.append(self.since)
        if self.until is not None:
            clauses.append("bucket < ?")
            params.append(self.until)
        for name in ("tenant", "department", "app"):
            value = getattr(self, name)
            if value is not None:
                clauses.append(f"{name} = ?")
                params.append(value)
        return " AND ".join(clauses), params


def _int(v: Any) -> int:
    return int(v) if isinstance(v, int | Decimal) else int(v or 0)


async def sums(sink: LedgerSink, table: str, measures: Sequence[str], flt: Filter,
               group: Sequence[str]) -> list[dict[str, Any]]:
    """Sums of ``measures`` over ``flt``, grouped by ``group`` (ordered by it)."""
    bad = [g for g in group if g not in GROUPS]
    if bad or table not in ("usage_rollups", "version_rollups"):
        raise ValueError(f"cannot group {table} by {bad}")
    where, params = flt.where()
    cols = ", ".join(f"CAST(SUM({m}) AS BIGINT) AS {m}" for m in measures)
    head = ", ".join(group)
    sql = f"SELECT {head + ', ' if group else ''}{cols} FROM {table} WHERE {where}"
    if group:
        sql += f" GROUP BY {head} ORDER BY {head}"
    rows = await sink.fetch(sql, params)
    return [{k: (v if k in group else _int(v)) for k, v in r.items()} for r in rows]


async def usage(sink: LedgerSink, flt: Filter, group: Sequence[str]) -> list[dict[str, Any]]:
    return await sums(sink, "usage_rollups", USAGE_SUMS, flt, group)


async def versions(sink: LedgerSink, flt: Filter, group: Sequence[str]) -> list[dict[str, Any]]:
    return await sums(sink, "version_rollups", VERSION_SUMS, flt, group)


async def clients(sink: LedgerSink, flt: Filter) -> list[dict[str, Any]]:
    """Requests, tokens and cost by API and client over ``flt`` (by day: ``since``
    counts from the start of its day), with shares, the most tokens first. The day
    rollups by client have no department: a department's rows are those of the apps
    its day usage rollups name over the same days."""
    apps: list[str] | None = None
    if flt.app is not None:
        apps = [flt.app]
    elif flt.department is not None:
        lo, hi = day_bounds(flt.since, flt.until)
        days = Filter("day", lo, hi, flt.tenant, flt.department)
        apps = [str(r["app"]) for r in
                await sums(sink, "usage_rollups", ("requests",), days, ["app"])]
    rows = await client_sums(sink, flt.since, flt.until, flt.tenant, (), apps)
    return client_view(rows)


def money(micros: int) -> str:
    """Micro-units as the admin API writes them (``"0.001230"``)."""
    return str(Decimal(int(micros)).scaleb(-6))
