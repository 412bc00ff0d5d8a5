"""Composition root: ``build_app(config)`` assembles every part. No side effects at import."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web
from opentelemetry.sdk.trace import TracerProvider

from tokenplane.admission.gateway.service import AdmissionService
from tokenplane.admission.gateway.side_calls import SideAdmission
from tokenplane.admission.stores.local_server import SOCKET_ENV, WORKERS_ENV
from tokenplane.api.access_log_middleware import access_log_middleware
from tokenplane.api.admin import AdminRoutes
from tokenplane.api.admin_advice import AdminAdviceRoutes
from tokenplane.api.admin_audit import AdminAuditRoutes
from tokenplane.api.admin_autoscale import AdminAutoscaleRoutes
from tokenplane.api.admin_cache import AdminCacheRoutes
from tokenplane.api.admin_gate import admin_gate
from tokenplane.api.admin_sessions import AdminSessionRoutes
from tokenplane.api.admin_slos import AdminSloRoutes
from tokenplane.api.admin_tools import AdminToolsRoutes
from tokenplane.api.admin_usage import AdminUsageRoutes
from tokenplane.api.context_routes import ContextRoutes
from tokenplane.api.cors import CORS, Cors, add_cors_headers, cors_middleware
from tokenplane.api.early_refusals import refusal_screen
from tokenplane.api.feedback_routes import FeedbackRoutes
from tokenplane.api.front.limits import FRONT_LIMITS, FrontLimits
from tokenplane.api.front.screen import FRONT_SCREEN
from tokenplane.api.mcp_routes import McpRoutes
from tokenplane.api.messages_routes import MessagesRoutes
from tokenplane.api.metrics_routes import (
    MetricsAccess,
    MetricsListener,
    MetricsRoutes,
    MetricsView,
    metrics_token,
)
from tokenplane.api.openai_routes import (
    OPENAI_ROUTES,
    OpenAIRoutes,
    RequestIds,
    envelope_middleware,
)
from tokenplane.autoscale.gateway.build import build_autoscaler
from tokenplane.autoscale.gateway.collector import AutoscaleCollector
from tokenplane.autoscale.gateway.controller import AutoscaleController
from tokenplane.autoscale.gateway.keda.build import keda_actuators
from tokenplane.cache.gateway.service import ResponseCache
from tokenplane.compose.cache import build_cache
from tokenplane.compose.endpoints import backend_endpoints
from tokenplane.compose.governance import Governance, open_governance
from tokenplane.compose.pipeline import PipelineParts, build_pipeline
from tokenplane.compose.preflight import build_counters
from tokenplane.compose.routing import Routing, build_routing
from tokenplane.config.schema import GatewayConfig, listen_address
from tokenplane.console.parts import ConsoleParts
from tokenplane.console.routes import ConsoleRoutes
from tokenplane.context.packer import ContextPacker
from tokenplane.engine.serving.service import EngineService
from tokenplane.governance.audit.service import audit_root
from tokenplane.mcp.gateway.build import build_mcp
from tokenplane.meta.keystore import LAST_USED_EVERY_S, KeyStore
from tokenplane.meta.limit_store import LimitStore
from tokenplane.meta.open_stores import open_directory, open_key_store, open_limit_store
from tokenplane.metering.meter import Meter
from tokenplane.metering.price_book import price_book
from tokenplane.observe.access_log import AccessLog
from tokenplane.observe.metrics import GatewayMetrics
from tokenplane.observe.peers import MetricsPeers
from tokenplane.observe.tracing import TRACER_NAME, otlp_provider
from tokenplane.operations.registry import standard_operations
from tokenplane.periodic import Periodic
from tokenplane.pipeline.cache_stage import CacheBilling
from tokenplane.pipeline.count_offload import CountOffload
from tokenplane.pipeline.document_guard import DocumentGuard
from tokenplane.pipeline.meter_stage import MeterFinisher
from tokenplane.pipeline.runner import Pipeline
from tokenplane.pipeline.session_stage import SessionStage
from tokenplane.routing.model_map import MapRule, ModelMap
from tokenplane.sessions.gateway.steps import StepCounter, make_steps
from tokenplane.sessions.settings import SessionSettingsBook
from tokenplane.slo.canary import guard_spec
from tokenplane.slo.canary_guards import CanaryGuards
from tokenplane.slo.gateway.alerting import SloAlerting
from tokenplane.slo.gateway.collector import SloCollector
from tokenplane.slo.gateway.leader import open_leadership
from tokenplane.slo.gateway.minutes_store import MinuteStore
from tokenplane.slo.gateway.notify import WebhookNotifier
from tokenplane.slo.gateway.service import SloService
from tokenplane.slo.live import SloCounters
from tokenplane.slo.protection import BudgetProtection, protect_spec
from tokenplane.slo.spec import Slo, slo_from_config
from tokenplane.tokens.model_counters import ModelCounters
from tokenplane.tokens.predictor import LengthPredictor
from tokenplane.upstream.pool import Pool

GATEWAY_KEY: web.AppKey[Gateway] = web.AppKey("gateway")
# the metrics listener (None when observe.metrics.listen is null); its port once started
METRICS_LISTENER: web.AppKey[MetricsListener | None] = web.AppKey("metrics_listener")
# how often a worker looks for the journals of dead siblings (a flock try per writer id)
# and replays them into the ledger: a dead worker's acknowledged usage is in reports
# within about this, whether or not its replacement has started yet
ADOPT_INTERVAL_S = 1.0


@dataclass
class Gateway:
    """Every part of a running gateway, built once per worker."""

    config: GatewayConfig
    home: Path
    keys: KeyStore
    counters: ModelCounters
    pools: dict[str, Pool]
    meter: Meter
    metrics: GatewayMetrics
    pipeline: Pipeline
    services: list[EngineService] = field(default_factory=list)
    admission: AdmissionService | None = None
    limits: LimitStore | None = None  # the metadata database's limits, read by admission
    # output lengths per (tenant, app, alias), observed by the meter finisher
    predictor: LengthPredictor = field(default_factory=LengthPredictor)
    tracing: TracerProvider | None = None  # set when observe.otlp_endpoint is configured
    governance: Governance | None = None  # guards and audit (config.governance)
    routing: Routing | None = None  # live replica view, router, scheduler queues
    slo: SloService | None = None  # SLO evaluation from the ledger (config.slos)
    access_log: AccessLog | None = None  # observe.access_log (on by default)
    # RAG context packing: the chat stage's and POST /v1/context/pack's (one cache)
    packer: ContextPacker = field(default_factory=ContextPacker)
    session_steps: StepCounter | None = None  # sessions' step numbers (config.sessions)
    cache: ResponseCache | None = None  # the response cache (config.cache)
    autoscale: AutoscaleController | None = None  # config.autoscale (off unless set)
    # the pipeline's off-loop counting slots, shared with POST /v1/context/pack
    offload: CountOffload = field(default_factory=CountOffload)
    key_use: Periodic | None = None  # writes the keys' last use (meta/keystore.py)

    def models_for(self, tenant: str) -> list[str]:
        allowed = self.allowed_models(tenant)
        return [a for a in self.pools if allowed is None or a in allowed]

    def allowed_models(self, tenant: str) -> set[str] | None:
        return allowed_models(self.config, tenant)

    async def start(self) -> None:
        for s in self.services:
            await s.start()
        await self.meter.start()
        if self.admission is not None:
            await self.admission.start()
        if self.governance is not None and self.governance.audit is not None:
            await self.governance.audit.start()
        if self.routing is not None:
            await self.routing.start()
        if self.slo is not None:
            self.slo.start()
        if self.access_log is not None:
            self.access_log.start()
        if self.cache is not None:
            await self.cache.start()
        if self.autoscale is not None:
            await self.autoscale.start()
        self.key_use = Periodic("key-last-used", LAST_USED_EVERY_S, self._flush_key_use,
                                log=logging.getLogger("tokenplane.keys"),
                                failure="writing the keys' last use failed")
        self.key_use.start()

    async def _flush_key_use(self) -> None:
        await asyncio.to_thread(self.keys.flush_last_used)

    async def close(self) -> None:
        if self.autoscale is not None:
            await self.autoscale.close()  # its replicas drain while the rest still runs
        if self.slo is not None:
            await self.slo.close()
        if self.routing is not None:
            await self.routing.close()
        for s in self.services:
            await s.close()
        for pool in self.pools.values():
            for ep in pool.endpoints:
                await ep.transport.close()
        await self.meter.close()
        if self.governance is not None and self.governance.audit is not None:
            await self.governance.audit.close()
        if self.admission is not None:
            await self.admission.close()
        if self.tracing is not None:
            await asyncio.to_thread(self.tracing.shutdown)  # flushes the span batch
        if self.access_log is not None:
            await self.access_log.close()  # after the requests in flight have finished
        if self.session_steps is not None:
            await self.session_steps.close()
        if self.cache is not None:
            await self.cache.close()
        if self.key_use is not None:
            await self.key_use.close()
            with contextlib.suppress(Exception):  # the database may be gone: not fatal
                await self._flush_key_use()
        self.keys.close()


def build_gateway(config: GatewayConfig, worker_id: str | None = None) -> Gateway:
    home = Path(config.data_dir or ".tokenplane")
    home.mkdir(parents=True, exist_ok=True)
    keys = open_key_store(home, config.database_url)
    counters = build_counters(config)  # BuildError: `serve` and `config check` ran preflight
    services: list[EngineService] = []
    pools: dict[str, Pool] = {}
    for m in config.models:
        pool = Pool(m)
        for i, b in enumerate(m.backends):
            pool.endpoints.extend(backend_endpoints(m, b, i, counters, services))
        pools[m.alias] = pool
    meter = Meter(home, config.database_url, writer_id=worker_id, prices=price_book(config.models),
                  flush_interval_s=0.25, ack=config.metering.ack,
                  adopt_interval_s=ADOPT_INTERVAL_S)
    metrics = GatewayMetrics(principal_labels=config.observe.labels)
    predictor = LengthPredictor(default=config.admission.default_output_tokens)
    limits = open_limit_store(keys, home, config.admission.limits_reload_s)
    admission = AdmissionService.build(
        config.admission, config.redis_url, home, metrics, lambda: meter.prices, predictor,
        limits=limits, local_socket=os.environ.get(SOCKET_ENV),
        workers=int(os.environ.get(WORKERS_ENV, "1")))
    routing = build_routing(config, pools, predictor, metrics, counters.count_text)
    governance = open_governance(config.governance, home, worker_id)
    tracing = otlp_provider(config.observe)
    slos = [slo_from_config(s) for s in config.slos]
    slo_counters = SloCounters(slos) if slos else None
    alc = config.observe.access_log
    access_log = AccessLog(alc.path, alc.sample) if alc.enabled else None
    packer = ContextPacker()
    steps = (make_steps(config.redis_url, config.admission.key_prefix,
                        config.admission.timeout_s) if config.sessions.enabled else None)
    sessions = (SessionStage(SessionSettingsBook(config.sessions), steps, counters, metrics)
                if steps is not None else None)
    cache = build_cache(config, metrics.registry)
    hits = CacheBilling(cache, lambda: meter.prices) if cache is not None else None
    parts = PipelineParts(
        keys, pools, lambda tenant: allowed_models(config, tenant), counters, admission, routing,
        MeterFinisher(meter, metrics, counters.count_text, predictor, counters, hits),
        governance, tracing.get_tracer(TRACER_NAME) if tracing is not None else None,
        slo_counters, access_log, context=config.context, packer=packer, sessions=sessions,
        cache=cache, metrics=metrics, model_map=model_map_of(config))
    slo = build_slo_service(config, home, slos, meter, routing)
    gw = Gateway(config, home, keys, counters, pools, meter, metrics,
                 build_pipeline(parts, max_attempts=config.routing.max_attempts),
                 services=services, admission=admission, limits=limits, predictor=predictor,
                 tracing=tracing, governance=governance, routing=routing, slo=slo,
                 access_log=access_log, packer=packer, session_steps=steps, cache=cache,
                 offload=parts.offload)
    gw.autoscale = build_autoscaler(config, home, pools, routing, counters, slo,
                                    lambda: meter.sink, actuators=keda_actuators(config, pools))
    if gw.autoscale is not None:
        metrics.registry.register(AutoscaleCollector(gw.autoscale))
    track_learning(gw)
    if slo is not None and slo_counters is not None:
        metrics.registry.register(SloCollector(slo_counters, slo))
    return gw


def build_slo_service(
    config: GatewayConfig, home: Path, slos: list[Slo], meter: Meter, routing: Routing
) -> SloService | None:
    """The SLO evaluation (None without SLOs), with alerting when webhooks are set and
    the canary guards of the version splits."""
    if not slos:
        return None
    cfg = config.slo_alerting
    alerting = None
    if cfg.webhooks:
        leader = open_leadership(home, config.database_url, config.redis_url,
                                 config.admission.key_prefix, cfg.evaluate_every)
        alerting = SloAlerting(leader, WebhookNotifier(cfg))
    specs = [guard_spec(alias, s.guard) for alias, s in config.routing.splits.items()
             if s.guard is not None]
    router = routing.router
    guards = (CanaryGuards(specs, slos, lambda g: router.roll_back(g.alias, g.stable))
              if specs else None)
    protection = restrict = None
    hub = routing.hub
    protects = [protect_spec(s.name, s.protect, hub.classes) for s in config.slos
                if s.protect is not None] if hub is not None else []
    if protects and hub is not None:
        protection, restrict = BudgetProtection(protects, slos), hub.restrict
    return SloService(slos, lambda: meter.sink, refresh_s=cfg.evaluate_every,
                      alerting=alerting, guards=guards, protection=protection,
                      restrict=restrict, minutes=MinuteStore(lambda: meter.sink))


def _metrics(app: web.Application, gw: Gateway, ids: RequestIds, worker_id: str | None,
             workers: int) -> tuple[MetricsListener | None, MetricsPeers | None]:
    """``/metrics`` on the public port (token or admin key), the metrics listener
    (``observe.metrics``), and with several workers their exchange of series."""
    cfg = gw.config.observe.metrics
    token = metrics_token(cfg)
    peers = None
    if workers > 1 and worker_id is not None:
        index = int(worker_id.removeprefix("w"))
        view = MetricsView(gw.metrics, worker_id)
        peers = MetricsPeers(gw.home / "run", index, workers, view.local)
        view.peers = peers
    else:
        view = MetricsView(gw.metrics, worker_id or "w0")
    routes = MetricsRoutes(view, MetricsAccess(gw.keys, token))
    routes.install(app)
    listener = None
    if cfg.listen is not None:
        host, port = listen_address(cfg.listen)
        listener = MetricsListener(routes, host, port, reuse_port=workers > 1, new_id=ids)
    app[METRICS_LISTENER] = listener
    return listener, peers


def model_map_of(config: GatewayConfig) -> ModelMap:
    """The config's ``model_map`` rules as the validate stage's map."""
    return ModelMap(MapRule(r.match, r.alias, frozenset(r.tenants) if r.tenants else None)
                    for r in config.model_map)


def allowed_models(config: GatewayConfig, tenant: str) -> set[str] | None:
    """The aliases a tenant may use (None: all of them)."""
    for t in config.tenants:
        if t.name == tenant and t.models is not None:
            return set(t.models)
    return None


def track_learning(gw: Gateway) -> None:
    """Scrape-time metrics of the ledger, the estimator and the length predictor."""
    gw.metrics.track_ledger(lambda: gw.meter.stats().as_dict())
    counters, predictor = gw.counters, gw.predictor

    def estimator_errors() -> list[tuple[tuple[str, ...], float, int]]:
        out: list[tuple[tuple[str, ...], float, int]] = []
        for alias in counters.estimated_aliases:
            st = counters.estimator.error_stats(alias)
            out.append(((alias,), st.mean_abs_rel, st.samples))
        return out

    gw.metrics.track_errors(
        "tokenplane_estimator_error_ratio", "Mean absolute relative error of the token "
        "estimator's prompt counts against the upstream's (aliases with no tokenizer).",
        ["model"], estimator_errors)
    gw.metrics.track_errors(
        "tokenplane_predictor_error_ratio", "Mean absolute relative error of the output-"
        "length predictor's p50 against actual output tokens (recent requests).", [],
        lambda: [((), predictor.error(), predictor.error_samples)])


def build_app(config: GatewayConfig, worker_id: str | None = None,
              workers: int = 1) -> web.Application:
    """The gateway's aiohttp application; ``workers`` > 1: this is worker ``worker_id``
    (``w<index>``) of ``serve --workers N`` (metrics are summed over the workers)."""
    gw = build_gateway(config, worker_id)
    ids = RequestIds()
    middlewares = [envelope_middleware(ids, standard_operations().dialect_for)]
    cors = Cors(config.server.cors) if config.server.cors is not None else None
    if cors is not None:  # inside the envelope: a refused preflight is an enveloped 403
        middlewares.append(cors_middleware(cors))
    if gw.access_log is not None:  # outermost: it sees the enveloped answer
        paths = set(standard_operations().paths)  # logged by the pipeline's finisher
        middlewares.insert(0, access_log_middleware(gw.access_log, paths))
    # inside the envelope (its 403 is rendered); admin actions go to the audit log
    middlewares.append(admin_gate(gw.keys, lambda: gw.governance.audit
                                  if gw.governance is not None else None))
    app = web.Application(
        middlewares=middlewares,
        client_max_size=config.server.max_body_bytes,
    )
    app[GATEWAY_KEY] = gw
    app[FRONT_LIMITS] = FrontLimits.of(config.server)  # the front's deadlines and caps
    app[CORS] = cors  # the front answers its routes' preflights with it too
    if cors is not None:
        app.on_response_prepare.append(add_cors_headers(cors))
    routes = OpenAIRoutes(gw.pipeline, gw.keys, gw.metrics, gw.models_for,
                          config.server.max_body_bytes, new_id=ids,
                          stream_stall_s=config.server.stream_stall_timeout_s)
    routes.install(app)
    app[OPENAI_ROUTES] = routes  # the HTTP/1.1 front serves the inference routes with it
    directory = open_directory(gw.keys)
    assert gw.admission is not None and gw.limits is not None
    AdminRoutes(gw.keys, directory, gw.admission, gw.limits).install(app)
    MessagesRoutes(gw.keys, gw.pools, gw.allowed_models, model_map_of(config),
                   gw.counters).install(app)
    side = SideAdmission(gw.admission)
    app[FRONT_SCREEN] = refusal_screen(gw.keys, side)  # 429s before megabytes are read
    ContextRoutes(gw.keys, {m.alias: m for m in config.models}, gw.counters.count_text,
                  gw.allowed_models, config.context, gw.packer,
                  DocumentGuard(gw.governance.policies, gw.metrics)
                  if gw.governance is not None else None, offload=gw.offload,
                  admission=side).install(app)
    AdminUsageRoutes(gw.keys, lambda: gw.meter.sink).install(app)
    AdminSessionRoutes(gw.keys, lambda: gw.meter.sink,
                       audit=audit_root(gw.home) if gw.governance is not None else None
                       ).install(app)
    # with the console on, every tenant's default advice is kept computed for its page
    advice = AdminAdviceRoutes(gw.keys, lambda: gw.meter.sink, keep=config.console.enabled,
                               saved=gw.home / "advice" / "default.json",
                               audit=audit_root(gw.home) if config.mcp is not None else None)
    advice.install(app)
    FeedbackRoutes(gw.keys, lambda: gw.meter.sink).install(app)
    AdminSloRoutes(gw.keys, gw.slo).install(app)
    AdminCacheRoutes(gw.keys, gw.cache).install(app)
    AdminAutoscaleRoutes(gw.keys, gw.autoscale).install(app)
    audit = gw.governance.audit if gw.governance is not None else None
    AdminAuditRoutes(gw.keys, audit_root(gw.home),
                     audit.flush if audit is not None else None).install(app)
    mcp = build_mcp(config, gw.metrics.registry, gw.allowed_models, gw.counters.tokenizer,
                    gw.governance.policies if gw.governance is not None else None, audit)
    if mcp is not None:  # the MCP gateway (docs/MCP.md): not an inference route
        McpRoutes(gw.keys, mcp.service).install(app)
    AdminToolsRoutes(gw.keys, audit_root(gw.home) if audit is not None else None,
                     audit.flush if audit is not None else None).install(app)
    if config.console.enabled:  # off the request path: its own routes, read-only
        ConsoleRoutes(ConsoleParts(
            config.console, gw.home, gw.keys, lambda: gw.meter.sink, gw.admission, gw.limits,
            gw.routing, audit.log.signer.verifier() if audit is not None else None,
            lambda: gw.meter.prices, mcp_configured=mcp is not None,
        )).install(app)
    listener, peers = _metrics(app, gw, ids, worker_id, workers)

    async def on_startup(_: web.Application) -> None:
        await gw.start()
        await advice.start()  # the default advice document, computed behind the views
        if peers is not None:
            await peers.start()
        if listener is not None:
            await listener.start()

    async def on_cleanup(_: web.Application) -> None:
        if listener is not None:
            await listener.close()
        if peers is not None:
            await peers.close()
        await advice.close()
        if mcp is not None:
            await mcp.close()
        await gw.close()
        directory.close()

    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    return app
