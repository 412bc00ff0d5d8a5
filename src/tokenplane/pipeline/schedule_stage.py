"""The schedule stage (SLO class, gateway queue, late binding) and the finisher that
gives back a request's replica load and pumps the queues when it ends."""

from __future__ import annotations

from collections.abc import Callable

from tokenplane.config.schema import ModelConfig
from tokenplane.pipeline.client_watch import ClientGone, watched
from tokenplane.pipeline.context import RequestContext
from tokenplane.pipeline.meter_stage import settled_counts
from tokenplane.pipeline.route_info import RouteInfo
from tokenplane.pipeline.route_stage import RequestRouting, route_info
from tokenplane.scheduling.gateway.hub import SchedulerHub
from tokenplane.scheduling.scheduler import QueuedRequest

CountText = Callable[[ModelConfig, str], int]


class ScheduleStage:
    """Chooses the request's SLO class and waits at the gateway until a replica has
    room for it; the replica is chosen when it is released (late binding)."""

    def __init__(self, hub: SchedulerHub, routing: RequestRouting) -> None:
        self.hub = hub
        self.routing = routing

    async def run(self, ctx: RequestContext) -> None:
        p = ctx.principal
        header = ctx.headers.get(self.hub.cfg.header)
        slo = self.hub.class_of(header, p.key_id if p else None, p.app if p else None,
                                p.tenant if p else None)
        ctx.slo_class = slo.name
        info = self.routing.info(ctx)
        info.slo = slo
        target = self.hub.target(info.requested_alias, info.version, slo)
        if target is None:
            return  # nothing is up: the route stage tries what it can
        info.queue = target[0]
        item = QueuedRequest(info.req, slo, self.hub.clock())
        link = ctx.client
        if link is not None and link.gone:
            raise ClientGone()
        # a client that leaves while queued ends its request at once (its reservations
        # released); its queue entry is skipped when its turn comes
        le = await watched(link, self.hub.acquire(target, item))
        self.routing.bind(ctx, le.alias, le.endpoint)


class RoutingFinisher:
    """Gives back the replica load the request held, feeds the replica's measured
    prefill time per token (streamed requests' TTFT), corrects its tenant's virtual
    token counter with the real output length, and releases waiting requests."""

    def __init__(
        self, routing: RequestRouting, hub: SchedulerHub | None, count_text: CountText,
        settle: Callable[[], None] | None = None,
    ) -> None:
        self.routing = routing
        self.hub = hub
        self.count_text = count_text
        self.settle = settle  # membership: removes draining replicas once idle

    async def finish(self, ctx: RequestContext) -> None:
        info = route_info(ctx)
        if info is None:
            if self.settle is not None:
                self.settle()  # it may have waited for a replica that now drains
            return
        self.routing.unload(info)
        if self.settle is not None:
            self.settle()
        ep = ctx.endpoint
        if ep is not None and ctx.pool is not None and ctx.upstream_start is not None:
            ctx.pool.delivered_output_tokens += settled_counts(ctx, self.count_text).output
        if ep is not None and ctx.first_token is not None and ctx.upstream_start is not None:
            self.routing.observe_first_token(info, ep, ctx.first_token - ctx.upstream_start)
        if (ep is not None and ctx.status == "error" and ctx.first_token is not None
                and (ctx.error_code or "").startswith("upstream")):
            self.routing.record(ep, 502)  # the replica failed mid-stream
        hub = self.hub
        if hub is None or info.queue is None:
            return
        self._settle(hub, ctx, info, self.count_text)
        hub.pump(info.queue)
        if ctx.alias is not None and ctx.alias != info.queue[0]:
            hub.pump((ctx.alias, ""))

    @staticmethod
    def _settle(
        hub: SchedulerHub, ctx: RequestContext, info: RouteInfo, count_text: CountText,
    ) -> None:
        if ctx.endpoint is None or ctx.upstream_start is None:
            return
        actual = settled_counts(ctx, count_text).output  # cached on ctx for the meter
        hub.settle(info.queue or ("", ""), info.req.tenant, info.req.predicted_output, actual)
