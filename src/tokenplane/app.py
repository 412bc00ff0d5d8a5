"""Composition root: ``build_app(config)`` assembles every part. No side effects at import."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from tokenplane.api.admin import AdminRoutes
from tokenplane.api.admin_directory import Directory
from tokenplane.api.http import OpenAIRoutes, RequestIds, envelope_middleware
from tokenplane.auth.keystore import KeyStore
from tokenplane.config.prices import price_book
from tokenplane.config.schema import BackendConfig, GatewayConfig, ModelConfig
from tokenplane.engine.profiles import get_profile
from tokenplane.engine.service import EngineService
from tokenplane.metering.meter import Meter
from tokenplane.observe.metrics import GatewayMetrics
from tokenplane.pipeline.admission_service import AdmissionService
from tokenplane.pipeline.admission_stage import AdmissionFinisher, AdmissionStage
from tokenplane.pipeline.counting import ModelCounters
from tokenplane.pipeline.meter_stage import MeterFinisher
from tokenplane.pipeline.runner import Pipeline
from tokenplane.pipeline.stages import (
    AuthStage,
    PassThroughStage,
    RouteStage,
    TokensStage,
    ValidateStage,
)
from tokenplane.pipeline.upstream_call import UpstreamCall
from tokenplane.upstream.http import HttpTransport
from tokenplane.upstream.inprocess import InProcessTransport
from tokenplane.upstream.pool import Endpoint, Pool

GATEWAY_KEY: web.AppKey[Gateway] = web.AppKey("gateway")


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

    def models_for(self, tenant: str) -> list[str]:
        allowed = self.allowed_models(tenant)
        return [a for a in self.pools if allowed is None or a in allowed]

    def allowed_models(self, tenant: str) -> set[str] | None:
        for t in self.config.tenants:
            if t.name == tenant and t.models is not None:
                return set(t.models)
        return None

    async def start(self) -> None:
        for s in self.services:
            await s.start()
        await self.meter.start()

    async def close(self) -> None:
        for s in self.services:
            await s.close()
        for pool in self.pools.values():
            for ep in pool.endpoints:
                await ep.transport.close()
        await self.meter.close()
        if self.admission is not None:
            await self.admission.close()
        self.keys.close()


def _endpoints(
    model: ModelConfig, backend: BackendConfig, index: int, counters: ModelCounters,
    services: list[EngineService],
) -> list[Endpoint]:
    bid = backend.id or f"{model.alias}-{index}"
    upstream_model = backend.model or model.alias
    if backend.type == "sim" and backend.base_url is None:
        out = []
        for r in range(backend.replicas):
            svc = EngineService(
                get_profile(backend.profile), counters.tokenizer(model.alias),
                counters.prompt_ids(model.alias), upstream_model,
                max_model_len=model.context_window, seed=r,
            )
            services.append(svc)
            out.append(Endpoint(f"{bid}/{r}", backend, InProcessTransport(svc), upstream_model))
        return out
    assert backend.base_url is not None
    return [Endpoint(bid, backend, HttpTransport(backend.base_url, backend.api_key_env),
                     upstream_model)]


def build_gateway(config: GatewayConfig, worker_id: str | None = None) -> Gateway:
    home = Path(config.data_dir or ".tokenplane")
    home.mkdir(parents=True, exist_ok=True)
    keys = KeyStore(home / "meta.db")
    counters = ModelCounters(config.models)
    services: list[EngineService] = []
    pools: dict[str, Pool] = {}
    for m in config.models:
        pool = Pool(m)
        for i, b in enumerate(m.backends):
            pool.endpoints.extend(_endpoints(m, b, i, counters, services))
        pools[m.alias] = pool
    meter = Meter(home, config.database_url, writer_id=worker_id, prices=price_book(config.models),
                  flush_interval_s=0.25)
    metrics = GatewayMetrics()
    gw = Gateway(config, home, keys, counters, pools, meter, metrics,
                 pipeline=Pipeline([], UpstreamCall(), []), services=services)
    finisher = MeterFinisher(meter, metrics, counters.count_text)
    admission = AdmissionService.build(config.admission, config.redis_url, home, metrics,
                                       lambda: meter.prices)
    gw.admission = admission
    gw.pipeline = Pipeline(
        stages=[
            AuthStage(keys),
            ValidateStage(pools, gw.allowed_models),
            TokensStage(counters),
            AdmissionStage(admission),
            PassThroughStage(),  # scheduling
            RouteStage(),
        ],
        call=UpstreamCall(),
        finishers=[finisher, AdmissionFinisher(admission, counters.count_text)],
        attempt_finishers=[finisher],
    )
    return gw


def build_app(config: GatewayConfig, worker_id: str | None = None) -> web.Application:
    gw = build_gateway(config, worker_id)
    app = web.Application(
        middlewares=[envelope_middleware(RequestIds())],
        client_max_size=config.server.max_body_bytes,
    )
    app[GATEWAY_KEY] = gw
    OpenAIRoutes(gw.pipeline, gw.keys, gw.metrics, gw.models_for,
                 config.server.max_body_bytes).install(app)
    directory = Directory(gw.home / "meta.db")
    assert gw.admission is not None
    AdminRoutes(gw.keys, directory, gw.admission).install(app)

    async def on_startup(_: web.Application) -> None:
        await gw.start()

    async def on_cleanup(_: web.Application) -> None:
        await gw.close()
        directory.close()

    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    return app
