"""``RequestFacts`` from a ledger row or usage event (the request's last attempt)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tokenplane.metering.events import UsageEvent
from tokenplane.slo.verdict import RequestFacts

# the event fields ``facts_from_row`` reads (the ledger columns of ``slo_rows``)
_FIELDS = ("ts", "model", "tenant", "department", "app", "status", "http_status",
           "error_code", "stream", "arrival_ts", "first_token_ts", "last_token_ts",
           "output_tokens", "model_version")


def facts_from_event(event: UsageEvent, slo_class: str = "") -> RequestFacts:
    row = {name: getattr(event, name) for name in _FIELDS}
    row["slo_class"] = slo_class
    return facts_from_row(row)


def facts_from_row(row: Mapping[str, Any]) -> RequestFacts:
    """``facts_from_event`` for a row of ``metering.request_history.slo_rows`` (no
    event object built: the evaluation rounds read many rows)."""
    arrival, first, last = row["arrival_ts"], row["first_token_ts"], row["last_token_ts"]
    ts, out = float(row["ts"]), int(row["output_tokens"])
    ttft = max(0.0, first - arrival) if first is not None and arrival is not None else None
    tpot = (max(0.0, last - first) / (out - 1)
            if first is not None and last is not None and out >= 2 else None)
    return RequestFacts(
        ts=ts, model=row["model"], tenant=row["tenant"], department=row["department"],
        app=row["app"], slo_class=row["slo_class"] or "", status=row["status"],
        http_status=int(row["http_status"]), error_code=row["error_code"],
        stream=bool(row["stream"]), ttft_s=ttft, tpot_s=tpot,
        latency_s=max(0.0, ts - arrival) if arrival is not None else None,
        version=row["model_version"] or "",
    )
