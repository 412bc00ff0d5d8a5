"""Filters: drop replicas that must not get a request."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tokenplane.routing.endpoint import BREAKER_OPEN, EndpointState, RouteRequest


@dataclass(slots=True)
class HealthyFilter:
    """Keeps replicas that are healthy and whose breaker is not open."""

    def filter(
        self, req: RouteRequest, endpoints: Sequence[EndpointState]
    ) -> list[EndpointState]:
        return [e for e in endpoints if e.healthy and e.breaker_state != BREAKER_OPEN]


@dataclass(slots=True)
class PoolFilter:
    """Keeps replicas in the request's pool (all of them when it names none)."""

    def filter(
        self, req: RouteRequest, endpoints: Sequence[EndpointState]
    ) -> list[EndpointState]:
        if req.pool is None:
            return list(endpoints)
        return [e for e in endpoints if e.pool == req.pool]


@dataclass(slots=True)
class ModelVersionFilter:
    """Keeps replicas serving the version a split chose (all when none chosen)."""

    def filter(
        self, req: RouteRequest, endpoints: Sequence[EndpointState]
    ) -> list[EndpointState]:
        if not req.model_version:
            return list(endpoints)
        return [e for e in endpoints if e.model_version == req.model_version]


@dataclass(slots=True)
class UnsaturatedFilter:
    """Prefers replicas below their limits; keeps all if every one is saturated."""

    kv_limit: float = 0.9

    def filter(
        self, req: RouteRequest, endpoints: Sequence[EndpointState]
    ) -> list[EndpointState]:
        ok = [
            e
            for e in endpoints
            if e.kv_usage < self.kv_limit
            and e.num_waiting < e.max_waiting
            and e.token_load < e.token_capacity
        ]
        return ok or list(endpoints)
