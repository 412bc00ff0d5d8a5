"""The meter finisher: turns a finished request into one usage event per attempt.

Counts come from the upstream's ``usage`` when it reported one (a reported zero is
kept). Otherwise (a cancelled stream, an upstream that reports nothing) the gateway
counts the prompt and the text it relayed itself and marks the event
``usage_source=estimated``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import orjson

from tokenplane.cache.billing import HitCharge
from tokenplane.config.schema import ModelConfig
from tokenplane.dialects.usage import Usage
from tokenplane.metering.events import UsageEvent
from tokenplane.metering.outcomes import UNRESOLVED_MODEL, outcome_of
from tokenplane.observe.meter_series import RequestSeries, SeriesBook
from tokenplane.observe.metrics import GatewayMetrics
from tokenplane.pipeline.context import RequestContext
from tokenplane.pipeline.upstream_call import relayed_text
from tokenplane.routing.gateway.prompt_blocks import segment_runs
from tokenplane.tokens.counts import TokenCounts
from tokenplane.tokens.predictor import LengthKey, LengthPredictor

_KINDS = ("system", "history", "context", "tools", "user", "cached", "output", "reasoning")


class Recorder(Protocol):
    def record(self, event: UsageEvent) -> Awaitable[Any]: ...


class HitBilling(Protocol):
    """A cache hit's charge (``pipeline/cache_stage.CacheBilling``): on its ledger
    event, and what admission settles it at."""

    def charge(self, ctx: RequestContext) -> HitCharge | None: ...

    def bill_hit(self, event: UsageEvent, ctx: RequestContext) -> None: ...


class Calibrator(Protocol):
    def calibrate(self, alias: str, features: dict[str, int], reported_prompt: int) -> None: ...


def final_counts(ctx: RequestContext, count_text: Callable[[ModelConfig, str], int]) -> TokenCounts:
    """The request's counts: sources from the gateway, totals from the upstream."""
    if ctx.cache_hit is not None:  # served from the cache: nothing processed upstream
        return TokenCounts()
    c = ctx.counts
    counts = TokenCounts(c.system, c.history, c.context, c.tools, c.user)
    u = Usage.read(ctx.usage)
    if u is not None:
        ctx.usage_source = "upstream"
        _rescale(counts, u.input)
        counts.cached = u.cached
        counts.output = u.output
        counts.reasoning = u.reasoning
        return counts
    ctx.usage_source = "estimated"
    if ctx.model is not None and ctx.upstream_start is not None:
        answer = ctx.response_text
        text, reasoning = answer if isinstance(answer, tuple) else relayed_text(ctx)
        counts.reasoning = count_text(ctx.model, reasoning) if reasoning else 0
        counts.output = (count_text(ctx.model, text) if text else 0) + counts.reasoning
    if ctx.upstream_start is None:  # never sent: nothing was processed upstream
        counts = TokenCounts()
    return counts


def settled_counts(
    ctx: RequestContext, count_text: Callable[[ModelConfig, str], int]
) -> TokenCounts:
    """:func:`final_counts` computed once per attempt and kept on ``ctx`` (the meter
    and admission finishers both need it)."""
    if ctx.final is not None and ctx.final[0] == ctx.attempt:
        return ctx.final[1]
    counts = final_counts(ctx, count_text)
    ctx.final = (ctx.attempt, counts)
    return counts


def _rescale(counts: TokenCounts, prompt: int) -> None:
    """Makes the sources add up to the upstream's prompt count (the truth), keeping
    the gateway's split; any difference goes to the current user turn."""
    diff = prompt - counts.prompt
    if diff >= 0 or counts.user + diff >= 0:
        counts.user += diff
        return
    counts.system = counts.history = counts.context = counts.tools = 0
    counts.user = prompt


def cache_writes(ctx: RequestContext, event: UsageEvent) -> None:
    """The prompt-cache writes the upstream reported (5-minute and 1-hour)."""
    if ctx.usage is None or ctx.cache_hit is not None or ctx.usage_source != "upstream":
        return
    u = Usage.read(ctx.usage)
    if u is not None and u.cache_write:
        event.cache_write_tokens = u.cache_write
        event.cache_write_1h_tokens = u.cache_write_1h


def client_name(user_agent: str | None) -> str | None:
    """A User-Agent's product (``claude-cli/2.1.3 (external, cli)`` -> ``claude-cli``;
    ``Anthropic/Python 0.60`` -> ``anthropic-python``; ``OpenAI/Python 1.99`` ->
    ``openai-python``), at most 64 characters; None without one."""
    if not user_agent:
        return None
    product = user_agent.strip().split(" ", 1)[0]
    name, _, rest = product.partition("/")
    if name in ("Anthropic", "OpenAI", "AsyncAnthropic", "AsyncOpenAI") and rest:
        lang = user_agent.split(" ", 1)[0].split("/", 1)[1]
        name = f"{name.removeprefix('Async')}-{lang}"
    return name.lower()[:64] or None


def prefix_segments(ctx: RequestContext) -> str | None:
    """The prompt's prefix fingerprints for the ledger (replay): the route stage's block
    hashes in their compact form, JSON ``[[segment hash, blocks], ...]``; None when the
    request was never routed or has no full block. No hashing of the prompt again."""
    route = ctx.route
    if route is None or not route.req.block_hashes:
        return None
    return orjson.dumps(segment_runs(route.req.block_hashes)).decode()


