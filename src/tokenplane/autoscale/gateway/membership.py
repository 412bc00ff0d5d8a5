"""A pool's membership as the embedded actuator changes it: a replica enters routing
(the pool, the live view, the scheduler's candidates) or drains out of it (no new
requests at once; removed from the pool once its requests in flight have finished).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from tokenplane.compose.routing import Routing
from tokenplane.routing.gateway.replicas import LiveEndpoint
from tokenplane.upstream.pool import Endpoint, Pool

DRAIN_POLL_S = 0.05  # how often a drain looks at the replica's requests in flight


class Membership(Protocol):
    def admit(self, alias: str, ep: Endpoint) -> None:
        """``ep`` takes requests of ``alias`` from now on."""
        ...

    async def drain(self, alias: str, ep_id: str) -> None:
        """No new requests to ``ep_id``; returns once its requests in flight finished
        and it has left the pool."""
        ...


class RoutingMembership:
    """Membership over the gateway's own routing (``compose.routing.Routing``)."""

    def __init__(self, routing: Routing, pools: dict[str, Pool],
                 live_endpoint: Callable[[str, Endpoint], LiveEndpoint]) -> None:
        self.routing = routing
        self.pools = pools
        self.live_endpoint = live_endpoint

    def admit(self, alias: str, ep: Endpoint) -> None:
        pool = self.pools[alias]
        if ep not in pool.endpoints:
            pool.endpoints.append(ep)
        live = self.routing.live
        if ep.id not in live.by_id:
            live.add(self.live_endpoint(alias, ep))
        self._choices(alias)
        if self.routing.hub is not None:
            self.routing.hub.pump_all()  # requests queued for lack of room go now

    async def drain(self, alias: str, ep_id: str) -> None:
        live = self.routing.live
        le = live.by_id.get(ep_id)
        peers = live.by_alias.get(alias, [])
        if le is not None and le in peers:
            peers.remove(le)  # no longer a candidate: nothing new is routed or released here
        self._choices(alias)
        pool = self.pools[alias]
        ep = next((e for e in pool.endpoints if e.id == ep_id), None)
        # a request bound here (its load counted) or released to it by the scheduler
        # (pending) may not have started its upstream call yet: wait for all three
        while ep is not None and (busy(ep) or (le is not None and le.pending > 0)):
            await asyncio.sleep(DRAIN_POLL_S)
        if live.by_id.get(ep_id) is le:
            live.by_id.pop(ep_id, None)
        if ep is not None and ep in pool.endpoints:
            pool.endpoints.remove(ep)

    def _choices(self, alias: str) -> None:
        """Prefix hashes are computed for aliases with a choice of replicas."""
        req = self.routing.requests
        if len(self.routing.live.of(alias)) > 1 or req.router.fallbacks.get(alias):
            req.choosy.add(alias)
        else:
            req.choosy.discard(alias)


def busy(ep: Endpoint) -> bool:
    """Requests in flight on ``ep``, or bound to it and about to be."""
    return ep.in_flight > 0 or ep.prompt_tokens_in_flight > 0 or ep.decode_tokens_in_flight > 0
