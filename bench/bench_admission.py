"""Admission cost per request: in-process store vs Redis store (one round trip) vs the
host-local counter server of ``serve --workers N`` without Redis (one Unix-socket round
trip to another process); and the cost of the lease heartbeat.

Prints JSON. Baselines measured in the same run: an empty ``await`` for the
in-process store, a bare Redis ``PING`` for the Redis store. Round trips per
admission are counted by Redis itself (INFO commandstats). The Redis store is
measured with and without concurrency leases (the table holds two gauges, so with
``lease_s`` every reservation is leased); the heartbeat is timed with 1, 100 and
1,000 live leases of one tenant (one script call per tenant per beat).

    python bench/bench_admission.py [--redis redis://127.0.0.1:6379/0] [--n 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
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
from tokenplane.admission.stores.local import LocalStore
from tokenplane.admission.stores.local_server import CounterServer

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
    return (await evalsha_stats(client))[0]


async def evalsha_stats(client: aioredis.Redis) -> tuple[int, int]:
    """Calls of EVALSHA and the microseconds Redis spent in them, so far."""
    stats = await client.info("commandstats")
    rows = [v for k, v in stats.items() if k.startswith("cmdstat_evalsha")]
    return sum(int(v["calls"]) for v in rows), sum(int(v["usec"]) for v in rows)


async def bench_redis(url: str, n: int, lease_s: float = 0.0) -> dict[str, Any]:
    prefix = f"tp:bench:{uuid.uuid4().hex[:8]}:"
    store = RedisStore.from_url(url, prefix=prefix, timeout_s=5, lease_s=lease_s)
    client = aioredis.Redis.from_url(url)
    try:
        await admission_cycle(store, 200)  # warm up, loads the script
        before, usec_before = await evalsha_stats(client)
        calls_before = store.calls
        reserve_ns, settle_ns = await admission_cycle(store, n)
        after, usec_after = await evalsha_stats(client)
        evalshas = after - before
        ping = await timed(n, lambda _: store.client.ping())
        res, base = summary(reserve_ns), summary(ping)
        return {
            "requests": n,
            "lease_s": lease_s,
            "reserve": res,
            "reconcile": summary(settle_ns),
            "baseline_ping": base,
            "added_over_ping_us": {
                "p50": round(res["p50_us"] - base["p50_us"], 2),
                "p99": round(res["p99_us"] - base["p99_us"], 2),
            },
            "round_trips_per_admission": (store.calls - calls_before) / (2 * n),
            "evalsha_per_operation_seen_by_redis": evalshas / (2 * n),
            "script_us_per_operation_inside_redis": round(
                (usec_after - usec_before) / max(1, evalshas), 2),
        }
    finally:
        keys = [k async for k in client.scan_iter(match=f"{prefix}*", count=1000)]
        if keys:
            await client.delete(*keys)
        await client.aclose()
        await store.close()


async def bench_heartbeat(url: str, beats: int = 200) -> dict[str, Any]:
    """One heartbeat (renew every live lease of one tenant) with 1, 100, 1000 leases."""
    out: dict[str, Any] = {}
    client = aioredis.Redis.from_url(url)
    for live in (1, 100, 1000):
        prefix = f"tp:bench:{uuid.uuid4().hex[:8]}:"
        store = RedisStore.from_url(url, prefix=prefix, timeout_s=5, lease_s=5.0)
        try:
            adm = Admission(table(), store, ttl_s=900)
            scopes = Parties("acme", department="eng", app="bot",
                             key="k1").scope_chain("m")
            for _ in range(live):
                assert isinstance(await adm.reserve(scopes, Amounts(1, 200, 100, 3000), T0),
                                  Grant)
            calls = store.calls
            beat = store.heartbeat
            ns = await timed(beats, lambda i, beat=beat: beat(T0 + 1 + i / 1000))
            out[f"{live}_leases"] = {**summary(ns),
                                     "store_calls_per_beat": (store.calls - calls) / beats}
        finally:
            keys = [k async for k in client.scan_iter(match=f"{prefix}*", count=1000)]
            if keys:
                await client.delete(*keys)
            await store.close()
    await client.aclose()
    out["redis_calls_per_second_per_worker"] = (
        "one script call per tenant with leases per heartbeat_s (default 1 s): "
        "1 call/s for a worker serving one limited tenant")
    return out


def _serve_counters(path: str) -> None:
    server = CounterServer(Path(path))
    server.start()
    server.join()


async def bench_local(n: int) -> dict[str, Any]:
    """The counter server in another process (as the serve parent), one worker client."""
    place = Path(tempfile.mkdtemp(prefix="tp-bench-"))
    path = place / "counters.sock"
    proc = multiprocessing.get_context("spawn").Process(target=_serve_counters,
                                                        args=(str(path),), daemon=True)
    proc.start()
    try:
        while not path.exists():
            await asyncio.sleep(0.05)
        store = LocalStore(str(path), timeout_s=5, lease_s=5.0)
        await admission_cycle(store, 500)  # warm up
        reserve_ns, settle_ns = await admission_cycle(store, n)
        memory_reserve, memory_settle = await admission_cycle(MemoryStore(), n)
        await store.close()
        local = summary([a + b for a, b in zip(reserve_ns, settle_ns, strict=True)])
        memory = summary([a + b for a, b in zip(memory_reserve, memory_settle, strict=True)])
        return {
            "requests": n,
            "reserve": summary(reserve_ns),
            "reconcile": summary(settle_ns),
            "per_request_reserve_plus_reconcile": local,
            "memory_store_same_run": memory,
            "added_per_request_us": {"p50": round(local["p50_us"] - memory["p50_us"], 2),
                                     "p99": round(local["p99_us"] - memory["p99_us"], 2)},
        }
    finally:
        proc.kill()
        proc.join()
        path.unlink(missing_ok=True)
        place.rmdir()


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--redis-n", type=int, default=3_000)
    args = ap.parse_args()
    out: dict[str, Any] = {"memory": await bench_memory(args.n)}
    out["local_counter_server"] = await bench_local(min(args.n, 10_000))
    try:
        out["redis"] = await bench_redis(args.redis, args.redis_n)
        out["redis_leased"] = await bench_redis(args.redis, args.redis_n, lease_s=5.0)
        out["heartbeat"] = await bench_heartbeat(args.redis)
    except (OSError, aioredis.ConnectionError) as exc:
        out["redis"] = {"skipped": f"Redis unreachable: {exc}"}
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    asyncio.run(main())
