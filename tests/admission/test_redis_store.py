"""RedisStore specifics: script caching and key layout."""

from __future__ import annotations

import pytest
import redis
from redis.crc import key_slot

from tokenplane.admission import (
    Admission,
    Amounts,
    Grant,
    LimitTable,
    RedisStore,
    Scope,
    ScopeLimits,
)

from .conftest import REDIS_URL

NOW = 1_700_000_000.0


async def test_unknown_script_is_loaded_once_then_cached(redis_store: RedisStore) -> None:
    adm = Admission(LimitTable({Scope("tenant", "acme"): ScopeLimits(rpm=5)}), redis_store)
    redis_store.sha = "0" * 40  # as if the server had never seen the script
    for i in range(3):
        assert isinstance(await adm.reserve([Scope("tenant", "acme")], Amounts(1), NOW + i),
                          Grant)
    assert redis_store.script_loads == 1 and redis_store.calls == 3


async def test_every_key_of_a_tenant_shares_its_hash_tag(redis_store: RedisStore,
                                                        redis_prefix: str) -> None:
    limits = ScopeLimits(rpm=5, tokens_per_day=100, max_concurrent=3)
    table = LimitTable({Scope("tenant", "acme"): limits, Scope("app", "bot"): limits})
    adm = Admission(table, redis_store)
    g = await adm.reserve([Scope("tenant", "acme"), Scope("app", "bot")], Amounts(1, 5), NOW)
    assert isinstance(g, Grant)
    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = list(client.scan_iter(match=f"{redis_prefix}*"))
    finally:
        client.close()
    assert len(keys) >= 8
    # One Redis Cluster slot for the whole tenant: the slot of its tag alone.
    assert {key_slot(k) for k in keys} == {key_slot(b"{t:acme}")}
    with pytest.raises(ValueError, match="braces"):
        redis_store.base("a}b")
