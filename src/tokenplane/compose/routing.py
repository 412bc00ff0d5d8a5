"""Builds routing and scheduling for a gateway: the live view of every replica, the
metrics scraper, the router, the scheduler queues, and the stages that use them."""

from __future__ import annotations

import time
from dataclasses import dataclass

from tokenplane.compose.discovery import Discovery, build_discovery
from tokenplane.config.schema import GatewayConfig
from tokenplane.observe.metrics import GatewayMetrics
from tokenplane.pipeline.route_stage import RequestRouting, RouteStage
from tokenplane.pipeline.schedule_stage import CountText, RoutingFinisher, ScheduleStage
from tokenplane.routing.gateway.membership import Membership
from tokenplane.routing.gateway.metrics_scraper import MetricsScraper
from tokenplane.routing.gateway.replica_collector import EndpointCollector
from tokenplane.routing.gateway.replicas import UNBOUNDED, LiveEndpoint, LiveView, breaker_from
from tokenplane.routing.gateway.router import GatewayRouter
from tokenplane.routing.snapshot import PrefillRate, cost_per_token
from tokenplane.scheduling.gateway.hub import SchedulerHub
from tokenplane.tokens.predictor import LengthPredictor
from tokenplane.upstream.http_transport import server_root
from tokenplane.upstream.inprocess import InProcessTransport
from tokenplane.upstream.pool import Endpoint, Pool

SCRAPED_TYPES = frozenset({"vllm", "sglang", "sim"})


def live_endpoint(config: GatewayConfig, alias: str, ep: Endpoint) -> LiveEndpoint:
    """What routing knows of one replica of ``alias`` when it joins."""
    sched = config.scheduling
    price = next((m.prices for m in config.models if m.alias == alias), None)
    b = ep.backend
    le = LiveEndpoint(
        endpoint=ep, alias=alias, breaker=breaker_from(config.routing.breaker),
        model_version=b.model_version or "", max_waiting=sched.max_waiting,
        slots_known=sched.max_num_seqs is not None,
        cost_per_token=cost_per_token(price.input, price.output) if price else 0.0,
    )
    url = ep.base_url or b.base_url
    if isinstance(ep.transport, InProcessTransport):
        engine = ep.transport.service.engine
        le.local_stats = engine.stats
        le.prefill_rate = PrefillRate(prior=engine.profile.a_s_per_token)
        le.slots_known = True
        le.max_num_seqs = sched.max_num_seqs or engine.profile.max_num_seqs
        le.token_capacity = engine.profile.kv_capacity_tokens
        le.prefill_capacity = UNBOUNDED
    elif b.type in SCRAPED_TYPES and url is not None:  # an engine over HTTP
        le.max_num_seqs = sched.max_num_seqs or le.max_num_seqs
        le.scrape_url = server_root(url) + "/metrics"
    else:  # a hosted API: no slots the gateway knows of
        le.max_num_seqs = sched.max_num_seqs or UNBOUNDED
    return le


def build_live(config: GatewayConfig, pools: dict[str, Pool]) -> LiveView:
    live = LiveView()
    for alias, pool in pools.items():
        for ep in pool.endpoints:
            live.add(live_endpoint(config, alias, ep))
    return live


@dataclass
class Routing:
    """Everything routing and scheduling hold for one gateway worker."""

    live: LiveView
    router: GatewayRouter
    requests: RequestRouting
    hub: SchedulerHub | None
    scraper: MetricsScraper
    route_stage: RouteStage
    schedule_stage: ScheduleStage | None
    finisher: RoutingFinisher
    membership: Membership  # replicas joining and leaving while the gateway runs
    discovery: Discovery | None = None  # backends found in Kubernetes or DNS

    async def start(self) -> None:
        if self.hub is not None:
            await self.hub.start()
        await self.scraper.start()
        if self.discovery is not None:
            await self.discovery.start()

    async def close(self) -> None:
        if self.discovery is not None:
            await self.discovery.close()
        await self.scraper.close()
        await self.membership.close()
        if self.hub is not None:
            await self.hub.close()


def build_routing(
    config: GatewayConfig, pools: dict[str, Pool], predictor: LengthPredictor,
    metrics: GatewayMetrics, count_text: CountText,
) -> Routing:
    clock = time.monotonic
    live = build_live(config, pools)
    metrics.registry.register(EndpointCollector(live, clock))
    fallbacks = {m.alias: m.fallbacks for m in config.models}
    router = GatewayRouter(config.routing, live, fallbacks, clock)
    requests = RequestRouting(router, pools, predictor)
    hub = SchedulerHub(config.scheduling, router, metrics, clock) \
        if config.scheduling.enabled else None
    rc = config.routing
    pump = hub.pump_all if hub is not None else None

    def after_scrape() -> None:
        membership.settle()  # replicas that passed their first scrape join
        if pump is not None:
            pump()

    scraper = MetricsScraper(live, rc.scrape_interval_s, rc.scrape_timeout_s,
                             after_scrape, clock)
    membership = Membership(live, pools, router, scraper,
                            lambda alias, ep: live_endpoint(config, alias, ep), pump)
    return Routing(
        live, router, requests, hub, scraper, RouteStage(requests),
        ScheduleStage(hub, requests) if hub is not None else None,
        RoutingFinisher(requests, hub, count_text, membership.settle), membership,
        build_discovery(config, membership),
    )
