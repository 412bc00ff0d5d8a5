"""The in-process counter store: one worker, no I/O, the functional core directly.

Its reservations need no leases (they live and die with the process), so by default
(``lease_s=0``) its gauge units are held until the reservation is settled or
expires and its heartbeat does nothing; with ``lease_s`` it leases them exactly as
the Redis store does (the stores are tested against each other)."""

from __future__ import annotations

from collections.abc import Sequence

from tokenplane.admission import decode
from tokenplane.admission.amounts import Amounts
from tokenplane.admission.binding import BoundLimit
from tokenplane.admission.book import CounterBook
from tokenplane.admission.leases import Leases, holds_gauge
from tokenplane.admission.outcomes import DebitResult, Denial, Grant, LimitStatus, Settlement


def ms(now: float) -> int:
    return int(now * 1000)


class MemoryStore:
    """Counters of one process (the embedded default, and the fail-open fallback)."""

    def __init__(self, *, lease_s: float = 0.0) -> None:
        self.book = CounterBook()
        self.lease_ms = int(lease_s * 1000)
        self.leases = Leases()

    async def reserve(self, tenant: str, rid: str, limits: Sequence[BoundLimit],
                      amounts: Amounts, now: float, ttl_s: float) -> Grant | Denial:
        leased = self.lease_ms > 0 and holds_gauge(limits)
        raw = self.book.reserve(tenant, rid, [b.wire() for b in limits], amounts.vector(),
                                ms(now), int(ttl_s * 1000), self.lease_ms if leased else 0)
        if leased and raw[0] == 1:
            self.leases.add(tenant, rid)
        return decode.grant_or_denial(raw, rid, tenant, amounts, limits, now, ttl_s)

    async def debit(self, tenant: str, rid: str, limits: Sequence[BoundLimit],
                    amounts: Amounts, now: float) -> DebitResult:
        raw = self.book.debit(rid, [b.wire() for b in limits], amounts.vector(), ms(now))
        return decode.debit_result(raw, limits)

    async def reconcile(self, tenant: str, rid: str, limits: Sequence[BoundLimit],
                        actual: Amounts, now: float) -> Settlement:
        self.leases.discard(tenant, rid)
        raw = self.book.reconcile(rid, [b.wire() for b in limits], actual.vector(), ms(now))
        return decode.settlement(raw, limits)

    async def status(self, tenant: str, limits: Sequence[BoundLimit],
                     now: float) -> list[LimitStatus]:
        raw = self.book.status(tenant, [b.wire() for b in limits], ms(now))
        return decode.statuses(raw, limits, now)

    async def renew(self, tenant: str, rids: Sequence[str], now: float) -> list[int]:
        return self.book.renew(tenant, rids, ms(now), self.lease_ms)

    async def heartbeat(self, now: float) -> None:
        if self.lease_ms <= 0:
            return
        for tenant, rids in self.leases.by_tenant():
            self.book.renew(tenant, rids, ms(now), self.lease_ms)

    async def close(self) -> None:
        return None
