"""Versions: per model version (canary and A/B splits): tokens per request, output
tokens per answer, latency, cost per request, error rate (``version_rollups``)."""

from __future__ import annotations

from tokenplane.console.page import Data, Page, PageError
from tokenplane.console.periods import DAY
from tokenplane.console.queries import Filter, money, versions
from tokenplane.metering.reports import parse_time_bound


async def build(page: Page) -> Data:
    tenant = page.tenant()
    since_text = page.arg("since") or "7d"
    try:
        since = int(parse_time_bound(since_text, page.now)) // DAY * DAY
    except ValueError:
        raise PageError(400, "error.bad_input") from None
    rows = await versions(page.sink, Filter("day", since, None, tenant, None, page.arg("app")),
                          ["model", "model_version", "currency"])
    out = []
    for r in rows:
        n, ok = r["requests"], r["requests"] - r["errors"]
        timed = r["timed"]
        out.append({
            "model": r["model"], "version": r["model_version"] or "-", "requests": n,
            "tokens_per_request": round((r["input_tokens"] + r["output_tokens"]) / n, 1)
            if n else 0.0,
            "output_per_answer": round(r["output_tokens"] / ok, 1) if ok else 0.0,
            "latency_ms": round((r["gateway_us"] + r["queue_us"] + r["ttft_us"]
                                 + r["decode_us"]) / timed / 1000, 1) if timed else 0.0,
            "ttft_ms": round(r["ttft_us"] / timed / 1000, 1) if timed else 0.0,
            "cost_per_request": money(r["cost_micros"] // n) if n else "0",
            "cost": money(r["cost_micros"]), "currency": r["currency"],
            "error_rate": round(100 * r["errors"] / n, 2) if n else 0.0,
        })
    return {"versions": out, "since": since_text, "app": page.arg("app") or ""}
