"""A second gateway process for the Redis concurrency test (prints JSON)."""

from __future__ import annotations

import asyncio
import sys

import orjson
import redis.asyncio as aioredis

from tokenplane.admission import RedisStore

from .load import run_load


async def main(url: str, prefix: str, now: float, seed: int, n: int) -> None:
    store = RedisStore.from_url(url, prefix=prefix, timeout_s=10)
    sync = aioredis.Redis.from_url(url)
    await sync.rpush(prefix + "ready", str(seed))
    await sync.blpop([prefix + "go"], timeout=60)  # start together with the other worker
    result = await run_load(store, n, seed, now)
    await sync.aclose()
    await store.close()
    sys.stdout.write(orjson.dumps(result).decode() + "\n")


if __name__ == "__main__":
    url, prefix, now, seed, n = sys.argv[1:6]
    asyncio.run(main(url, prefix, float(now), int(seed), int(n)))
