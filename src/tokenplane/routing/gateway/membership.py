"""Replicas joining and leaving an alias's pool while the gateway runs.

``add`` puts a replica in its pool: one with a ``/metrics`` to scrape (an engine over
HTTP) is scraped at once and enters the routing table after its first healthy
scrape (until then it is *joining*: scraped, never routed to); one without (a
simulated engine in this process, a hosted API) enters at once. ``drain`` takes
one out: from that moment no request is routed or released to it, the requests
bound to it, waiting for it or in flight on it finish, and then it is removed (from
the live view, its pool, its profile's prefix index; its transport closed) and the
future ``drain`` returned resolves. Adding an id that is draining takes it back.

Who calls it: discovery (``routing/gateway/discovery*``) as Kubernetes or DNS
report replicas, and the autoscaling actuators that start and stop replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from tokenplane.cancel import cancel_and_wait
from tokenplane.routing.gateway.metrics_scraper import MetricsScraper
from tokenplane.routing.gateway.replicas import LiveEndpoint, LiveView
from tokenplane.routing.gateway.router import GatewayRouter
from tokenplane.upstream.pool import Endpoint, Pool

log = logging.getLogger("tokenplane.routing")

# builds the live view's entry of an endpoint of an alias (compose/routing.py)
MakeLive = Callable[[str, Endpoint], LiveEndpoint]


class Membership:
    def __init__(
        self, live: LiveView, pools: dict[str, Pool], router: GatewayRouter,
        scraper: MetricsScraper, make_live: MakeLive,
        on_admit: Callable[[], None] | None = None,
    ) -> None:
        self.live = live
        self.pools = pools
        self.router = router
        self.scraper = scraper
        self.make_live = make_live
        self.on_admit = on_admit  # new capacity: the scheduler releases what waits
        self._admitted: dict[str, asyncio.Future[None]] = {}
        self._drains: dict[str, asyncio.Future[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()  # first scrapes: cancelled at close
        self._closing: set[asyncio.Task[None]] = set()  # transports closing: awaited

    # -- who is in ---------------------------------------------------------------

    def members(self, alias: str) -> list[str]:
        """Ids of the alias's replicas that are joining or serving (not draining)."""
        ids = [le.id for le in self.live.joining.values() if le.alias == alias]
        ids += [le.id for le in self.live.of(alias) if not le.endpoint.draining]
        return ids

    def draining(self) -> list[str]:
        return list(self._drains)

    def get(self, ep_id: str) -> LiveEndpoint | None:
        return self.live.by_id.get(ep_id) or self.live.joining.get(ep_id)

    # -- joining -----------------------------------------------------------------

    def add(self, alias: str, ep: Endpoint) -> asyncio.Future[None]:
        """Put ``ep`` in ``alias``'s pool; the future resolves once requests may be
        routed to it (cancelled if it is drained before). Call on the gateway's loop."""
        if alias not in self.pools:
            raise ValueError(f"no model alias {alias!r}")
        loop = asyncio.get_running_loop()
        known = self.get(ep.id)
        if known is not None:
            if known.alias != alias:
                raise ValueError(f"endpoint {ep.id!r} already serves {known.alias!r}")
            if known.endpoint is not ep:  # the one given is not needed
                self._spawn(ep.transport.close(), self._closing)
            return self._revive(known, loop)
        le = self.make_live(alias, ep)
        fut: asyncio.Future[None] = loop.create_future()
        self._admitted[ep.id] = fut
        if le.scrape_url is None:
            self._admit(le)
            return fut
        le.healthy = False  # until its first good scrape
        self.live.joining[le.id] = le
        self.scraper.ensure_running()
        self._spawn(self._first_scrape(le), self._tasks)
        return fut

    def _revive(self, le: LiveEndpoint, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
        """An id added again while it drains: it serves again."""
        drain = self._drains.pop(le.id, None)
        if drain is not None:
            le.endpoint.draining = False
            drain.cancel()
            log.info("replica %s of %s is back before its drain ended", le.id, le.alias)
        fut = self._admitted.get(le.id)
        if fut is not None:
            return fut
        done: asyncio.Future[None] = loop.create_future()
        done.set_result(None)
        return done

    async def _first_scrape(self, le: LiveEndpoint) -> None:
        await self.scraper.scrape(le)
        self.settle()

    def _admit(self, le: LiveEndpoint) -> None:
        self.live.add(le)
        pool = self.pools[le.alias]
        pool.endpoints = [*pool.endpoints, le.endpoint]
        log.info("replica %s joined %s", le.id, le.alias)
        fut = self._admitted.pop(le.id, None)
        if fut is not None and not fut.done():
            fut.set_result(None)
        if self.on_admit is not None:
            self.on_admit()

    # -- leaving -----------------------------------------------------------------

    def drain(self, ep_id: str) -> asyncio.Future[None]:
        """Stop routing to ``ep_id``; the future resolves once it has been removed
        (at once when nothing of this gateway's is on it)."""
        fut = self._drains.get(ep_id)
        if fut is not None:
            return fut
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        joining = self.live.joining.get(ep_id)
        if joining is not None:  # never served: gone now
            self._remove(joining)
            fut.set_result(None)
            return fut
        le = self.live.by_id.get(ep_id)
        if le is None:
            raise KeyError(ep_id)
        le.endpoint.draining = True
        self._drains[ep_id] = fut
        log.info("replica %s of %s drains (%d in flight)", ep_id, le.alias,
                 le.endpoint.in_flight)
        self.settle()
        return fut

    def settle(self) -> None:
        """Admit joining replicas that passed a scrape; remove drained ones that are
        idle. Runs after each request, each scrape round and each change."""
        if not self.live.joining and not self._drains:
            return
        for joined in [j for j in self.live.joining.values() if j.healthy]:
            self._admit(joined)
        for ep_id in [i for i in self._drains if self._idle(i)]:
            fut = self._drains.pop(ep_id)
            le = self.live.by_id.get(ep_id)
            if le is not None:
                self._remove(le)
            if not fut.done():
                fut.set_result(None)

    def _idle(self, ep_id: str) -> bool:
        le = self.live.by_id.get(ep_id)
        return le is None or le.idle()

    def _remove(self, le: LiveEndpoint) -> None:
        self.live.remove(le)
        pool = self.pools[le.alias]
        pool.endpoints = [e for e in pool.endpoints if e is not le.endpoint]
        self.router.forget(le)
        fut = self._admitted.pop(le.id, None)
        if fut is not None:
            fut.cancel()
        self._spawn(le.endpoint.transport.close(), self._closing)
        log.info("replica %s left %s", le.id, le.alias)

    # -- tasks ---------------------------------------------------------------------

    @staticmethod
    def _spawn(coro: Coroutine[Any, Any, None], tasks: set[asyncio.Task[None]]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        tasks.add(task)

        def done(t: asyncio.Task[None]) -> None:
            tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.warning("replica membership task failed: %r", t.exception())

        task.add_done_callback(done)

    async def close(self) -> None:
        """Stops joining replicas (their transports closed); drains still pending
        are cancelled (the gateway's close closes the pools' transports)."""
        for le in list(self.live.joining.values()):
            self.live.remove(le)
            with contextlib.suppress(Exception):
                await le.endpoint.transport.close()
        for fut in [*self._drains.values(), *self._admitted.values()]:
            fut.cancel()
        self._drains.clear()
        self._admitted.clear()
        await cancel_and_wait(list(self._tasks))
        await asyncio.gather(*self._closing, return_exceptions=True)
