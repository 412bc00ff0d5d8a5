"""The real PostgreSQL and Redis the tests use: where they are, whether they answer,
and a fresh PostgreSQL schema or Redis key prefix per test.

Without a service its tests skip with a reason; with ``CI=true`` they fail instead
(CI starts both before the tests run, so a missing one is a broken run, not a skip).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

import asyncpg
import pytest
import redis

T = TypeVar("T")
PG_DSN = os.environ.get("TOKENPLANE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("TOKENPLANE_TEST_REDIS", "redis://127.0.0.1:6379/0")


def run_aside(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion on a private loop in another thread (a sync test or
    fixture must not touch the event loop pytest-asyncio gives the test)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


async def _pg(sql: str | None = None) -> bool:
    try:
        con = await asyncpg.connect(PG_DSN, timeout=3)
    except (TimeoutError, OSError, asyncpg.PostgresError):
        return False
    try:
        if sql:
            await con.execute(sql)
    finally:
        await con.close()
    return True


def pg_reachable() -> bool:
    return run_aside(_pg())


def redis_reachable() -> bool:
    try:
        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
        client.ping()
        client.close()
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
        return False
    return True


def require(service: str, reachable: bool, where: str) -> None:
    """Skip when ``service`` is not reachable, but fail when CI=true (there it must be)."""
    if reachable:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{service} is required in CI but not reachable at {where}")
    pytest.skip(f"{service} not reachable at {where}")


def require_pg() -> None:
    require("PostgreSQL", pg_reachable(), PG_DSN)


def require_redis() -> None:
    require("Redis", redis_reachable(), REDIS_URL)


@contextmanager
def fresh_pg_schema(tag: str) -> Iterator[str]:
    """A DSN whose ``schema=`` names a schema of its own, dropped afterwards."""
    require_pg()
    schema = f"tp_{tag}_{uuid.uuid4().hex[:12]}"
    try:
        yield f"{PG_DSN}?schema={schema}"
    finally:
        run_aside(_pg(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))


def drop_redis_prefix(prefix: str) -> None:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@contextmanager
def fresh_redis_prefix(tag: str) -> Iterator[str]:
    """A key prefix of its own; every key under it is deleted afterwards."""
    require_redis()
    prefix = f"tp:test:{tag}:{uuid.uuid4().hex[:12]}:"
    try:
        yield prefix
    finally:
        drop_redis_prefix(prefix)
