"""What routing decided for one request: kept on the request context (``ctx.route``)."""

from __future__ import annotations

from dataclasses import dataclass

from tokenplane.routing.endpoint import RouteRequest
from tokenplane.scheduling.slo import SloClass
from tokenplane.upstream.pool import Endpoint


@dataclass(slots=True)
class RouteInfo:
    """What routing decided for one request (kept on ``ctx.route``)."""

    req: RouteRequest
    requested_alias: str
    version: str | None
    slo: SloClass | None = None
    queue: tuple[str, str] | None = None  # (alias, version) of the scheduler queue used
    loaded: Endpoint | None = None  # the replica holding this request's counted load
    prefill: int = 0
    decode: int = 0
    ahead: int = 0  # uncached prefill tokens already in flight on the replica at bind
    counted: bool = False  # its demand is in its pool's tallies (first bind only)
