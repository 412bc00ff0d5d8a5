"""Admission cost per request: in-process store vs Redis store (one round trip).

Prints JSON. Baselines measured in the same run: an empty ``await`` for the
in-process store, a bare Redis ``PING`` for the Redis store. Round trips per
admission are counted by Redis itself (INFO commandstats).

    python bench/bench_admission.py [--redis redis://127.0.0.1:6379/0] [--n 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import redis.asyncio as aioredis

from tokenplane.admission import (
    Admission,
    Amounts,
    Grant,
    LimitTable,
    MemoryStore,
    Parties,
    Period,
    RedisStore,
    Scope,
    ScopeLimits,
)
from tokenplane.admission.stores.base import CounterStore

BIG = 10**12
T0 = 1_700_000_000.0


def table() -> LimitTable:
    """Four scopes of a typical chain, eight limits among them."""
    return LimitTable({
        Scope("tenant", "acme"): ScopeLimits(tpm=BIG, budget_micros=BIG,
                                             budget_period=Period("monthly")),
        Scope("department", "eng"): ScopeLimits(tokens_per_day=BIG),
        Scope("app", "bot"): ScopeLimits(rpm=BIG, max_concurrent=10**6),
        Scope("key", "k1"): ScopeLimits(rpm=BIG, max_tokens_in_flight=BIG),
    })


def summary(samples_ns: list[int]) -> dict[str, float]:
    s = sorted(samples_ns)
    return {
        "p50_us": round(s[len(s) // 2] / 1000, 2),
        "p99_us": round(s[int(len(s) * 0.99)] / 1000, 2),
        "mean_us": round(statistics.fmean(s) / 1000, 2),
    }


async def timed(n: int, op: Callable[[int], Awaitable[Any]]) -> list[int]:
    out: list[int] = []
    for i in range(n):
        t = time.perf_counter_ns()
        await op(i)
        out.append(time.perf_counter_ns() - t)
    return out


async def admission_cycle(store: CounterStore, n: int) -> tuple[list[int], list[int]]:
    adm = Admission(table(), store)
    scopes = Parties("acme", department="eng", app="bot", key="k1").scope_chain("m")
    reserve_ns: list[int] = []
    settle_ns: list[int] = []
    for i in range(n):
        now = T0 + i / 1000
        t = time.perf_counter_ns()
        g = await adm.reserve(scopes, Amounts(1, 200, 100, 3000), now)
        t1 = time.perf_counter_ns()
        assert isinstance(g, Grant)
        await adm.reconcile(g, Amounts(1, 200, 90, 2900), now)
        settle_ns.append(time.perf_counter_ns() - t1)
        reserve_ns.append(t1 - t)
    return reserve_ns, settle_ns


async def noop() -> None:
    return None


async def bench_memory(n: int) -> dict[str, Any]:
    await admission_cycle(MemoryStore(), 500)  # warm up
    reserve_ns, settle_ns = await admission_cycle(MemoryStore(), n)
    baseline = await timed(n, lambda _: noop())
    res = summary(reserve_ns)
    return {
        "requests": n,
        "reserve": res,
        "reconcile": summary(settle_ns),
        "baseline_empty_await": summary(baseline),
        "target_us": 100,
        "p50_meets_target": res["p50_us"] <= 100,
        "p99_meets_target": res["p99_us"] <= 100,
    }


async def evalsha_calls(client: aioredis.Redis) -> int:
    stats = await client.info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items() if k.startswith("cmdstat_evalsha"))


async def bench_redis(url: str, n: int) -> dict[str, Any]:
    prefix = f"tp:bench:{uuid.uuid4().hex[:8]}:"
    store = RedisStore.from_url(url, prefix=prefix, timeout_s=5)
    client = aioredis.Redis.from_url(url)
    try:
        await admission_cycle(store, 200)  # warm up, loads the script
        before = await evalsha_calls(client)
        calls_before = store.calls
        reserve_ns, settle_ns = await admission_cycle(store, n)
        evalshas = await evalsha_calls(client) - before
        ping = await timed(n, lambda _: store.client.ping())
        res, base = summary(reserve_ns), summary(ping)
        return {
            "requests": n,
            "reserve": res,
            "reconcile": summary(settle_ns),
            "baseline_ping": base,
            "added_over_ping_us": {
                "p50": round(res["p50_us"] - base["p50_us"], 2),
                "p99": round(res["p99_us"] - base["p99_us"], 2),
            },
            "round_trips_per_admission": (store.calls - calls_before) / (2 * n),
            "evalsha_per_operation_seen_by_redis": evalshas / (2 * n),
        }
    finally:
        keys = [k async for k in client.scan_iter(match=f"{prefix}*", count=1000)]
        if keys:
            await client.delete(*keys)
        await client.aclose()
        await store.close()


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--redis-n", type=int, default=3_000)
    args = ap.parse_args()
    out: dict[str, Any] = {"memory": await bench_memory(args.n)}
    try:
        out["redis"] = await bench_redis(args.redis, args.redis_n)
    except (OSError, aioredis.ConnectionError) as exc:
        out["redis"] = {"skipped": f"Redis unreachable: {exc}"}
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    asyncio.run(main())
