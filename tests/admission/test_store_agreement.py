"""The Redis script and the in-process core give the same answers, step by step."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenplane.admission import (
    Admission,
    Amounts,
    CounterStore,
    Grant,
    LimitTable,
    MemoryStore,
    Period,
    RedisStore,
    Scope,
    ScopeLimits,
)
from tokenplane.admission.limits import LimitRule

from .conftest import REDIS_URL

T0 = 1_700_006_400.0 - 30  # 30 s before a UTC midnight
TENANT, KEY = Scope("tenant", "acme"), Scope("key", "k", "m")

STEP = st.one_of(
        st.tuples(st.just("reserve"), st.integers(0, 40), st.integers(0, 40),
                  st.integers(0, 90)),
        st.tuples(st.just("debit"), st.integers(0, 20), st.integers(0, 30), st.integers(0, 50)),
        st.tuples(st.just("reconcile"), st.integers(0, 20), st.integers(0, 60),
                  st.integers(0, 60), st.integers(0, 150)),
        st.tuples(st.just("release"), st.integers(0, 20)),
        st.tuples(st.just("wait"), st.sampled_from([1, 250, 999, 1000, 4000, 20_000, 61_000])),
)
OPS = st.lists(STEP, max_size=40)


def _table() -> LimitTable:
    table = LimitTable({
        TENANT: ScopeLimits(tokens_per_day=400, budget_micros=300, max_concurrent=4,
                            budget_period=Period("fixed", resets_at=(T0 + 20, T0 + 50))),
        KEY: ScopeLimits(rpm=6, max_tokens_in_flight=150),
    })
    table.set_rules(Scope("key", "k"), (
        LimitRule("out5s", "window", "output_tokens", 90, window_s=5.0),
        LimitRule("in5s", "window", "input_tokens", 80, window_s=5.0),
    ))
    return table


def _norm(x: Any) -> Any:
    if isinstance(x, Grant):
        return ("grant", x.headroom, x.alerts)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return x
    return x


async def _step(adm: Admission, live: list[Grant], op: tuple[Any, ...], now: float,
                rid: str) -> Any:
    chain = [TENANT, Scope("key", "k"), KEY]
    if op[0] == "reserve":
        got = await adm.reserve(chain, Amounts(1, op[1], op[2], op[3]), now,
                                reservation_id=rid)
        if isinstance(got, Grant):
            live.append(got)
        return _norm(got)
    if not live:
        return None
    if op[0] == "debit":
        return await adm.debit(live[op[1] % len(live)], op[2], now, cost_micros=op[3])
    grant = live.pop(op[1] % len(live))
    if op[0] == "reconcile":
        return await adm.reconcile(grant, Amounts(1, op[2], op[3], op[4]), now)
    return await adm.release(grant, now)


async def _lockstep(stores: tuple[CounterStore, CounterStore], ops: list[tuple[Any, ...]]) -> None:
    adms = [Admission(_table(), s, ttl_s=8) for s in stores]
    lives: list[list[Grant]] = [[], []]
    now = T0
    for i, op in enumerate(ops):
        if op[0] == "wait":
            now += op[1] / 1000
            continue
        if op[0] == "renew":  # the heartbeat of some of the live reservations
            picked = [g.reservation_id for j, g in enumerate(lives[0]) if op[1] >> (j % 8) & 1]
            ra, rb = [await s.renew("acme", picked, now) for s in stores]  # type: ignore[attr-defined]
            assert ra == rb, (i, op)
            continue
        rid = f"r{i}"
        a, b = [await _step(adm, live, op, now, rid)
                for adm, live in zip(adms, lives, strict=True)]
        assert a == b, (i, op)
        for scope in (TENANT, KEY, Scope("key", "k")):
            sa, sb = [await adm.status("acme", scope, now) for adm in adms]
            assert sa == sb, (i, op, scope)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_redis_and_memory_agree(redis_prefix: str, ops: list[tuple[Any, ...]]) -> None:
    async def scenario() -> None:
        redis_store = RedisStore.from_url(REDIS_URL,
                                          prefix=f"{redis_prefix}{uuid.uuid4().hex[:8]}:")
        try:
            await _lockstep((MemoryStore(), redis_store), ops)
        finally:
            await redis_store.close()

    asyncio.run(scenario())


LEASE_OPS = st.lists(st.one_of(STEP, st.tuples(st.just("renew"), st.integers(0, 255))),
                     max_size=40)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=LEASE_OPS)
def test_redis_and_memory_agree_on_leases(redis_prefix: str, ops: list[tuple[Any, ...]]) -> None:
    """Concurrency leases of 3 s (shorter than the 8 s reservations): renewed, lapsed
    (their units given back while the reservation stays open), taken again by a late
    renewal, settled after lapsing (nothing given back twice): the same in both."""
    async def scenario() -> None:
        redis_store = RedisStore.from_url(REDIS_URL, lease_s=3.0,
                                          prefix=f"{redis_prefix}{uuid.uuid4().hex[:8]}:")
        try:
            await _lockstep((MemoryStore(lease_s=3.0), redis_store), ops)
        finally:
            await redis_store.close()

    asyncio.run(scenario())
