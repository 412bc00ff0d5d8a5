"""Calendar budgets and gauges: conservation, exact resets, alerts, expiry."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenplane.admission import (
    Admission,
    Amounts,
    CounterStore,
    Denial,
    Grant,
    LimitTable,
    MemoryStore,
    Period,
    RedisStore,
    Scope,
    ScopeLimits,
)

from .conftest import REDIS_URL

DAY0 = 1_700_006_400.0  # 2023-11-15 00:00:00 UTC
TENANT = Scope("tenant", "acme")
PRICE = 3  # micros per token

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("start"), st.integers(0, 80), st.integers(0, 80)),
        st.tuples(st.just("debit"), st.integers(0, 30), st.integers(1, 30)),
        st.tuples(st.just("end"), st.integers(0, 30), st.integers(0, 150)),
        st.tuples(st.just("release"), st.integers(0, 30)),
        st.tuples(st.just("wait"), st.integers(1, 60_000)),
    ),
    max_size=50,
)


def _admission(store: CounterStore, day: int, budget: int, conc: int) -> Admission:
    table = LimitTable({TENANT: ScopeLimits(tokens_per_day=day, budget_micros=budget,
                                            budget_period=Period("daily"),
                                            max_concurrent=conc)})
    return Admission(table, store, ttl_s=3600)


async def run_conservation(store: CounterStore, day: int, budget: int, conc: int,
                           ops: list[tuple[Any, ...]]) -> None:
    adm = _admission(store, day, budget, conc)
    scopes = [TENANT]
    now = DAY0 + 3600
    live: list[tuple[Grant, int]] = []  # grant, tokens granted so far
    settled = 0
    debit_excess = 0
    for op in ops:
        if op[0] == "start":
            tokens = op[1] + op[2]
            got = await adm.reserve(scopes, Amounts(1, op[1], op[2], tokens * PRICE), now)
            if isinstance(got, Grant):
                live.append((got, tokens))
            else:
                assert got.code in ("budget_exceeded", "concurrency_limit_exceeded")
                if got.code == "concurrency_limit_exceeded":
                    assert len(live) == conc
        elif op[0] == "debit" and live:
            i = op[1] % len(live)
            r = await adm.debit(live[i][0], op[2], now, cost_micros=op[2] * PRICE)
            if r.ok:
                live[i] = (live[i][0], live[i][1] + op[2])
            else:
                assert r.denial is not None and r.denial.code == "budget_exceeded"
        elif op[0] == "end" and live:
            grant, granted = live.pop(op[1] % len(live))
            used = op[2]
            debit_excess = max(debit_excess, used - granted)
            s = await adm.reconcile(grant, Amounts(1, 0, used, used * PRICE), now)
            assert s.found
            settled += used
        elif op[0] == "release" and live:
            grant, _ = live.pop(op[1] % len(live))
            assert (await adm.release(grant, now)).found
        elif op[0] == "wait":
            now += op[1] / 1000
        status = {s.limit_name: s for s in await adm.status("acme", TENANT, now)}
        held = sum(g for _, g in live)
        # Conservation: spent is exactly what was settled, reserved what is still held.
        assert status["tokens_per_day"].reserved == held
        assert status["tokens_per_day"].spent == settled
        assert status["budget"].spent == settled * PRICE
        assert status["budget"].reserved == held * PRICE
        assert status["max_concurrent"].reserved == len(live) <= conc
        if status["tokens_per_day"].spent + held > day:
            # Over the limit only through usage beyond what was granted.
            assert settled + held <= day + len(ops) * debit_excess


@settings(max_examples=200, deadline=None)
@given(day=st.integers(50, 600), conc=st.integers(1, 5), ops=OPS)
def test_conservation_memory(day: int, conc: int, ops: list[tuple[Any, ...]]) -> None:
    asyncio.run(run_conservation(MemoryStore(), day, day * PRICE, conc, ops))


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(day=st.integers(50, 600), conc=st.integers(1, 5), ops=OPS)
def test_conservation_redis(redis_prefix: str, day: int, conc: int,
                            ops: list[tuple[Any, ...]]) -> None:
    async def scenario() -> None:
        store = RedisStore.from_url(REDIS_URL, prefix=f"{redis_prefix}{uuid.uuid4().hex[:8]}:")
        try:
            await run_conservation(store, day, day * PRICE, conc, ops)
        finally:
            await store.close()

    asyncio.run(scenario())


@given(offset_ms=st.integers(0, 86_399_998), kind=st.sampled_from(["daily", "weekly", "monthly"]))
def test_period_reset_is_exact_memory(offset_ms: int, kind: str) -> None:
    asyncio.run(run_reset(MemoryStore(), DAY0 + offset_ms / 1000, kind))


async def run_reset(store: CounterStore, now: float, kind: str) -> None:
    period = Period(kind)  # type: ignore[arg-type]
    adm = Admission(LimitTable({TENANT: ScopeLimits(budget_micros=100, budget_period=period)}),
                    store, ttl_s=40 * 86_400.0)
    end = period.window(now).end_ms / 1000
    held = await adm.reserve([TENANT], Amounts(1, cost_micros=60), now)
    full = await adm.reserve([TENANT], Amounts(1, cost_micros=40), now)
    assert isinstance(held, Grant) and isinstance(full, Grant)
    late = await adm.reserve([TENANT], Amounts(1, cost_micros=1), end - 0.001)
    assert isinstance(late, Denial) and late.code == "budget_exceeded"
    assert late.retry_after_s == pytest.approx(0.001)
    fresh = await adm.reserve([TENANT], Amounts(1, cost_micros=100), end)
    assert isinstance(fresh, Grant)
    # A reservation from the old window settles there; only its excess lands here.
    assert (await adm.reconcile(held, Amounts(1, cost_micros=65), end)).found
    st_new = {s.limit_name: s for s in await adm.status("acme", TENANT, end)}["budget"]
    assert (st_new.spent, st_new.reserved) == (5, 100)
    assert st_new.resets_at == period.window(end).end_ms / 1000


async def test_period_reset_is_exact_on_both_stores(store: CounterStore) -> None:
    await run_reset(store, DAY0 + 1234.5, "monthly")
    await run_reset(store, DAY0 + 86_400 * 40 + 0.25, "weekly")


async def test_alerts_fire_once_per_threshold(store: CounterStore) -> None:
    adm = Admission(LimitTable({TENANT: ScopeLimits(tokens_per_month=100)}), store)
    now = DAY0
    g1 = await adm.reserve([TENANT], Amounts(1, 30, 25), now)
    assert isinstance(g1, Grant)
    assert [a.threshold_pct for a in g1.alerts] == [50]
    g2 = await adm.reserve([TENANT], Amounts(1, 45, 0), now)
    assert isinstance(g2, Grant)
    assert [(a.threshold_pct, a.used, a.limit) for a in g2.alerts] == [(80, 100, 100),
                                                                        (100, 100, 100)]
    assert g2.alerts[0].scope == TENANT and g2.alerts[0].limit_name == "tokens_per_month"
    s = await adm.reconcile(g1, Amounts(1, 30, 5), now)  # refund: no alert
    assert s.alerts == ()


async def test_expired_reservation_frees_concurrency_and_counts_as_used(
        store: CounterStore) -> None:
    adm = Admission(LimitTable({TENANT: ScopeLimits(max_concurrent=1, tokens_per_day=1000)}),
                    store, ttl_s=30)
    now = DAY0
    crashed = await adm.reserve([TENANT], Amounts(1, 100, 50), now)
    assert isinstance(crashed, Grant)
    blocked = await adm.reserve([TENANT], Amounts(1, 1), now + 29.999)
    assert isinstance(blocked, Denial) and blocked.code == "concurrency_limit_exceeded"
    after = await adm.reserve([TENANT], Amounts(1, 10), now + 30)
    assert isinstance(after, Grant)
    day = {s.limit_name: s for s in await adm.status("acme", TENANT, now + 30)}
    assert (day["tokens_per_day"].spent, day["tokens_per_day"].reserved) == (150, 10)
    assert not (await adm.reconcile(crashed, Amounts(1, 1), now + 31)).found


async def test_debit_extends_the_deadline(store: CounterStore) -> None:
    adm = Admission(LimitTable({TENANT: ScopeLimits(max_concurrent=1)}), store, ttl_s=10)
    g = await adm.reserve([TENANT], Amounts(1, 5), DAY0)
    assert isinstance(g, Grant)
    assert (await adm.debit(g, 4, DAY0 + 9)).ok
    assert isinstance(await adm.reserve([TENANT], Amounts(1), DAY0 + 18), Denial)
    assert isinstance(await adm.reserve([TENANT], Amounts(1), DAY0 + 19), Grant)
