"""Concurrency against the real Redis: many tasks, two OS processes, one tenant limit."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import orjson
import redis.asyncio as aioredis

from tokenplane.admission import RedisStore

from .conftest import REDIS_URL
from .load import TPM, G, run_load

NOW = 1_700_000_000.0
ROOT = Path(__file__).resolve().parents[2]


def check_bound(results: list[dict[str, int]], spent: int) -> None:
    billed = sum(r["billed"] for r in results)
    concurrency = sum(r["max_inflight"] for r in results)
    denied = sum(r["denied"] for r in results)
    assert sum(r["granted"] + r["denied"] for r in results) == 200
    # Everything is reconciled inside one window: the store agrees with the clients.
    assert spent == billed
    # Documented bound: limit + C x G.
    assert billed <= TPM + concurrency * G
    # Refused only for want of room, and never while real usage was below 90 %.
    assert sum(r["bad_denials"] for r in results) == 0
    assert denied > 0 and billed >= 0.9 * TPM


async def _spent(store: RedisStore) -> int:
    from tokenplane.admission import Scope

    from .load import TENANT, table

    limits = table().bind([Scope("tenant", TENANT)], NOW)
    return (await store.status(TENANT, limits, NOW))[0].spent


async def test_many_tasks_share_one_limit(redis_store: RedisStore) -> None:
    result = await run_load(redis_store, 200, seed=7, now=NOW)
    check_bound([result], await _spent(redis_store))


async def test_two_processes_share_one_limit(redis_prefix: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.admission.load_worker", REDIS_URL, redis_prefix,
            str(NOW), str(seed), "100", cwd=ROOT, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        for seed in (1, 2)
    ]
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        for _ in procs:  # both workers connected: release them at once
            assert await client.blpop([redis_prefix + "ready"], timeout=60) is not None
        await client.rpush(redis_prefix + "go", "1", "1")
        outs = [await asyncio.wait_for(p.communicate(), 120) for p in procs]
    finally:
        await client.aclose()
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err.decode()
    results = [orjson.loads(out) for out, _ in outs]
    store = RedisStore.from_url(REDIS_URL, prefix=redis_prefix)
    try:
        check_bound(results, await _spent(store))
    finally:
        await store.close()
