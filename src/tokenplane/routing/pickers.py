"""Pickers: choose one replica from the scored candidates."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tokenplane.routing.endpoint import EndpointState, RouteRequest
from tokenplane.routing.plugins import RoutingContext


@dataclass(slots=True)
class MaxScorePicker:
    """Highest total score; ties broken by the context's seeded random source."""

    ctx: RoutingContext
    tolerance: float = 1e-9

    def pick(
        self,
        req: RouteRequest,
        scored: Mapping[str, float],
        endpoints: Sequence[EndpointState],
    ) -> str:
        top = best_scored(scored, self.tolerance)
        return top[0] if len(top) == 1 else self.ctx.rng.choice(top)


@dataclass(slots=True)
class MaxScoreRoundRobinPicker:
    """Highest total score; ties go round-robin (spreads an idle cluster evenly)."""

    tolerance: float = 1e-9
    _turn: int = 0

    def pick(
        self,
        req: RouteRequest,
        scored: Mapping[str, float],
        endpoints: Sequence[EndpointState],
    ) -> str:
        top = best_scored(scored, self.tolerance)
        self._turn += 1
        return top[self._turn % len(top)]


@dataclass(slots=True)
class RandomPicker:
    """Uniformly random candidate (what a Kubernetes Service's iptables mode does)."""

    ctx: RoutingContext

    def pick(
        self,
        req: RouteRequest,
        scored: Mapping[str, float],
        endpoints: Sequence[EndpointState],
    ) -> str:
        if not scored:
            raise LookupError("no candidate endpoints")
        return self.ctx.rng.choice(sorted(scored))


@dataclass(slots=True)
class RoundRobinPicker:
    """Cycles through the candidates in id order, ignoring scores."""

    _next: int = field(default=0)

    def pick(
        self,
        req: RouteRequest,
        scored: Mapping[str, float],
        endpoints: Sequence[EndpointState],
    ) -> str:
        if not scored:
            raise LookupError("no candidate endpoints")
        ids = sorted(scored)
        choice = ids[self._next % len(ids)]
        self._next += 1
        return choice


@dataclass(slots=True)
class SglangCacheAwarePicker:
    """SGLang router's cache-aware policy, on block hashes instead of characters.

    If the load (requests in flight) is imbalanced -- ``max - min >
    balance_abs_threshold`` and ``max > min * balance_rel_threshold`` -- take
    the least-loaded replica. Otherwise take the replica with the highest prefix
    match rate if that rate exceeds ``cache_threshold``, else the one whose
    prefix tree is smallest (most cache room).
    """

    ctx: RoutingContext
    balance_abs_threshold: int = 64
    balance_rel_threshold: float = 1.5
    cache_threshold: float = 0.3

    def pick(
        self,
        req: RouteRequest,
        scored: Mapping[str, float],
        endpoints: Sequence[EndpointState],
    ) -> str:
        cands = [e for e in endpoints if e.id in scored]
        if not cands:
            raise LookupError("no candidate endpoints")
        loads = {e.id: e.inflight_requests for e in cands}
        lo = min(loads.values())
        hi = max(loads.values())
        if hi - lo > self.balance_abs_threshold and hi > lo * self.balance_rel_threshold:
            return min(cands, key=lambda e: (loads[e.id], e.id)).id
        total = len(req.block_hashes)
        if total:
            matches = self.ctx.prefix_matches(req, cands)
            best = max(cands, key=lambda e: (matches.get(e.id, 0), -loads[e.id]))
            if matches.get(best.id, 0) / total > self.cache_threshold:
                return best.id
        index = self.ctx.prefix_index
        return min(cands, key=lambda e: (index.size(e.id), loads[e.id], e.id)).id


def best_scored(scored: Mapping[str, float], tolerance: float) -> list[str]:
    """The replicas within ``tolerance`` of the highest total score, in order."""
    if not scored:
        raise LookupError("no candidate endpoints")
    best = max(scored.values())
    return [k for k, v in scored.items() if v >= best - tolerance]
