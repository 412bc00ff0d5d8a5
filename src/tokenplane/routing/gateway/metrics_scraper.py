"""Scrapes each HTTP engine replica's ``/metrics`` on an interval (one pooled session).

A good scrape stores the parsed figures and marks the replica healthy; a
connection failure or timeout marks it unhealthy and counts as a failure for its
breaker (not for a replica still joining: it waits for its first good scrape with
a clean breaker). A replica answering without metrics (a 404 from a plain OpenAI-compatible
server) stays healthy with unknown engine figures. ``on_update`` runs after each
round (the gateway pumps its scheduler queues there).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import aiohttp

from tokenplane.periodic import Periodic
from tokenplane.routing.engine_metrics import parse_engine_metrics
from tokenplane.routing.gateway.replicas import LiveEndpoint, LiveView

log = logging.getLogger("tokenplane.routing")


class MetricsScraper:
    def __init__(
        self, live: LiveView, interval_s: float, timeout_s: float,
        on_update: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.live = live
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.on_update = on_update
        self.clock = clock
        self.rounds = 0
        self._session: aiohttp.ClientSession | None = None
        self._started = False
        self._timer = Periodic("tokenplane-scraper", interval_s, self.scrape_once, log=log,
                               failure="metrics scrape round failed", first_now=True)

    async def start(self) -> None:
        self._started = True
        self.ensure_running()

    def ensure_running(self) -> None:
        """Scrape on the interval once there is something to scrape (replicas that
        join while the gateway runs start it)."""
        if self._started and self.interval_s > 0 and self.live.scraped():
            self._timer.start()

    async def close(self) -> None:
        self._started = False
        await self._timer.close()
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def scrape_once(self) -> None:
        targets = self.live.scraped()
        await asyncio.gather(*(self.scrape(le) for le in targets))
        self.rounds += 1
        if self.on_update is not None:
            self.on_update()

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=64, keepalive_timeout=30),
                timeout=aiohttp.ClientTimeout(total=self.timeout_s),
            )
        return self._session

    async def scrape(self, le: LiveEndpoint) -> None:
        """One health check of ``le`` (its figures when good)."""
        assert le.scrape_url is not None
        now = self.clock()
        try:
            async with self._client().get(le.scrape_url) as resp:
                text = await resp.text() if resp.status == 200 else None
        except (aiohttp.ClientError, TimeoutError, OSError):
            le.scrape_failures += 1
            if le.id in self.live.joining:  # not up yet: no failure of a replica serving
                return
            if le.healthy:
                log.warning("replica %s failed its health check", le.id)
            le.healthy = False
            le.breaker.record_failure(now)
            return
        le.healthy = True
        le.scraped_at = now
        if text is not None:
            le.scraped = parse_engine_metrics(text)
