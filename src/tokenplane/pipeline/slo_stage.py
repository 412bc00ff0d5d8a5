"""The SLO finisher: judges each finished request for the live SLO counters.

It runs after the meter (whose settled counts it reads) and only when SLOs are
configured; a request with no principal (refused at authentication) is no tenant's
event and is skipped, as the ledger skips it."""

from __future__ import annotations

import time
from collections.abc import Callable

from tokenplane.config.schema import ModelConfig
from tokenplane.pipeline.context import RequestContext
from tokenplane.pipeline.meter_stage import settled_counts
from tokenplane.slo.live import SloCounters
from tokenplane.slo.verdict import RequestFacts


def request_facts(ctx: RequestContext, output_tokens: int, now: float) -> RequestFacts:
    p = ctx.principal
    assert p is not None
    ttft = tpot = None
    if ctx.first_token is not None:
        ttft = max(0.0, ctx.first_token - ctx.arrival)
        if ctx.last_token is not None and output_tokens >= 2:
            tpot = max(0.0, ctx.last_token - ctx.first_token) / (output_tokens - 1)
    return RequestFacts(
        ts=now, model=ctx.alias or "", tenant=p.tenant, department=p.department or "",
        app=p.app or "", slo_class=ctx.slo_class or "", status=ctx.status,
        http_status=ctx.http_status, error_code=ctx.error_code, stream=ctx.stream,
        ttft_s=ttft, tpot_s=tpot, latency_s=max(0.0, now - ctx.arrival),
        version=ctx.model_version or "",
    )


class SloFinisher:
    def __init__(
        self, counters: SloCounters, count_text: Callable[[ModelConfig, str], int]
    ) -> None:
        self.counters = counters
        self.count_text = count_text

    async def finish(self, ctx: RequestContext) -> None:
        if ctx.principal is None:
            return
        output = settled_counts(ctx, self.count_text).output
        self.counters.record(request_facts(ctx, output, time.time()))
