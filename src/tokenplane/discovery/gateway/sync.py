"""Applies what a discovery source found to one backend's replicas in the gateway's
pool: new ones are added (they serve after their first healthy scrape), vanished
ones are drained (no new requests; those in flight finish)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable

from tokenplane.discovery.targets import Target, plan
from tokenplane.routing.gateway.membership import Membership
from tokenplane.upstream.pool import Endpoint

log = logging.getLogger("tokenplane.discovery")


class BackendSync:
    """One discovered backend of ``alias``; ``make`` builds a replica's endpoint."""

    def __init__(self, alias: str, backend_id: str, membership: Membership,
                 make: Callable[[Target], Endpoint]) -> None:
        self.alias = alias
        self.backend_id = backend_id
        self.membership = membership
        self.make = make
        self.members: set[str] = set()  # ids this backend added and has not drained
        self.updates = 0

    def apply(self, found: Iterable[Target]) -> None:
        p = plan(self.members, found)
        for t in p.add:
            self.membership.add(self.alias, self.make(t))
            self.members.add(t.id)
        for ep_id in p.drain:
            self.members.discard(ep_id)
            with contextlib.suppress(KeyError):  # already gone
                self.membership.drain(ep_id)
        if p.add or p.drain:
            log.info("%s (%s): %d replicas found, +%d -%d", self.backend_id, self.alias,
                     len(self.members), len(p.add), len(p.drain))
        self.updates += 1
