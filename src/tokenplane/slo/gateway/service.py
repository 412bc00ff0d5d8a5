"""The gateway's SLO evaluation, off the request path, from the ledger.

Every ``refresh_s`` (``slo_alerting.evaluate_every``). The first round reads the last
attempt of every request in the longest SLO window (so a restart resets no window);
later rounds read from the watermark less an overlap (``LedgerFeed`` counts each
request once, as its final attempt). Every ``reload_s`` it rebuilds,
which also takes in rows that reached the ledger later than the overlap (a dead
worker's journal adopted long after). With the sealed minutes (``minutes``, the
``slo_minutes`` table, ``slo/minutes.py``) a rebuild loads the window's minutes older
than about an hour and reads raw rows only since then, and every round writes the
minutes that became sealed, so neither a restart nor the hourly rebuild reads 30
days of rows. Every worker and replica reads the same ledger,
so each one's view is the whole gateway's. After each round the alerting (when
webhooks are configured) sends what changed, from one leader.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from tokenplane.metering.request_history import slo_rows
from tokenplane.metering.stores.base import LedgerSink
from tokenplane.periodic import Periodic
from tokenplane.scheduling.scheduler import ClassRestriction
from tokenplane.slo.canary_guards import CanaryGuards
from tokenplane.slo.evaluator import SliStatus, SloEvaluator
from tokenplane.slo.facts import facts_from_row
from tokenplane.slo.feed import LedgerFeed
from tokenplane.slo.gateway.alerting import SloAlerting
from tokenplane.slo.gateway.minutes_store import MinuteStore
from tokenplane.slo.minutes import DEFAULT_SEAL_S, MinuteBook
from tokenplane.slo.protection import BudgetProtection
from tokenplane.slo.spec import Slo

log = logging.getLogger("tokenplane.slo")


class SloService:
    def __init__(
        self,
        slos: Sequence[Slo],
        sink: Callable[[], LedgerSink],
        *,
        refresh_s: float = 10.0,
        overlap_s: float = 30.0,
        reload_s: float = 3600.0,
        clock: Callable[[], float] = time.time,
        alerting: SloAlerting | None = None,
        guards: CanaryGuards | None = None,
        protection: BudgetProtection | None = None,
        restrict: Callable[[dict[str, ClassRestriction]], None] | None = None,
        minutes: MinuteStore | None = None,
        seal: bool = True,
        seal_s: float = DEFAULT_SEAL_S,
    ) -> None:
        self.slos = tuple(slos)
        self.sink = sink
        self.overlap_s = overlap_s
        self.reload_s = reload_s
        self.clock = clock
        self.alerting = alerting
        self.guards = guards
        self.protection = protection
        self.restrict = restrict
        # the sealed minutes (slo/minutes.py): read at every rebuild; written when
        # ``seal`` (the gateway; ``tokenplane slo status`` only reads them)
        self.minutes = minutes
        self.seal = seal
        self.book = MinuteBook(self.slos, seal_s)
        self.sealed_to: int | None = None  # the first bucket not yet written
        self.raw_from: float | None = None  # where the last rebuild read raw rows from
        self.longest_s = max((s.window_s for s in self.slos), default=0.0)
        self.feed: LedgerFeed | None = None
        self.loaded_at = 0.0
        self.refreshed_at: float | None = None
        self._periodic = Periodic("slo-evaluation", refresh_s, self.refresh, log=log,
                                  failure="SLO evaluation failed", first_now=True)

    def start(self) -> None:
        if self.slos:
            self._periodic.start()

    async def close(self) -> None:
        await self._periodic.close()
        if self.alerting is not None:
            await self.alerting.close()

    async def refresh(self) -> None:
        now = self.clock()
        feed = self.feed
        if feed is None or now - self.loaded_at >= self.reload_s:
            versioned = self.guards.slo_names if self.guards is not None else ()
            feed = LedgerFeed(SloEvaluator(self.slos, by_version=versioned), self.overlap_s)
            start = await self._load_minutes(feed.evaluator, now)
            self.raw_from = start
            await self._read(feed, start, now)
            self.feed, self.loaded_at = feed, now  # swap in a whole view
        else:
            since = feed.since()
            await self._read(feed, now - self.longest_s if since is None else since, now)
        feed.evaluator.prune(now)
        if self.minutes is not None and self.seal:
            await self._seal(feed.evaluator, now)
        self.refreshed_at = now
        if self.protection is not None and self.restrict is not None:
            self.restrict(self.protection.decide(feed.evaluator, now))
        decisions = (self.guards.step(feed.evaluator, now)
                     if self.guards is not None else [])
        if self.alerting is not None:
            await self.alerting.step(self.status(now), now, decisions)
        for d in decisions:
            log.warning("canary guard: %s of %s rolled back to %s: %s", d.spec.canary,
                        d.spec.alias, d.spec.stable, d.verdict.reason)

    async def _load_minutes(self, evaluator: SloEvaluator, now: float) -> float:
        """Load the sealed minutes of the window; where to read raw rows from (the
        window's start when some SLI has none stored)."""
        bucket_s = evaluator.bucket_s
        first = int((now - self.longest_s) // bucket_s)
        if self.minutes is None:
            return now - self.longest_s
        stored = await self.minutes.read(list(self.book.keys.values()), first)
        resume = self.book.resume(stored)
        if resume is None or resume <= first:
            self.sealed_to = first
            return now - self.longest_s
        self.book.load(evaluator, stored, resume)
        self.sealed_to = resume
        if self.seal:
            await self.minutes.prune(first)
        return resume * bucket_s

    async def _seal(self, evaluator: SloEvaluator, now: float) -> None:
        """Write the minutes that became sealed since the last write."""
        assert self.minutes is not None
        edge = self.book.sealed_before(now, evaluator.bucket_s)
        start = self.sealed_to
        if start is None or edge <= start:
            return
        await self.minutes.write(list(self.book.to_seal(evaluator, start, edge)))
        self.sealed_to = edge

    async def _read(self, feed: LedgerFeed, since: float, until: float) -> None:
        rows = await slo_rows(self.sink(), since, until + 1.0)
        feed.take((r["request_id"], int(r["attempt"]), facts_from_row(r)) for r in rows)

    def status(self, now: float | None = None, tenant: str | None = None) -> list[SliStatus]:
        """Every SLO's state; with ``tenant``, only the SLOs whose selector names that
        tenant (an SLO over every tenant would show the others' traffic)."""
        if self.feed is None:
            return []
        names = None
        if tenant is not None:
            names = [s.name for s in self.slos if s.selector.tenant == tenant]
        return self.feed.evaluator.status(self.clock() if now is None else now, names)
