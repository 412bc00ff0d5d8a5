"""What admission does when the shared store is unreachable: fail closed or open.

``fail_closed``: every operation raises :class:`StoreUnavailable` (the gateway
answers 503 with a clear error). ``fail_open``: operations run on a local
:class:`MemoryStore` whose limits are divided by the number of gateway replicas,
so the fleet together stays near the configured limit; every fallback is
counted and the switch is logged, never silent. The primary is probed again
``probe_interval_s`` after the last failure (measured on the caller's ``now``) and
the wrapper recovers by itself as soon as it answers.

Settling (reconcile / release) never raises: a settlement the primary cannot take
is queued (``max_pending``, oldest dropped beyond it) and retried in order by the
heartbeat once the primary answers; while settlements wait, new ones queue behind
them. A reservation whose answer was lost (the store failed during ``reserve``) is
queued for release too, since it may have been made. Retrying is safe: the store
deletes a reservation when it settles it, so a settlement applied twice (its first
answer lost) finds nothing the second time and changes nothing. A debit fails
closed (raises) or open (allowed, counted) like a reservation.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tokenplane.admission.amounts import Amounts
from tokenplane.admission.binding import BoundLimit
from tokenplane.admission.outcomes import DebitResult, Denial, Grant, LimitStatus, Settlement
from tokenplane.admission.stores.base import CounterStore, StoreUnavailable
from tokenplane.admission.stores.memory import MemoryStore

FailureMode = Literal["fail_closed", "fail_open"]


@dataclass(slots=True)
class ResilienceStats:
    """Counters for metrics: export them as ``tokenplane_admission_store_*``."""

    unavailable: int = 0
    fallback_ops: int = 0
    recoveries: int = 0
    orphaned_settlements: int = 0  # dropped: the retry queue was full
    unenforced_debits: int = 0
    queued_settlements: int = 0
    retried_settlements: int = 0


@dataclass(frozen=True, slots=True)
class PendingSettlement:
    tenant: str
    rid: str
    limits: tuple[BoundLimit, ...]
    actual: Amounts
    now: float


class ResilientStore:
    """A :class:`CounterStore` that survives the loss of its primary."""

    def __init__(self, primary: CounterStore, *, mode: FailureMode = "fail_closed",
                 replicas: int = 1, probe_interval_s: float = 1.0,
                 max_pending: int = 100_000, logger: logging.Logger | None = None) -> None:
        if mode not in ("fail_closed", "fail_open"):
            raise ValueError(f"mode must be fail_closed or fail_open, got {mode!r}")
        if replicas < 1:
            raise ValueError("replicas must be >= 1")
        self.primary = primary
        self.mode: FailureMode = mode
        self.replicas = replicas
        self.probe_interval_s = probe_interval_s
        self.local = MemoryStore()
        self.stats = ResilienceStats()
        self.log = logger or logging.getLogger("tokenplane.admission")
        self._down_since: float | None = None
        self._last_failure = 0.0
        self._local_ids: set[str] = set()
        self.max_pending = max_pending
        self._pending: deque[PendingSettlement] = deque()
        self._draining = False

    @property
    def degraded(self) -> bool:
        return self._down_since is not None

    def _scaled(self, limits: Sequence[BoundLimit]) -> list[BoundLimit]:
        out: list[BoundLimit] = []
        for b in limits:
            share = b.rule.limit // self.replicas if b.rule.limit else 0
            rule = dataclasses.replace(b.rule, limit=max(1, share) if b.rule.limit else 0)
            out.append(dataclasses.replace(b, rule=rule))
        return out

    def _use_primary(self, now: float) -> bool:
        if self._down_since is None:
            return True
        return now - self._last_failure >= self.probe_interval_s

    def _failed(self, exc: StoreUnavailable, now: float, *, settling: bool = False) -> None:
        """Record the failure; raise it when failing closed (never while settling)."""
        self.stats.unavailable += 1
        self._last_failure = now
        if self.mode == "fail_closed":
            if self._down_since is None:
                self._down_since = now
                self.log.error("admission store unavailable, failing closed: %s", exc)
            if not settling:
                raise exc
            return
        if self._down_since is None:
            self._down_since = now
            self.log.error(
                "admission store unavailable, failing open on local limits / %d replicas: %s",
                self.replicas, exc,
            )

    def _recovered(self, now: float) -> None:
        if self._down_since is not None:
            self.stats.recoveries += 1
            self.log.warning("admission store back after %.3fs", now - self._down_since)
            self._down_since = None

    async def reserve(self, tenant: str, rid: str, limits: Sequence[BoundLimit],
                      amounts: Amounts, now: float, ttl_s: float) -> Grant | Denial:
        if self._use_primary(now):
            try:
                result = await self.primary.reserve(tenant, rid, limits, amounts, now, ttl_s)
            except StoreUnavailable as exc:
                # the store may have made it and only the answer was lost: release it there
                self._queue(PendingSettlement(tenant, rid, tuple(limits), Amounts(), now))
                self._failed(exc, now)
            else:
                self._recovered(now)
                return result
        elif self.mode == "fail_closed":
            raise StoreUnavailable("admission store unavailable (failing closed)")
        self.stats.fallback_ops += 1
        local = await self.local.reserve(tenant, rid, self._scaled(limits), amounts, now, ttl_s)
        if isinstance(local, Grant):
            if len(self._local_ids) > 10_000:
                self._local_ids = {r for r in self._local_ids if self.local.book.holds(r)}
            self._local_ids.add(rid)
            return dataclasses.replace(local, limits=tuple(limits))
        return local

    async def debit(self, tenant: str, rid: str, limits: Sequence[BoundLimit],
                    amounts: Amounts, now: float) -> DebitResult:
        if rid in self._local_ids:
            self.stats.fallback_ops += 1
            return await self.local.debit(tenant, rid, self._scaled(limits), amounts, now)
        try:
            return await self.primary.debit(tenant, rid, limits, amounts, now)
        except StoreUnavailable as exc:
            self._failed(exc, now)
            self.stats.unenforced_debits += 1
            return DebitResult(ok=True)

    async def reconcile(self, tenant: str, rid: str, limits: Sequence[BoundLimit],
                        actual: Amounts, now: float) -> Settlement:
        if rid in self._local_ids:
            self._local_ids.discard(rid)
            self.stats.fallback_ops += 1
            return await self.local.reconcile(tenant, rid, self._scaled(limits), actual, now)
        item = PendingSettlement(tenant, rid, tuple(limits), actual, now)
        if self._pending or not self._use_primary(now):
            self._queue(item)  # behind the ones waiting, in order
            return Settlement(found=False)
        try:
            return await self.primary.reconcile(tenant, rid, limits, actual, now)
        except StoreUnavailable as exc:
            self._failed(exc, now, settling=True)
            self._queue(item)
            return Settlement(found=False)

    def _queue(self, item: PendingSettlement) -> None:
        if len(self._pending) >= self.max_pending:
            self._pending.popleft()  # it expires there (gauges: when its lease lapses)
            self.stats.orphaned_settlements += 1
            if self.stats.orphaned_settlements == 1:
                self.log.error("admission settlement queue full (%d): dropping the oldest",
                               self.max_pending)
        self._pending.append(item)
        self.stats.queued_settlements += 1

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def retry_settlements(self, now: float) -> int:
        """Send the queued settlements in order until one fails; how many went."""
        if self._draining or not self._pending or not self._use_primary(now):
            return 0
        self._draining = True
        sent = 0
        try:
            while self._pending:
                item = self._pending[0]
                try:
                    await self.primary.reconcile(item.tenant, item.rid, item.limits,
                                                 item.actual, item.now)
                except StoreUnavailable as exc:
                    self._failed(exc, now, settling=True)
                    break
                self._pending.popleft()
                sent += 1
                self.stats.retried_settlements += 1
            else:
                self._recovered(now)
        finally:
            self._draining = False
        return sent

    async def heartbeat(self, now: float) -> None:
        """Retry waiting settlements, then renew the primary's leases."""
        await self.retry_settlements(now)
        if not self._use_primary(now):
            return
        try:
            await self.primary.heartbeat(now)
        except StoreUnavailable as exc:
            self._failed(exc, now, settling=True)

    async def status(self, tenant: str, limits: Sequence[BoundLimit],
                     now: float) -> list[LimitStatus]:
        if self._use_primary(now):
            try:
                result = await self.primary.status(tenant, limits, now)
            except StoreUnavailable as exc:
                self._failed(exc, now)
            else:
                self._recovered(now)
                return result
        elif self.mode == "fail_closed":
            raise StoreUnavailable("admission store unavailable (failing closed)")
        return await self.local.status(tenant, self._scaled(limits), now)

    async def close(self) -> None:
        await self.primary.close()
