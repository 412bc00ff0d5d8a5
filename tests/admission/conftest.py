"""Fixtures for the admission tests: the real Redis with a private key prefix."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import redis

from tokenplane.admission import MemoryStore, RedisStore
from tokenplane.admission.stores.base import CounterStore

REDIS_URL = os.environ.get("TOKENPLANE_TEST_REDIS", "redis://127.0.0.1:6379/0")


def require_redis() -> None:
    """Skip without Redis, but fail when CI=true (the service must be there)."""
    try:
        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
        client.ping()
        client.close()
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"Redis is required in CI but not reachable at {REDIS_URL}: {exc}")
        pytest.skip(f"Redis not reachable at {REDIS_URL}")


def drop_prefix(prefix: str) -> None:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    """A key prefix unique to the test; every key under it is deleted afterwards."""
    require_redis()
    prefix = f"tp:test:{uuid.uuid4().hex[:12]}:"
    yield prefix
    drop_prefix(prefix)


@pytest.fixture
async def redis_store(redis_prefix: str) -> AsyncIterator[RedisStore]:
    store = RedisStore.from_url(REDIS_URL, prefix=redis_prefix)
    yield store
    await store.close()


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[CounterStore]:
    """Each store in turn: the same tests hold for both."""
    if request.param == "memory":
        yield MemoryStore()
        return
    prefix = request.getfixturevalue("redis_prefix")
    rstore = RedisStore.from_url(REDIS_URL, prefix=prefix)
    yield rstore
    await rstore.close()
