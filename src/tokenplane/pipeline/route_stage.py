"""The route stage: a :class:`RouteRequest` per request, a replica from the alias's
routing profile (or the one the scheduler bound), retries and fallbacks for the
upstream call, and the per-replica load the gateway counts while it is in flight."""

from __future__ import annotations

from tokenplane.errors import GatewayError
from tokenplane.pipeline.context import RequestContext
from tokenplane.pipeline.route_info import RouteInfo
from tokenplane.routing.endpoint import RouteRequest
from tokenplane.routing.gateway.prompt_blocks import request_block_hashes
from tokenplane.routing.gateway.router import GatewayRouter
from tokenplane.tokens.predictor import LengthKey, LengthPredictor
from tokenplane.upstream.pool import Endpoint, Pool


class RequestRouting:
    """Builds route requests and binds replicas; also the upstream call's retry hook."""

    def __init__(
        self, router: GatewayRouter, pools: dict[str, Pool], predictor: LengthPredictor,
    ) -> None:
        self.router = router
        self.pools = pools
        self.predictor = predictor
        cfg = router.config
        self.block_size = cfg.block_size
        self.session_header = cfg.session_header.lower()

    def choosy(self, alias: str) -> bool:
        """Whether the alias has a choice to make now (prefix hashes are only worth
        computing there): several replicas (they come and go), or fallbacks."""
        return (len(self.router.live.by_alias.get(alias, ())) > 1
                or bool(self.router.fallbacks.get(alias)))

    def info(self, ctx: RequestContext) -> RouteInfo:
        """The request's RouteInfo (built once)."""
        found = ctx.route
        if found is not None:
            return found
        assert ctx.alias is not None
        p = ctx.principal
        tenant = p.tenant if p else "default"
        session = ctx.headers.get(self.session_header) or (p.end_user if p else None)
        prompt = ctx.counts.prompt
        predicted = 0
        if ctx.operation.generates:
            key = LengthKey(tenant, (p.app or "") if p else "", ctx.alias)
            predicted = self.predictor.predict(key, prompt, ctx.max_tokens)
        ctx.predicted_output = predicted
        req = RouteRequest(
            request_id=ctx.request_id, tenant=tenant, session_id=session,
            prompt_tokens=prompt, predicted_output=predicted,
            block_hashes=request_block_hashes(ctx.operation, ctx.body, prompt, self.block_size)
            if self.choosy(ctx.alias) else (),
            keys=ctx.headers,
        )
        info = RouteInfo(req, ctx.alias, self.router.version(ctx.alias, req))
        ctx.route = info
        return info

    def bind(self, ctx: RequestContext, alias: str, ep: Endpoint) -> None:
        """Send the request to ``ep`` (of ``alias``, maybe a fallback alias)."""
        info = self.info(ctx)
        if alias != ctx.alias:
            pool = self.pools[alias]
            ctx.alias, ctx.pool, ctx.model = alias, pool, pool.model
            if "fallback" not in ctx.flags:
                ctx.flags.append("fallback")
        ctx.endpoint = ep
        version = ep.backend.model_version or info.version
        if version:
            ctx.model_version = version
        self.unload(info)
        matched = self.router.profiles[alias].ctx.last_matched_blocks if alias in \
            self.router.profiles else 0
        info.ahead = max(0, ep.prompt_tokens_in_flight)
        info.prefill = max(0, info.req.prompt_tokens - matched * self.block_size)
        info.decode = info.req.predicted_output
        ep.prompt_tokens_in_flight += info.prefill
        ep.decode_tokens_in_flight += info.decode
        ep.bound += 1
        info.loaded = ep
        if not info.counted:  # the autoscaler's demand: once per request, not per attempt
            info.counted = True
            pool = self.pools[alias]
            pool.admitted_requests += 1
            pool.admitted_prompt_tokens += info.prefill

    @staticmethod
    def unload(info: RouteInfo) -> None:
        ep = info.loaded
        if ep is not None:
            ep.prompt_tokens_in_flight -= info.prefill
            ep.decode_tokens_in_flight -= info.decode
            ep.bound -= 1
            info.loaded = None

    def route(self, ctx: RequestContext) -> None:
        """Pick a replica with the profile (no scheduler), or 503."""
        info = self.info(ctx)
        got = self.router.pick(info.requested_alias, info.req, info.version)
        if got is None:
            if info.version:  # the version chosen could not serve: it is its failure
                ctx.model_version = info.version
            raise no_upstream(info.requested_alias)
        self.bind(ctx, *got)

    # -- the upstream call's hooks -------------------------------------------------

    def retry(self, ctx: RequestContext, tried: list[str]) -> tuple[str, Endpoint] | None:
        """(alias, replica) for the next attempt after a failed one (never a replica
        already tried), falling back to the alias's fallback aliases; None when none
        is left. The caller binds it (:meth:`bind`) once the failed attempt is billed."""
        info = self.info(ctx)
        return self.router.pick(info.requested_alias, info.req, info.version, exclude=tried)

    def record(self, ep: Endpoint, failure_status: int | None, cancelled: bool = False) -> None:
        self.router.record(ep, failure_status, cancelled)

    def observe_first_token(self, info: RouteInfo, ep: Endpoint, ttft_s: float) -> None:
        """Feed the replica's measured prefill time per token (its snapshots'
        ``prefill_s_per_token``): the TTFT over the prefill tokens it waited for."""
        self.router.live.observe_first_token(ep.id, ttft_s, info.ahead + info.prefill)


def no_upstream(alias: str) -> GatewayError:
    return GatewayError(503, f"No upstream is available for '{alias}'.",
                        code="no_upstream_available", headers={"retry-after": "1"})


class RouteStage:
    """Uses the replica the scheduler bound, or routes with the alias's profile."""

    def __init__(self, routing: RequestRouting) -> None:
        self.routing = routing

    async def run(self, ctx: RequestContext) -> None:
        if ctx.endpoint is None:
            self.routing.route(ctx)


def route_info(ctx: RequestContext) -> RouteInfo | None:
    return ctx.route
