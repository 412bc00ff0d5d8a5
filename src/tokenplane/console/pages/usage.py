"""Usage: drill down tenant -> department -> app -> key or model, by day or hour:
tokens by source, cached tokens, cost; and the same scope by API (wire dialect) and
client, from the day rollups by client. The CSV export is the first table as shown."""

from __future__ import annotations

import csv
import io
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from tokenplane.console.page import Data, Page, PageError
from tokenplane.console.periods import DAY, HOUR, label
from tokenplane.console.queries import SOURCES, Filter, clients, money, sums, usage
from tokenplane.csv_cells import safe_cell
from tokenplane.metering.events import UsageEvent
from tokenplane.metering.outcomes import OUTCOMES
from tokenplane.metering.pricing import PriceBook
from tokenplane.metering.reports import parse_time_bound

NONE = "~"  # the department of apps that have none ('' in the ledger)
# what became of the requests that did not end ok, each named (metering/outcomes.py)
COLUMNS = ("requests", *OUTCOMES, *(f"input_{s}" for s in SOURCES), "cached_input_tokens",
           "output_tokens", "total_tokens", "cost", "cache_savings", "currency")
DEFAULT_SINCE = {"day": "7d", "hour": "24h"}
CLIENT_COLUMNS = ("requests", "errors", "input_tokens", "cached_input_tokens",
                  "output_tokens", "total_tokens", "request_share", "token_share", "cost",
                  "currency")


def _level(page: Page, tenant: str | None) -> tuple[str, str | None, str | None]:
    """The dimension the table groups by, and the department and app filters."""
    dept = page.arg("department")
    app = page.arg("app")
    by = page.arg("by") or "key_id"
    if by not in ("key_id", "model"):
        raise PageError(400, "error.bad_input")
    if tenant is None:
        return "tenant", None, None
    if dept is None:
        return "department", None, None
    dept_value = "" if dept == NONE else dept
    if app is None:
        return "app", dept_value, None
    return by, dept_value, app


def saving_per_token(prices: PriceBook | None, model: str) -> Decimal:
    """What a cached prompt token saves against an uncached one (micro-units): the
    model's input price less its cached-input price (per million tokens: micros)."""
    price = prices.model_price(UsageEvent("", 0, 0.0, model=model)) if prices else None
    if price is None:
        return Decimal(0)
    return max(Decimal(0), price.base.input - price.base.cached_input)


async def savings(page: Page, flt: Filter, group: str) -> dict[tuple[str, str], int]:
    """Cache savings per (group value, currency) in micro-units, at today's prices."""
    prices = page.parts.prices() if page.parts.prices is not None else None
    rows = await sums(page.sink, "usage_rollups", ("cached_input_tokens",), flt,
                      [group, "model", "currency"])
    out: dict[tuple[str, str], int] = {}
    for r in rows:
        key = (str(r[group]), str(r["currency"]))
        per = saving_per_token(prices, str(r["model"]))
        out[key] = out.get(key, 0) + int(per * r["cached_input_tokens"])
    return out


async def client_table(page: Page, flt: Filter) -> tuple[list[dict[str, Any]], bool]:
    """The panel "By API and client": one row per API, client and currency (the API's
    operation names its catalog label; client None: the requests named none)."""
    rows = await clients(page.sink, flt)
    shown = rows[:page.parts.config.max_rows]
    out = []
    for r in shown:
        row = {"operation": r["operation"], "api": r["api"], "client": r["client"]}
        for c in CLIENT_COLUMNS:
            row[c] = f"{r[c] * 100:.1f}%" if c.endswith("_share") else r[c]
        out.append(row)
    return out, len(rows) > len(shown)


def _row(name: str, r: dict[str, Any], saved: int) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    for c in COLUMNS:
        if c == "cost":
            out[c] = money(r["cost_micros"])
        elif c == "cache_savings":
            out[c] = money(saved)
        elif c == "total_tokens":
            out[c] = r["input_tokens"] + r["output_tokens"]
        else:
            out[c] = r[c]
    return out


async def build(page: Page) -> Data:
    tenant = page.tenant()
    grain = page.arg("grain") or "day"
    if grain not in ("day", "hour"):
        raise PageError(400, "error.bad_input")
    width = DAY if grain == "day" else HOUR
    since_text = page.arg("since") or DEFAULT_SINCE[grain]
    try:
        since = int(parse_time_bound(since_text, page.now)) // width * width
    except ValueError:
        raise PageError(400, "error.bad_input") from None
    group, dept, app = _level(page, tenant)
    flt = Filter(grain, since, None, tenant, dept, app)
    rows = await usage(page.sink, flt, [group, "currency"])
    saved = await savings(page, flt, group)
    base = {k: v for k, v in (("grain", grain), ("since", since_text)) if v}
    if page.admin and tenant is not None:
        base["tenant"] = tenant
    table = []
    rows.sort(key=lambda r: (-r["cost_micros"], str(r[group])))
    for r in rows[:page.parts.config.max_rows]:
        name = str(r[group])
        nxt: dict[str, str] | None = None
        if group == "tenant":
            nxt = {**base, "tenant": name}
        elif group == "department":
            nxt = {**base, "department": name or NONE}
        elif group == "app":
            nxt = {**base, "department": dept or NONE, "app": name}
        row = _row(name or "-", r, saved.get((name, str(r["currency"])), 0))
        row["href"] = f"/console/usage?{urlencode(nxt)}" if nxt is not None else None
        table.append(row)
    series_rows = await usage(page.sink, flt, ["bucket"])
    client_rows, clients_truncated = await client_table(page, flt)
    crumbs: list[dict[str, str | None]] = [
        {"label": "*", "href": f"/console/usage?{urlencode(base)}"}] if page.admin else []
    if tenant is not None:
        crumbs.append({"label": tenant, "href": "/console/usage?" + urlencode(
            {**base, "tenant": tenant} if page.admin else base)})
    if dept is not None:
        q = {**base, "department": dept or NONE}
        if page.admin:
            q["tenant"] = tenant or ""
        crumbs.append({"label": dept or "-", "href": f"/console/usage?{urlencode(q)}"})
    if app is not None:
        crumbs.append({"label": app, "href": None})
    query = dict(page.request.query)
    return {
        "group": group, "grain": grain, "since": since_text, "since_epoch": since,
        "columns": COLUMNS, "rows": table, "crumbs": crumbs,
        "truncated": len(rows) > len(table),
        "client_columns": CLIENT_COLUMNS, "client_rows": client_rows,
        "clients_truncated": clients_truncated,
        "by": page.arg("by") or "key_id", "at_app": app is not None,
        "filters": {"tenant": tenant, "department": dept, "app": app},
        "csv_href": "/console/usage.csv?" + urlencode(query),
        "query": query,
        "chart": {"labels": [label(r["bucket"], grain) for r in series_rows],
                  "series": {**{f"input_{s}": [r[f"input_{s}"] for r in series_rows]
                                for s in SOURCES},
                             "output": [r["output_tokens"] for r in series_rows]}},
    }


def csv_text(data: Data) -> str:
    """The table as CSV: the group's column, then every shown column, same values."""



    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([data["group"], *data["columns"]])
    for row in data["rows"]:  # names a client chose: never a formula (csv_cells)
        w.writerow([safe_cell(row["name"]), *(safe_cell(row[c]) for c in data["columns"])])
    return buf.getvalue()
