"""A routing profile: filters, then weighted scorers, then a picker."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tokenplane.routing.endpoint import EndpointState, RouteRequest
from tokenplane.routing.plugins import Filter, Picker, RoutingContext, Scorer, clamp01


class NoEndpointError(LookupError):
    """Every replica was filtered out."""


@dataclass(slots=True)
class RoutingProfile:
    """Routes one request: filter, score (weighted, each clamped), pick, learn."""

    name: str
    filters: Sequence[Filter]
    scorers: Sequence[tuple[Scorer, float]]
    picker: Picker
    ctx: RoutingContext

    def route(self, req: RouteRequest, endpoints: Sequence[EndpointState]) -> str:
        """The chosen replica id; records the decision in the shared context."""
        choice = self.choose(req, endpoints)
        self.commit(req, choice)
        return choice

    def commit(self, req: RouteRequest, endpoint_id: str) -> None:
        """Record that ``req`` was sent to ``endpoint_id`` (prefix index, sessions)."""
        self.ctx.record(req, endpoint_id)

    def affinity(self, req: RouteRequest, endpoints: Sequence[EndpointState]) -> dict[str, int]:
        """Prompt blocks each replica is believed to hold (0 without block hashes)."""
        if not req.block_hashes:
            return {e.id: 0 for e in endpoints}
        return self.ctx.prefix_matches(req, endpoints)

    def choose(self, req: RouteRequest, endpoints: Sequence[EndpointState]) -> str:
        """The replica this profile would pick, without recording anything."""
        cands: list[EndpointState] = list(endpoints)
        for f in self.filters:
            cands = f.filter(req, cands)
            if not cands:
                raise NoEndpointError(f"no endpoint left after {type(f).__name__}")
        totals = {e.id: 0.0 for e in cands}
        for scorer, weight in self.scorers:
            for eid, s in scorer.score(req, cands).items():
                if eid in totals:
                    totals[eid] += weight * clamp01(s)
        return self.picker.pick(req, totals, cands)
