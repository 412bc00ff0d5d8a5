"""The in-process counter store: one worker, no I/O, the functional core directly."""

from __future__ import annotations

from collections.abc import Sequence

from tokenplane.admission import decode
from tokenplane.admission.amounts import Amounts
from tokenplane.admission.binding import BoundLimit
from tokenplane.admission.book import CounterBook
from tokenplane.admission.outcomes import DebitResult, Denial, Grant, LimitStatus, Settlement


def ms(now: float) -> int:
    return int(now * 1000)


class MemoryStore:
    """Counters of one process (the embedded default, and the fail-open fallback)."""

    def __init__(self) -> None:
        self.book = CounterBook()

    async def reserve(self, tenant: str, rid: str, limits: Sequence[BoundLimit],
                      amounts: Amounts, now: float, ttl_s: float) -> Grant | Denial:
        raw = self.book.reserve(tenant, rid, [b.wire() for b in limits], amounts.vector(),
                                ms(now), int(ttl_s * 1000))
        return decode.grant_or_denial(raw, rid, tenant, amounts, limits, now, ttl_s)

    async def debit(self, tenant: str, rid: str, limits: Sequence[BoundLimit],
                    amounts: Amounts, now: float) -> DebitResult:
        raw = self.book.debit(rid, [b.wire() for b in limits], amounts.vector(), ms(now))
        return decode.debit_result(raw, limits)

    async def reconcile(self, tenant: str, rid: str, limits: Sequence[BoundLimit],
                        actual: Amounts, now: float) -> Settlement:
        raw = self.book.reconcile(rid, [b.wire() for b in limits], actual.vector(), ms(now))
        return decode.settlement(raw, limits)

    async def status(self, tenant: str, limits: Sequence[BoundLimit],
                     now: float) -> list[LimitStatus]:
        raw = self.book.status(tenant, [b.wire() for b in limits], ms(now))
        return decode.statuses(raw, limits, now)

    async def close(self) -> None:
        return None
