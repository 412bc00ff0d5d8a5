"""One SLO alert leader at a time: a file lock for one host's workers, a Redis lock
that lapses when its holder stops renewing, a PostgreSQL advisory lock held by a
connection."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from tests.services import PG_DSN, REDIS_URL, require_pg, require_redis
from tokenplane.slo.gateway.leader import FileLeader, PgLeader, RedisLeader


async def test_file_lock_one_leader(tmp_path: Path) -> None:
    a, b = FileLeader(tmp_path / "lead"), FileLeader(tmp_path / "lead")
    assert await a.acquire() and await a.acquire()  # keeps it
    assert not await b.acquire()
    await a.release()
    assert await b.acquire()
    await b.release()


async def test_redis_lock_lapses_when_not_renewed() -> None:
    require_redis()
    key = f"tp:test:{uuid.uuid4().hex}:slo:leader"
    a, b = RedisLeader(REDIS_URL, key, 1.0), RedisLeader(REDIS_URL, key, 1.0)
    try:
        assert await a.acquire()
        assert not await b.acquire()
        assert await a.acquire()  # renews
        await asyncio.sleep(1.2)  # a stops renewing: its lock lapses after the ttl
        assert await b.acquire()
        assert not await a.acquire()
    finally:
        await a.release()
        await b.release()


async def test_postgres_advisory_lock() -> None:
    require_pg()
    schema = f"leader_{uuid.uuid4().hex[:8]}"
    a, b = PgLeader(PG_DSN, schema), PgLeader(PG_DSN, schema)
    other = PgLeader(PG_DSN, schema + "x")  # another gateway's schema: its own lock
    try:
        assert await a.acquire()
        assert not await b.acquire()
        assert await other.acquire()
        await a.release()  # the holder's connection closes: the lock goes with it
        assert await b.acquire()
    finally:
        for leader in (a, b, other):
            await leader.release()
