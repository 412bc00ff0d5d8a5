"""The one place the request pipeline is assembled from a worker's parts.

Stages in order: auth, validate, [session], context (RAG packing, pinned marks;
with governance the documents screened around it), [input guard], tokens (with the
overflow policy), [context cap], admission, [cache lookup], [schedule], route (a
cache hit skips these two). The upstream call retries across replicas and
fallbacks; the cache serves a hit or stores a miss's answer around it
(pipeline/cache_stage.py); with governance the output guard wraps both. Finishers,
once per request: routing, meter,
[SLO counters], [audit: before admission, which settles and drops the ticket whose
limits the record lists], admission, [tracing], [access log]. The meter finisher also
records each failed attempt.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from opentelemetry.trace import Tracer

from tokenplane.admission.gateway.service import AdmissionService
from tokenplane.admission.gateway.side_calls import SideAdmission
from tokenplane.auth.principal import Principal
from tokenplane.cache.gateway.service import ResponseCache
from tokenplane.compose.governance import Governance
from tokenplane.compose.routing import Routing
from tokenplane.config.context_schema import ContextConfig
from tokenplane.context.packer import ContextPacker
from tokenplane.governance.guard_policy import GuardPolicies
from tokenplane.governance.pii_policy import PiiPolicy
from tokenplane.governance.tools import ToolMode
from tokenplane.meta.keystore import KeyStore
from tokenplane.observe.access_log import AccessLog
from tokenplane.observe.metrics import GatewayMetrics
from tokenplane.pipeline.access_log_stage import AccessLogFinisher
from tokenplane.pipeline.admission_stage import AdmissionFinisher, AdmissionStage
from tokenplane.pipeline.audit_stage import AuditFinisher
from tokenplane.pipeline.cache_stage import CachedCall, CacheStage, UnlessHit
from tokenplane.pipeline.context_stage import ContextStage
from tokenplane.pipeline.count_offload import CountOffload
from tokenplane.pipeline.document_guard import DocumentGuard
from tokenplane.pipeline.guard_stages import ContextPolicyStage, InputGuardStage
from tokenplane.pipeline.meter_stage import MeterFinisher
from tokenplane.pipeline.output_guard import GuardedCall
from tokenplane.pipeline.overflow import Overflow
from tokenplane.pipeline.pace_stage import PaceStage, SizeRefusalFinisher
from tokenplane.pipeline.runner import Pipeline
from tokenplane.pipeline.session_stage import SessionStage
from tokenplane.pipeline.slo_stage import SloFinisher
from tokenplane.pipeline.stages import (
    AuthStage,
    EarlyCountStage,
    Finisher,
    Stage,
    TokensStage,
    ValidateStage,
)
from tokenplane.pipeline.tracing_stage import SpanFinisher
from tokenplane.pipeline.upstream_call import Call, UpstreamCall
from tokenplane.routing.model_map import ModelMap
from tokenplane.slo.live import SloCounters
from tokenplane.tokens.model_counters import ModelCounters
from tokenplane.upstream.pool import Pool


@dataclass
class PipelineParts:
    """What the pipeline's stages and finishers are made of (built by ``app``)."""

    keys: KeyStore
    pools: dict[str, Pool]
    allowed_models: Callable[[str], set[str] | None]
    counters: ModelCounters
    admission: AdmissionService
    routing: Routing
    meter: MeterFinisher
    governance: Governance | None = None
    tracer: Tracer | None = None  # set when spans are exported (observe.otlp_endpoint)
    slo_counters: SloCounters | None = None  # set when SLOs are configured
    access_log: AccessLog | None = None  # observe.access_log.enabled
    context: ContextConfig = field(default_factory=lambda: ContextConfig())  # type: ignore[call-arg]
    packer: ContextPacker | None = None  # shared with POST /v1/context/pack (its ranker)
    sessions: SessionStage | None = None  # agent sessions (config.sessions.enabled)
    cache: ResponseCache | None = None  # the response cache (config.cache)
    metrics: GatewayMetrics | None = None  # the guards' injection verdicts
    model_map: ModelMap | None = None  # the model names clients send -> aliases
    # large prompts counted, many documents packed, off the loop (shared with
    # POST /v1/context/pack: one set of slots, one rotation of tenants)
    offload: CountOffload = field(default_factory=CountOffload)


def guard_may_change(policies: GuardPolicies) -> Callable[[Principal], bool]:
    """Whether the principal's input guard may change the prompt (PII masked or
    tokenized, tools stripped), so that it is only counted after the guard."""
    def rewrites(pii: PiiPolicy | None) -> bool:
        return pii is not None and pii.rewrites

    def shrinks(principal: Principal) -> bool:
        pol = policies.for_principal(principal.tenant, principal.app)
        return (rewrites(pol.prompt) or rewrites(pol.tool_results)
                or (pol.tools.allowed is not None and pol.tools.mode is ToolMode.STRIP))
    return shrinks


def build_pipeline(parts: PipelineParts, *, max_attempts: int) -> Pipeline:
    gov, routing, counters = parts.governance, parts.routing, parts.counters
    overflow = Overflow([p.model for p in parts.pools.values()], parts.context, parts.pools,
                        counters, parts.allowed_models)
    offload = parts.offload
    side = SideAdmission(parts.admission)  # callers past a rate refused at once
    stages: list[Stage] = [AuthStage(parts.keys), PaceStage(side),
                           ValidateStage(parts.pools, parts.allowed_models, parts.model_map)]
    if parts.sessions is not None:  # before counting: its tool-output policy may shrink it
        stages.append(parts.sessions)
    documents = DocumentGuard(gov.policies, parts.metrics) if gov is not None else None
    stages.append(ContextStage(counters, parts.context, overflow, offload, parts.packer,
                               documents))  # the documents screened around the packer
    tokens = TokensStage(counters, offload, overflow)
    if gov is not None:  # a large prompt the guard leaves is counted before it scans it
        stages.append(EarlyCountStage(tokens, guard_may_change(gov.policies)))
        # after validation: counts see what is sent
        stages.append(InputGuardStage(gov.policies, parts.metrics))
    stages.append(tokens)
    if gov is not None:
        stages.append(ContextPolicyStage())
    stages.append(AdmissionStage(parts.admission))
    cache = parts.cache
    if cache is not None:
        requests = routing.requests  # a canary split's version, chosen once per request
        stages.append(CacheStage(cache, lambda ctx: requests.info(ctx).version))
    if routing.schedule_stage is not None:
        stages.append(routing.schedule_stage if cache is None
                      else UnlessHit(routing.schedule_stage))
    stages.append(routing.route_stage if cache is None else UnlessHit(routing.route_stage))
    call: Call = UpstreamCall(max_attempts, router=routing.requests)
    if cache is not None:
        call = CachedCall(call, cache)
    if gov is not None:
        call = GuardedCall(call)
    finishers: list[Finisher] = [routing.finisher, parts.meter]
    if parts.slo_counters is not None:
        finishers.append(SloFinisher(parts.slo_counters, counters.count_text))
    if gov is not None and gov.audit is not None:
        finishers.append(AuditFinisher(gov.audit, gov.policies))
    finishers.append(AdmissionFinisher(parts.admission, counters.count_text, parts.meter.hits))
    finishers.append(SizeRefusalFinisher(side))  # oversized prompts count against rpm
    if parts.tracer is not None:
        finishers.append(SpanFinisher(parts.tracer, counters.count_text))
    if parts.access_log is not None:  # last: it reads the settled counts
        finishers.append(AccessLogFinisher(parts.access_log))
    return Pipeline(stages, call, finishers, attempt_finishers=[parts.meter])
