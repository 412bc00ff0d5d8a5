"""Budgets and limits: use against each limit (the admin API's budget status), the
forecast to the end of the period, and recent refusals by a limit or budget (the
gateway's own 429s, from the rollups; client errors are not refusals)."""

from __future__ import annotations

from typing import Any

from tokenplane.console.page import Data, Page, PageError
from tokenplane.console.periods import DAY, day_start, label, month_start, next_month_start
from tokenplane.console.queries import Filter, money, usage

REFUSAL_DAYS = 7
TOP_REFUSALS = 20


def period(now: float, resets_at: float | None, kind: str) -> tuple[float, float] | None:
    """The calendar period a limit is in (a day or a month), or None (a window or a
    gauge: nothing to forecast)."""
    if kind != "calendar" or resets_at is None:
        return None
    if resets_at - now <= DAY and resets_at == day_start(now) + DAY:
        return float(day_start(now)), float(resets_at)
    if resets_at == next_month_start(now):
        return float(month_start(now)), float(resets_at)
    return None


def forecast(spent: int, now: float, span: tuple[float, float]) -> int:
    """Spent so far, at the same pace, over the whole period."""
    start, end = span
    elapsed = max(60.0, now - start)
    return int(spent * (end - start) / elapsed)


async def build(page: Page) -> Data:
    tenant = page.tenant()
    tenants = [tenant] if tenant is not None else sorted(
        {e.target.tenant for e in page.parts.limits.entries(None)})
    scopes: list[dict[str, Any]] = []
    for t in tenants:
        answer = await page.admin_api(f"/admin/v1/tenants/{t}/budget")
        if not answer.ok:
            raise PageError(answer.status, "error.unavailable")
        for scope in answer.data["scopes"]:
            rows = []
            for lim in scope["limits"]:
                span = period(page.now, lim["resets_at"], lim["kind"])
                used = lim["spent"] + lim["reserved"]
                row = {**lim, "tenant": t, "used": used,
                       "share": round(100 * used / lim["limit"], 1) if lim["limit"] else 0.0,
                       "forecast": forecast(lim["spent"], page.now, span) if span else None}
                if row["forecast"] is not None and lim["limit"]:
                    row["forecast_share"] = round(100 * row["forecast"] / lim["limit"], 1)
                money_unit = lim["unit"] == "cost_micros"
                row["shown_limit"] = money(lim["limit"]) if money_unit else f"{lim['limit']:,}"
                row["shown_used"] = money(used) if money_unit else f"{used:,}"
                fc = row["forecast"]
                row["shown_forecast"] = None if fc is None else (
                    money(fc) if money_unit else f"{fc:,}")
                rows.append(row)
            scopes.append({"tenant": t, "scope": scope["scope"], "limits": rows})
    since = day_start(page.now) - (REFUSAL_DAYS - 1) * DAY
    flt = Filter("day", since, None, tenant)
    per_day = {r["bucket"]: r["limited"] for r in await usage(page.sink, flt, ["bucket"])}
    days = [since + k * DAY for k in range(REFUSAL_DAYS)]
    top = [r for r in await usage(page.sink, flt, ["tenant", "app"]) if r["limited"]]
    top.sort(key=lambda r: (-r["limited"], r["tenant"], r["app"]))
    return {"scopes": scopes, "refusal_days": REFUSAL_DAYS,
            "refusal_chart": {"labels": [label(d, "day") for d in days],
                              "data": [per_day.get(d, 0) for d in days]},
            "refusals": [{"tenant": r["tenant"], "app": r["app"] or "-",
                          "refused": r["limited"], "requests": r["requests"]}
                         for r in top[:TOP_REFUSALS]]}
