"""Usage reports, read from the rollup tables (never from raw events).

Time bounds are epoch seconds (or aware datetimes). A report reads the coarsest
rollup grain whose buckets align with both bounds: day-aligned bounds read the day
rollups, hour-aligned the hour rollups, anything else the minute rollups, with
``since`` rounded down and ``until`` rounded up to the minute. Costs are summed in
integer micro-units per currency.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import orjson

from tokenplane.csv_cells import safe_cell
from tokenplane.metering.outcomes import UNRESOLVED_MODEL
from tokenplane.metering.rollups import GRAINS, MEASURES
from tokenplane.metering.stores.base import LedgerSink

REPORT_DIMENSIONS: dict[str, str] = {
    "tenant": "tenant",
    "department": "department",
    "app": "app",
    "model": "model",
    "key": "key_id",
    "day": "(bucket / 86400) * 86400",
}
SOURCES = ("system", "history", "context", "tools", "user")
TimeBound = float | int | datetime | None


def _epoch(value: TimeBound) -> float | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.timestamp()
    return float(value)


_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


# the latest bound accepted: 9999-12-31 UTC, which every clock and column can hold
MAX_TIME_BOUND = 253402214400.0


def parse_time_bound(text: str, now: float) -> float:
    """CLI time bound: epoch seconds, an ISO date/time (UTC if no zone), or an age
    such as ``90m``, ``24h``, ``7d``, ``2w`` meaning that long before ``now``.

    An age reaching before 1970 means 1970; any other bound must lie between 1970 and
    the year 9999 (``1e400``, ``nan`` and ``-5`` raise :class:`ValueError`)."""
    value = text.strip()
    if len(value) > 1 and value[-1] in _UNITS and value[:-1].isdigit():
        age = int(value[:-1]) * _UNITS[value[-1]]
        return 0.0 if age >= now else now - age
    try:
        bound: float | None = float(value)
    except ValueError:
        bound = None
    if bound is None:
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError as exc:
            raise ValueError(
                f"bad time {text!r}: use epoch seconds, an ISO date or an age like 24h / 7d"
            ) from exc
        bound = _epoch(parsed) or 0.0
    if not (math.isfinite(bound) and 0.0 <= bound <= MAX_TIME_BOUND):
        raise ValueError(f"bad time {text!r}: out of range (1970 to 9999-12-31)")
    return bound


def choose_grain(since: TimeBound, until: TimeBound) -> tuple[str, int | None, int | None]:
    """The coarsest grain aligned with both bounds, and the bounds as bucket limits."""
    lo, hi = _epoch(since), _epoch(until)
    minute = GRAINS["minute"]
    lo_b = None if lo is None else math.floor(lo / minute) * minute
    hi_b = None if hi is None else math.ceil(hi / minute) * minute
    for grain in ("day", "hour"):
        width = GRAINS[grain]
        if all(b is None or b % width == 0 for b in (lo_b, hi_b)):
            return grain, lo_b, hi_b
    return "minute", lo_b, hi_b


def _where(since: TimeBound, until: TimeBound, tenant: str | None) -> tuple[str, list[Any]]:
    grain, lo, hi = choose_grain(since, until)
    clauses: list[str] = ["grain = ?"]
    params: list[Any] = [grain]
    if lo is not None:
        clauses.append("bucket >= ?")
        params.append(lo)
    if hi is not None:
        clauses.append("bucket < ?")
        params.append(hi)
    if tenant is not None:
        clauses.append("tenant = ?")
        params.append(tenant)
    return " AND ".join(clauses), params


def _sums(measures: Sequence[str] = MEASURES) -> str:
    return ", ".join(f"CAST(SUM({m}) AS BIGINT) AS {m}" for m in measures)


def _finish(row: dict[str, Any]) -> dict[str, Any]:
    out = {k: (int(v) if isinstance(v, Decimal) else v) for k, v in row.items()}
    if "day" in out and out["day"] is not None:
        out["day"] = datetime.fromtimestamp(int(out["day"]), UTC).date().isoformat()
    if "cost_micros" in out:
        out["cost"] = str(Decimal(int(out["cost_micros"] or 0)).scaleb(-6))
    if "input_tokens" in out and "output_tokens" in out:
        out["total_tokens"] = int(out["input_tokens"] or 0) + int(out["output_tokens"] or 0)
    return out


async def usage_report(
    sink: LedgerSink,
    by: Sequence[str],
    since: TimeBound = None,
    until: TimeBound = None,
    tenant: str | None = None,
) -> list[dict[str, Any]]:
    """Sums of requests, tokens (by kind and source) and cost, grouped by ``by``."""
    unknown = [d for d in by if d not in REPORT_DIMENSIONS]
    if unknown:
        raise ValueError(f"cannot group by {unknown}; choose from {sorted(REPORT_DIMENSIONS)}")
    dims = list(dict.fromkeys(by))
    select = [f"{REPORT_DIMENSIONS[d]} AS {d}" for d in dims] + ["currency"]
    group = [REPORT_DIMENSIONS[d] for d in dims] + ["currency"]
    where, params = _where(since, until, tenant)
    sql = (
        f"SELECT {', '.join(select)}, {_sums()} FROM usage_rollups WHERE {where} "
        f"GROUP BY {', '.join(group)} ORDER BY {', '.join(group)}"
    )
    return [_finish(r) for r in await sink.fetch(sql, params)]


async def token_source_report(
    sink: LedgerSink, since: TimeBound = None, until: TimeBound = None, tenant: str | None = None
) -> list[dict[str, Any]]:
    """Per (tenant, app): tokens by source (system/history/context/tools/user/output)
    and shares. App names are a tenant's own: two tenants' "chat" apps are two rows."""
    cols = [f"input_{s}" for s in SOURCES] + ["output_tokens", "cached_input_tokens"]
    where, params = _where(since, until, tenant)
    sql = (f"SELECT tenant, app, {_sums(cols)} FROM usage_rollups WHERE {where} "
           "GROUP BY tenant, app ORDER BY tenant, app")
    out: list[dict[str, Any]] = []
    for raw in await sink.fetch(sql, params):
        row = {k: (int(v or 0) if k not in ("tenant", "app") else v) for k, v in raw.items()}
        parts = {s: row[f"input_{s}"] for s in SOURCES} | {"output": row["output_tokens"]}
        total = sum(parts.values())
        entry: dict[str, Any] = {"tenant": row["tenant"], "app": row["app"],
                                 "total_tokens": total}
        for name, value in parts.items():
            entry[f"{name}_tokens"] = value
            entry[f"{name}_share"] = round(value / total, 4) if total else 0.0
        entry["cached_input_tokens"] = row["cached_input_tokens"]
        out.append(entry)
    return out


async def fingerprint_report(
    sink: LedgerSink, tenant: str | None = None, min_requests: int = 2, limit: int = 50
) -> list[dict[str, Any]]:
    """System prompts seen repeatedly: candidates for prefix caching or deduplication."""
    clauses: list[str] = ["requests >= ?"]
    params: list[Any] = [min_requests]
    if tenant is not None:
        clauses.append("tenant = ?")
        params.append(tenant)
    sql = (
        "SELECT tenant, app, fingerprint, requests, system_tokens, first_ts, last_ts "
        f"FROM system_fingerprints WHERE {' AND '.join(clauses)} "
        "ORDER BY requests DESC, system_tokens DESC, fingerprint LIMIT ?"
    )
    return [_finish(r) for r in await sink.fetch(sql, [*params, limit])]


async def top_consumers(
    sink: LedgerSink,
    dimension: str = "tenant",
    since: TimeBound = None,
    until: TimeBound = None,
    tenant: str | None = None,
    limit: int = 10,
    order: str = "cost",
) -> list[dict[str, Any]]:
    """The ``limit`` biggest consumers along one dimension, by cost or by tokens."""
    if dimension not in REPORT_DIMENSIONS or dimension == "day":
        raise ValueError(f"unknown consumer dimension {dimension!r}")
    if order not in ("cost", "tokens"):
        raise ValueError("order must be 'cost' or 'tokens'")
    rows = await usage_report(sink, [dimension], since, until, tenant)
    if dimension == "model":  # requests that named no servable model are client errors
        rows = [r for r in rows if r["model"] != UNRESOLVED_MODEL]
    field = "cost_micros" if order == "cost" else "total_tokens"
    rows.sort(key=lambda r: (-int(r[field]), str(r[dimension])))
    return rows[:limit]


def format_rows(rows: Sequence[dict[str, Any]], fmt: str = "table") -> str:
    """Render report rows as ``table`` (aligned text), ``csv`` or ``json``."""
    if fmt == "json":
        return orjson.dumps(list(rows), option=orjson.OPT_INDENT_2).decode()
    columns = list(dict.fromkeys(k for row in rows for k in row))
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: safe_cell(v) for k, v in row.items()} for row in rows)
        return buf.getvalue()
    if fmt != "table":
        raise ValueError(f"unknown format {fmt!r}; use table, csv or json")
    if not rows:
        return "(no rows)\n"
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    numeric = [all(_is_number(row.get(c)) for row in rows) for c in columns]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ).rstrip()

    out = [line(columns), line(["-" * w for w in widths])]
    out.extend(line(r) for r in cells)
    return "\n".join(out) + "\n"


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)