def context_fields(ctx: RequestContext, event: UsageEvent) -> None:
    """The RAG context and overflow columns (ledger v5)."""
    packed, over = ctx.packed, ctx.overflow
    if packed is not None:
        event.context_offered_tokens = packed.offered_tokens
        event.context_kept_tokens = packed.kept_tokens
        event.context_dropped_tokens = packed.dropped_tokens
        by_reason = packed.dropped_by_reason()
        event.context_dropped = orjson.dumps(by_reason).decode() if by_reason else None
    if over is not None:
        event.overflow, event.overflow_from = over.action, over.from_alias
        event.history_dropped_messages = over.dropped_messages
        event.history_dropped_tokens = over.dropped_tokens


class MeterFinisher:
    """Records the usage event, updates the token / cost metrics, and teaches the
    output-length predictor (successful requests) and the estimator of an alias with
    no tokenizer (upstream-reported prompt counts)."""

    def __init__(
        self,
        recorder: Recorder,
        metrics: GatewayMetrics,
        count_text: Callable[[ModelConfig, str], int],
        predictor: LengthPredictor | None = None,
        calibrator: Calibrator | None = None,
        hits: HitBilling | None = None,
    ) -> None:
        self.recorder = recorder
        self.metrics = metrics
        self.count_text = count_text
        self.predictor = predictor
        self.calibrator = calibrator
        self.hits = hits
        self.series = SeriesBook(metrics)

    async def finish(self, ctx: RequestContext) -> None:
        now = time.time()
        p = ctx.principal
        alias = ctx.alias or UNRESOLVED_MODEL
        counts = settled_counts(ctx, self.count_text)
        labels = self.metrics.principal_values(p)
        outcome = outcome_of(ctx.status, ctx.http_status, ctx.upstream_start is not None)
        series = self.series.get((alias, ctx.operation.name, ctx.status, ctx.http_status,
                                  outcome or "ok", labels))
        self._observe(ctx, counts, series, now)
        if p is None:
            return
        self._learn(ctx, counts, alias, p.tenant, p.app or "")
        event = UsageEvent(
            ctx.request_id, ctx.attempt, now,
            tenant=p.tenant, department=p.department or "", app=p.app or "",
            key_id=p.key_id, end_user=p.end_user or "", model=alias,
            backend=ctx.endpoint.id if ctx.endpoint else "",
            response_model=ctx.response_model or "", operation=ctx.operation.name,
            status=ctx.status, http_status=ctx.http_status, error_code=ctx.error_code,
            stream=ctx.stream, arrival_ts=ctx.arrival, upstream_start_ts=ctx.upstream_start,
            first_token_ts=ctx.first_token, last_token_ts=ctx.last_token,
            queue_wait_s=ctx.queue_wait, input_system=counts.system, input_history=counts.history,
            input_context=counts.context, input_tools=counts.tools, input_user=counts.user,
            input_tokens=counts.prompt, cached_input_tokens=counts.cached,
            output_tokens=counts.output, reasoning_tokens=counts.reasoning,
            estimated_input_tokens=ctx.estimated_input_tokens,
            usage_source=ctx.usage_source, flags=list(ctx.flags),
            system_fingerprint=ctx.system_fingerprint,
            model_version=ctx.model_version,
            slo_class=ctx.slo_class,
            prefix_segments=prefix_segments(ctx),
            tool_calls=ctx.tool_calls,
            finish_reason=ctx.finish_reason if ctx.upstream_start is not None else None,
        )
        cache_writes(ctx, event)
        event.client = client_name(ctx.headers.get("user-agent"))
        if (ctx.packed is not None or ctx.overflow is not None) \
                and ctx.upstream_start is not None:  # like the prompt's tokens: once sent
            if ctx.settling is not None:
                await ctx.settling  # counted off the request's path (context_stage)
            context_fields(ctx, event)
        step = ctx.session
        if step is not None:
            event.session_id, event.session_step = step.session_id, step.step
            event.tool_output_tokens = step.tool_output_tokens
            event.tool_output_added = step.tool_output_added
            event.tool_output_removed = step.tool_output_removed
        if ctx.cache_hit is not None and self.hits is not None:
            self.hits.bill_hit(event, ctx)  # priced here: the recorder leaves it
        durable = self.recorder.record(event)  # prices the event
        if event.cost_micros:
            series.cost(event.currency).inc(event.cost_micros)
        await durable

    def _learn(
        self, ctx: RequestContext, counts: TokenCounts, alias: str, tenant: str, app: str
    ) -> None:
        if ctx.usage_source != "upstream" or ctx.upstream_start is None:
            return
        features = ctx.input_features
        if self.calibrator is not None and features:
            self.calibrator.calibrate(alias, features, counts.prompt)
        if (self.predictor is not None and ctx.status == "ok"
                and ctx.operation.generates and "budget_stopped" not in ctx.flags):
            each = ctx.operation.prompts(ctx.body)  # a batch: learnt per prompt, as
            self.predictor.observe(LengthKey(tenant, app, alias),  # admission predicts
                                   counts.prompt // each, counts.output // each)

    @staticmethod
    def _observe(
        ctx: RequestContext, counts: TokenCounts, series: RequestSeries, now: float,
    ) -> None:
        series.requests.inc()
        for kind in _KINDS:
            n = getattr(counts, kind)
            if n:
                series.tokens(kind).inc(n)
        series.e2e.observe(now - ctx.arrival)
        if ctx.first_token is not None and ctx.upstream_start is not None:
            series.ttft().observe(ctx.first_token - ctx.arrival)
            if ctx.last_token is not None and counts.output > 1:
                series.tpot().observe(
                    (ctx.last_token - ctx.first_token) / (counts.output - 1)
                )
