"""``RequestFacts`` from a ledger usage event (the request's last attempt)."""

from __future__ import annotations

from tokenplane.metering.events import UsageEvent
from tokenplane.slo.verdict import RequestFacts


def facts_from_event(event: UsageEvent, slo_class: str = "") -> RequestFacts:
    ttft = tpot = latency = None
    if event.first_token_ts is not None and event.arrival_ts is not None:
        ttft = max(0.0, event.first_token_ts - event.arrival_ts)
    if (
        event.first_token_ts is not None
        and event.last_token_ts is not None
        and event.output_tokens >= 2
    ):
        tpot = max(0.0, event.last_token_ts - event.first_token_ts) / (event.output_tokens - 1)
    if event.arrival_ts is not None:
        latency = max(0.0, event.ts - event.arrival_ts)
    return RequestFacts(
        ts=event.ts,
        model=event.model,
        tenant=event.tenant,
        department=event.department,
        app=event.app,
        slo_class=slo_class,
        status=event.status,
        http_status=event.http_status,
        error_code=event.error_code,
        stream=event.stream,
        ttft_s=ttft,
        tpot_s=tpot,
        latency_s=latency,
        version=event.model_version or "",
    )
