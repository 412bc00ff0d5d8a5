"""Sliding-window limits: the documented overshoot bound, exact refills, no false 429s.

The same scenarios run on the in-process store and on the real Redis.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenplane.admission import (
    Admission,
    CounterStore,
    LimitTable,
    MemoryStore,
    RedisStore,
    Scope,
)
from tokenplane.admission.limits import LimitRule

from .conftest import REDIS_URL
from .streams import Clients, Oracle

T0 = 1_700_000_000.0
WINDOW_S = 10.0

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("start"), st.integers(1, 40), st.integers(0, 60), st.integers(0, 90)),
        st.tuples(st.just("gen"), st.integers(0, 50), st.integers(1, 40)),
        st.tuples(st.just("end"), st.integers(0, 50)),
        st.tuples(st.just("wait"), st.integers(1, 4000)),
    ),
    max_size=60,
)


def _admission(store: CounterStore, limit: int) -> tuple[Admission, list[Scope]]:
    tenant = Scope("tenant", "acme")
    table = LimitTable()
    table.set_rules(tenant, (LimitRule("tpm", "window", "total_tokens", limit, WINDOW_S),))
    return Admission(table, store), [tenant, Scope("key", "k1")]


async def run_window_scenario(store: CounterStore, limit: int, g: int,
                              ops: list[tuple[Any, ...]]) -> None:
    admission, scopes = _admission(store, limit)
    oracle = Oracle(int(WINDOW_S * 1000))
    clients = Clients(admission, scopes, g, oracle, limit)
    now = T0
    for op in ops:
        if op[0] == "start":
            before = len(clients.denials)
            await clients.start(op[1], op[2], op[3], now)
            if len(clients.denials) > before:
                denial, n = clients.denials[-1]
                now_ms = int(now * 1000)
                used = oracle.in_window(now_ms)
                # Refused only when it did not fit, and told the exact wait.
                assert used + n > limit
                assert denial.remaining == max(0, limit - used)
                if n <= limit:
                    assert denial.retry_after_s is not None
                    wait = round(denial.retry_after_s * 1000)
                    assert oracle.in_window(now_ms + wait) + n <= limit
                    assert oracle.in_window(now_ms + wait - 1) + n > limit
                else:
                    assert denial.retry_after_s is None
        elif op[0] == "gen":
            await clients.generate(op[1], op[2], now)
        elif op[0] == "end":
            await clients.finish(op[1], now)
        else:
            now += op[1] / 1000
        status = await admission.status("acme", scopes[0], now)
        assert status[0].spent == oracle.in_window(int(now * 1000))
        # The documented bound: limit + C x G in every window.
        assert oracle.worst_window() <= limit + clients.max_inflight * g


@settings(max_examples=250, deadline=None)
@given(limit=st.integers(20, 400), g=st.integers(1, 16), ops=OPS)
def test_window_bound_refill_and_oracle_memory(limit: int, g: int,
                                               ops: list[tuple[Any, ...]]) -> None:
    asyncio.run(run_window_scenario(MemoryStore(), limit, g, ops))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(limit=st.integers(20, 400), g=st.integers(1, 16), ops=OPS)
def test_window_bound_refill_and_oracle_redis(redis_prefix: str, limit: int, g: int,
                                              ops: list[tuple[Any, ...]]) -> None:
    async def scenario() -> None:
        store = RedisStore.from_url(REDIS_URL, prefix=f"{redis_prefix}{uuid.uuid4().hex[:8]}:")
        try:
            await run_window_scenario(store, limit, g, ops)
        finally:
            await store.close()

    asyncio.run(scenario())
