"""Scorers that use the prefix index: cache affinity and sticky-until-saturated."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tokenplane.routing.endpoint import EndpointState, RouteRequest
from tokenplane.routing.plugins import RoutingContext, clamp01


@dataclass(slots=True)
class PrefixAffinityScorer:
    """Fraction of the prompt's blocks the replica is believed to hold."""

    ctx: RoutingContext

    def score(
        self, req: RouteRequest, endpoints: Sequence[EndpointState]
    ) -> dict[str, float]:
        total = len(req.block_hashes)
        if total == 0:
            return {e.id: 0.0 for e in endpoints}
        matches = self.ctx.prefix_matches(req, endpoints)
        return {e.id: clamp01(matches.get(e.id, 0) / total) for e in endpoints}


def estimated_ttft_s(
    endpoint: EndpointState,
    req: RouteRequest,
    matched_blocks: int,
    block_size: int,
    cache_weight: float = 1.0,
) -> float:
    """Prefill work ahead of the request plus its own uncached prefill, in seconds.

    ``cache_weight`` > 1 counts each cached token as worth more than the time it
    saves this request (it also saves the cluster that much work under load).
    """
    cached = min(req.prompt_tokens, matched_blocks * block_size)
    own = req.prompt_tokens - cache_weight * cached
    return max(0.0, (endpoint.inflight_prefill_tokens + own) * endpoint.prefill_s_per_token)


@dataclass(slots=True)
class StickyUntilSaturatedScorer:
    """Keep a prefix on its replica until queueing there costs more than a cold start.

    Estimates each replica's time to first token as (uncached prefill tokens
    already in flight + this request's uncached tokens) x prefill time per
    token. The replica holding the prefix wins while its estimate is lowest;
    once its queue outweighs the cache saving the scores move elsewhere. Scores
    are ``best / estimate`` so the fastest replica gets 1.
    """

    ctx: RoutingContext
    floor_s: float = 0.005
    cache_weight: float = 1.0

    def score(
        self, req: RouteRequest, endpoints: Sequence[EndpointState]
    ) -> dict[str, float]:
        matches = self.ctx.prefix_matches(req, endpoints) if req.block_hashes else {}
        est = {
            e.id: self.floor_s
            + estimated_ttft_s(
                e, req, matches.get(e.id, 0), self.ctx.block_size, self.cache_weight
            )
            for e in endpoints
        }
        if not est:
            return {}
        best = min(est.values())
        # v == 0 only with floor_s = 0: that replica is the best one
        return {k: clamp01(best / v) if v > 0 else 1.0 for k, v in est.items()}
