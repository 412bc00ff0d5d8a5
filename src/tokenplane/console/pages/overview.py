"""Overview: live tokens per second (input by source, output), today's and this
month's requests, what became of those that did not end ok (refused by a limit or
budget, client errors, gateway or upstream failures, cancelled: each counted apart,
``metering/outcomes.py``) and cost, the top consumers, and where latency goes per model."""

from __future__ import annotations

from typing import Any

from tokenplane.console.page import Data, Page
from tokenplane.console.periods import DAY, HOUR, day_start, label, month_start
from tokenplane.console.queries import SOURCES, Filter, money, usage, versions
from tokenplane.metering.outcomes import OUTCOMES, UNRESOLVED_MODEL
from tokenplane.metering.version_rollups import LATENCY_PARTS

LIVE_MINUTES = 15
TOP = 5


def _total(rows: list[dict[str, Any]]) -> dict[str, Any]:
    counted = ("requests", *OUTCOMES)
    out: dict[str, Any] = {k: 0 for k in counted} | {"cost": {}}
    for r in rows:
        for k in counted:
            out[k] += r[k]
        out["cost"][r["currency"]] = out["cost"].get(r["currency"], 0) + r["cost_micros"]
    out["cost"] = {c: money(v) for c, v in sorted(out["cost"].items())} or {"": "0"}
    return out


async def build(page: Page) -> Data:
    tenant = page.tenant()
    now = page.now
    sink = page.sink
    minute = int(now) // 60 * 60
    live = await usage(sink, Filter("minute", minute - LIVE_MINUTES * 60, minute + 60,
                                    tenant), ["bucket"])
    by_bucket = {r["bucket"]: r for r in live}
    buckets = list(range(minute - (LIVE_MINUTES - 1) * 60, minute + 60, 60))
    series = {f"input_{s}": [round(by_bucket.get(b, {}).get(f"input_{s}", 0) / 60, 2)
                             for b in buckets] for s in SOURCES}
    series["output"] = [round(by_bucket.get(b, {}).get("output_tokens", 0) / 60, 2)
                        for b in buckets]
    last = by_bucket.get(minute - 60, {})  # the last whole minute
    rate_in = sum(last.get(f"input_{s}", 0) for s in SOURCES) / 60
    rate_out = last.get("output_tokens", 0) / 60
    today = _total(await usage(sink, Filter("day", day_start(now), None, tenant),
                               ["currency"]))
    month = _total(await usage(sink, Filter("day", month_start(now), None, tenant),
                               ["currency"]))
    tops: list[dict[str, Any]] = []
    dims = [("tenant",), ("tenant", "department"), ("tenant", "app"), ("model",)]
    for dim in dims if page.admin else dims[1:]:
        rows = await usage(sink, Filter("day", month_start(now), None, tenant),
                           [*dim, "currency"])
        if dim == ("model",):  # requests that never named a servable model are client
            rows = [r for r in rows if r["model"] != UNRESOLVED_MODEL]  # errors, counted there
        rows.sort(key=lambda r: (-r["cost_micros"], -(r["input_tokens"] + r["output_tokens"])))
        shown = dim if page.admin or dim == ("model",) else dim[1:]
        tops.append({"dimension": "/".join(shown), "rows": [
            {"name": " / ".join(str(r[d]) or "-" for d in shown), "cost": money(r["cost_micros"]),
             "currency": r["currency"], "tokens": r["input_tokens"] + r["output_tokens"],
             "requests": r["requests"]} for r in rows[:TOP]]})
    lat = await versions(sink, Filter("hour", (int(now) // HOUR - 23) * HOUR, None, tenant),
                         ["model"])
    latency = []
    for r in lat:
        n = r["timed"]
        latency.append({"model": r["model"], "requests": n, **{
            p.removesuffix("_us"): round(r[p] / n / 1000, 1) if n else 0.0
            for p in LATENCY_PARTS}})
    return {
        "live": {"labels": [label(b, "minute") for b in buckets], "series": series,
                 "input_per_s": round(rate_in, 2), "output_per_s": round(rate_out, 2)},
        "today": today, "month": month, "tops": tops, "latency": latency,
        "day_s": DAY,
    }
