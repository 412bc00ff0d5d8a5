"""Fixtures for the admission tests: the real Redis with a private key prefix
(``REDIS_URL`` and ``require_redis`` are tests.services', re-exported here)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from tests.services import REDIS_URL, fresh_redis_prefix, require_redis
from tokenplane.admission import MemoryStore, RedisStore
from tokenplane.admission.stores.base import CounterStore

__all__ = ["REDIS_URL", "require_redis"]

@pytest.fixture
def redis_prefix() -> Iterator[str]:
    """A key prefix unique to the test; every key under it is deleted afterwards."""
    with fresh_redis_prefix("adm") as prefix:
        yield prefix


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
