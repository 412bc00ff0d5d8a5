"""Settlements the shared store could not take are queued and retried in order
(issue 13, item 5), against the real Redis: a settlement applied twice (its first
answer lost) gives nothing back twice; a reservation whose answer was lost is
released; the queue is bounded."""

from __future__ import annotations

from collections.abc import Sequence

from tests.admission.conftest import REDIS_URL
from tokenplane.admission import (
    Admission,
    Amounts,
    Denial,
    Grant,
    LimitTable,
    RedisStore,
    ResilientStore,
    Scope,
    ScopeLimits,
    Settlement,
    StoreUnavailable,
)
from tokenplane.admission.binding import BoundLimit

NOW = 1_700_000_000.0
TENANT = Scope("tenant", "acme")


class LosingStore(RedisStore):
    """Redis whose next answers are lost: the operation is applied, then the caller
    sees the store as unreachable (a timeout after Redis did the work)."""

    lose_reconciles = 0
    lose_reserves = 0
    refuse_reconciles = 0  # unreachable before doing anything

    async def reconcile(self, tenant: str, rid: str, limits: Sequence[BoundLimit],
                        actual: Amounts, now: float) -> Settlement:
        if self.refuse_reconciles:
            self.refuse_reconciles -= 1
            self.leases.discard(tenant, rid)  # as the real call does before it fails
            raise StoreUnavailable("unreachable")
        done = await super().reconcile(tenant, rid, limits, actual, now)
        if self.lose_reconciles:
            self.lose_reconciles -= 1
            raise StoreUnavailable("answer lost")
        return done

    async def reserve(self, tenant: str, rid: str, limits: Sequence[BoundLimit],
                      amounts: Amounts, now: float, ttl_s: float) -> Grant | Denial:
        done = await super().reserve(tenant, rid, limits, amounts, now, ttl_s)
        if self.lose_reserves:
            self.lose_reserves -= 1
            raise StoreUnavailable("answer lost")
        return done


def _stores(prefix: str, max_pending: int = 100) -> tuple[LosingStore, ResilientStore,
                                                          Admission]:
    primary = LosingStore.from_url(REDIS_URL, prefix=prefix, lease_s=5.0)
    assert isinstance(primary, LosingStore)
    store = ResilientStore(primary, probe_interval_s=0, max_pending=max_pending)
    table = LimitTable({TENANT: ScopeLimits(max_concurrent=3, tpm=10_000)})
    return primary, store, Admission(table, store, ttl_s=900)


async def _held(adm: Admission, now: float) -> dict[str, int]:
    return {s.limit_name: s.reserved + s.spent for s in await adm.status("acme", TENANT, now)}


async def test_a_settlement_applied_twice_releases_once(redis_prefix: str) -> None:
    primary, store, adm = _stores(redis_prefix)
    grants = [await adm.reserve([TENANT], Amounts(1, 10, 10), NOW) for _ in range(3)]
    assert all(isinstance(g, Grant) for g in grants)
    first = grants[0]
    assert isinstance(first, Grant)
    primary.lose_reconciles = 1
    assert not (await adm.reconcile(first, Amounts(1, 10, 4), NOW + 1)).found  # queued
    assert store.pending == 1
    assert (await _held(adm, NOW + 1))["max_concurrent"] == 2  # Redis did settle it
    await store.heartbeat(NOW + 2)  # the retry: found nothing, gave nothing back
    assert store.pending == 0 and store.stats.retried_settlements == 1
    held = await _held(adm, NOW + 2)
    assert held == {"max_concurrent": 2, "tpm": 20 + 20 + 14}
    for g in grants[1:]:
        assert isinstance(g, Grant)
        assert (await adm.reconcile(g, Amounts(1, 10, 10), NOW + 3)).found
    assert await _held(adm, NOW + 3) == {"max_concurrent": 0, "tpm": 54}
    await store.close()


async def test_a_reservation_whose_answer_was_lost_is_released(redis_prefix: str) -> None:
    primary, store, adm = _stores(redis_prefix)
    primary.lose_reserves = 1
    try:
        await adm.reserve([TENANT], Amounts(1, 10, 10), NOW)
    except StoreUnavailable:
        pass
    else:
        raise AssertionError("the lost answer must fail closed")
    assert (await _held(adm, NOW))["max_concurrent"] == 1  # made, but nobody holds it
    await store.heartbeat(NOW + 1)
    assert await _held(adm, NOW + 1) == {"max_concurrent": 0, "tpm": 0}
    await store.close()


async def test_settlements_wait_in_order_and_the_queue_is_bounded(redis_prefix: str) -> None:
    primary, store, adm = _stores(redis_prefix, max_pending=2)
    grants = [await adm.reserve([TENANT], Amounts(1, 10, 10), NOW) for _ in range(3)]
    primary.refuse_reconciles = 1
    for i, g in enumerate(grants):  # the first fails; the others queue behind it
        assert isinstance(g, Grant)
        assert not (await adm.reconcile(g, Amounts(1, 10, i), NOW + 1)).found
    assert store.pending == 2 and store.stats.orphaned_settlements == 1
    await store.heartbeat(NOW + 2)
    assert store.pending == 0
    # the oldest was dropped (it stays reserved until its lease lapses), the other
    # two were retried with their own usage
    assert await _held(adm, NOW + 2) == {"max_concurrent": 1, "tpm": 20 + 11 + 12}
    assert await _held(adm, NOW + 5.5) == {"max_concurrent": 0, "tpm": 20 + 11 + 12}
    await store.close()
