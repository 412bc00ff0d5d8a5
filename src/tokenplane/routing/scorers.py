"""Load scorers: queue depth, KV-cache use, token load, session, cost."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tokenplane.routing.endpoint import EndpointState, RouteRequest
from tokenplane.routing.plugins import RoutingContext, clamp01, inverse_minmax


@dataclass(slots=True)
class QueueDepthScorer:
    """Fewer queued requests scores higher (min-max over the candidates)."""

    def score(
        self, req: RouteRequest, endpoints: Sequence[EndpointState]
    ) -> dict[str, float]:
        return inverse_minmax({e.id: float(e.queue_depth) for e in endpoints})


@dataclass(slots=True)
class OutstandingRequestsScorer:
    """Fewer requests in flight from this gateway scores higher."""

    def score(
        self, req: RouteRequest, endpoints: Sequence[EndpointState]
    ) -> dict[str, float]:
        return inverse_minmax({e.id: float(e.inflight_requests) for e in endpoints})


@dataclass(slots=True)
class KvCacheScorer:
    """More free KV cache scores higher: ``1 - kv_usage``."""

    def score(
        self, req: RouteRequest, endpoints: Sequence[EndpointState]
    ) -> dict[str, float]:
        return {e.id: clamp01(1.0 - e.kv_usage) for e in endpoints}


@dataclass(slots=True)
class TokenLoadScorer:
    """Less work in flight (uncached prefill + predicted decode tokens) scores higher.

    Scored against the replica's token capacity so that an idle cluster scores
    all ones and a full replica zero.
    """

    def score(
        self, req: RouteRequest, endpoints: Sequence[EndpointState]
    ) -> dict[str, float]:
        return {
            e.id: clamp01(1.0 - e.token_load / max(1, e.token_capacity)) for e in endpoints
        }


@dataclass(slots=True)
class SessionAffinityScorer:
    """1 for the replica that served this session last, 0 elsewhere."""

    ctx: RoutingContext

    def score(
        self, req: RouteRequest, endpoints: Sequence[EndpointState]
    ) -> dict[str, float]:
        target = self.ctx.sessions.get(req.session_id) if req.session_id else None
        return {e.id: 1.0 if e.id == target else 0.0 for e in endpoints}


@dataclass(slots=True)
class CostScorer:
    """Cheaper per token scores higher (min-max over the candidates)."""

    def score(
        self, req: RouteRequest, endpoints: Sequence[EndpointState]
    ) -> dict[str, float]:
        return inverse_minmax({e.id: e.cost_per_token for e in endpoints})
