"""Routing on the gateway's request path: profiles per alias, version splits,
fallback aliases, and the breaker bookkeeping of each choice."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence

from tokenplane.config.routing_schema import RoutingConfig, SplitConfig
from tokenplane.routing.endpoint import EndpointState, RouteRequest
from tokenplane.routing.gateway.replicas import LiveEndpoint, LiveView
from tokenplane.routing.plugins import RoutingContext
from tokenplane.routing.profile import NoEndpointError, RoutingProfile
from tokenplane.routing.profiles import build_profile
from tokenplane.routing.registry import default_registry
from tokenplane.routing.split import SplitRule
from tokenplane.upstream.pool import Endpoint


def split_rule(cfg: SplitConfig) -> SplitRule:
    return SplitRule(
        weights=tuple(cfg.weights.items()), by=cfg.by, header=cfg.header,
        header_versions=dict(cfg.header_versions), tenant_versions=dict(cfg.tenant_versions),
        salt=cfg.salt,
    )


class GatewayRouter:
    """Chooses a replica for a request among an alias's live replicas."""

    def __init__(
        self, config: RoutingConfig, live: LiveView, fallbacks: Mapping[str, Sequence[str]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.live = live
        self.fallbacks = {k: list(v) for k, v in fallbacks.items()}
        self.clock = clock
        registry = default_registry()
        self.profiles: dict[str, RoutingProfile] = {}
        # every alias has its profile from the start, replicas or not (discovered
        # replicas join later: routing/gateway/membership.py)
        aliases = dict.fromkeys([*live.by_alias, *self.fallbacks,
                                 *(a for fbs in self.fallbacks.values() for a in fbs)])
        for alias in aliases:
            ctx = RoutingContext(block_size=config.block_size,
                                 prefix_capacity_blocks=config.prefix_capacity_blocks)
            spec = config.models.get(alias, config.profile)
            self.profiles[alias] = build_profile(spec, ctx, registry)
        self.splits = {a: split_rule(s) for a, s in config.splits.items()}

    def roll_back(self, alias: str, stable: str) -> None:
        """A canary guard tripped: every request of ``alias`` that no header or tenant
        pins goes to the ``stable`` version from now on."""
        rule = self.splits.get(alias)
        if rule is not None:
            self.splits[alias] = dataclasses.replace(rule, weights=((stable, 1.0),))

    def version(self, alias: str, req: RouteRequest) -> str | None:
        rule = self.splits.get(alias)
        return rule.choose(req) if rule is not None else None

    def candidates(
        self, alias: str, version: str | None, exclude: Sequence[str] = (), panic: bool = False,
    ) -> list[LiveEndpoint]:
        """Replicas that may take a request now: healthy, not draining, breaker not
        open. In panic (nothing else can serve) health checks are ignored, breakers
        and draining are not."""
        now = self.clock()
        return [e for e in self.live.of(alias, version)
                if e.id not in exclude
                and (e.available(now) if not panic
                     else not e.endpoint.draining and e.breaker.available(now))]

    def forget(self, le: LiveEndpoint) -> None:
        """``le`` left its pool: drop what the alias's profile learnt of it."""
        profile = self.profiles.get(le.alias)
        if profile is not None:
            profile.ctx.prefix_index.forget(le.id)

    def choose(
        self, alias: str, req: RouteRequest, cands: Sequence[LiveEndpoint], panic: bool = False,
    ) -> LiveEndpoint | None:
        """Pick among ``cands`` with the alias's profile and record the decision
        (``panic``: as if their failed health checks had passed)."""
        if not cands:
            return None
        now = self.clock()
        by_id = {e.id: e for e in cands}
        snaps = self.live.snapshots(cands, now)
        if panic:
            snaps = [dataclasses.replace(s, healthy=True) for s in snaps]
        try:
            eid = self.route_snapshots(alias, req, snaps)
        except (NoEndpointError, LookupError):
            return None
        return by_id[eid]

    def route_snapshots(
        self, alias: str, req: RouteRequest, snaps: Sequence[EndpointState]
    ) -> str:
        """The profile's choice among ``snaps`` (already healthy and of the right
        version), recorded; a single candidate is taken without scoring."""
        profile = self.profiles[alias]
        if len(snaps) == 1:
            eid = snaps[0].id
            profile.commit(req, eid)
            return eid
        return profile.route(req, snaps)

    def take(self, le: LiveEndpoint) -> None:
        """The request is going to ``le`` now (takes a half-open breaker's probe slot)."""
        le.breaker.allow(self.clock())

    def pick(
        self, alias: str, req: RouteRequest, version: str | None, exclude: Sequence[str] = (),
    ) -> tuple[str, Endpoint] | None:
        """(alias, endpoint): a replica of ``alias`` (of the version when one is
        chosen), else of its fallback aliases in order; None when none can serve."""
        le = self.choose(alias, req, self.candidates(alias, version, exclude))
        if le is not None:
            self.take(le)
            return alias, le.endpoint
        for fb in self.fallbacks.get(alias, ()):
            le = self.choose(fb, req, self.candidates(fb, None, exclude))
            if le is not None:
                self.take(le)
                return fb, le.endpoint
        # panic: every health check failed; trying beats refusing (breakers still apply)
        panic = [e for e in self.candidates(alias, version, exclude, panic=True)
                 if not e.healthy]
        le = self.choose(alias, req, panic, panic=True) if panic else None
        if le is not None:
            self.take(le)
            return alias, le.endpoint
        return None

    def record(self, ep: Endpoint, failure_status: int | None, cancelled: bool = False) -> None:
        """An attempt's outcome for the replica's breaker: a 5xx (or no answer) is a
        failure; any other answer a success."""
        now = self.clock()
        if cancelled:
            self.live.record(ep.id, now, None)
        else:
            self.live.record(ep.id, now, failure_status is None or failure_status < 500)
