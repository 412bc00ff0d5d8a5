"""Step numbers: named steps move the counter, unnamed ones take the next; in
Redis one counter per session serves every replica."""

from __future__ import annotations

import asyncio

from tests.services import REDIS_URL, fresh_redis_prefix
from tokenplane.sessions.gateway.steps import MemorySteps, RedisSteps


def test_memory_steps_number_and_expire() -> None:
    steps = MemorySteps(max_sessions=2)
    assert steps.next_now("t", "s", None, 60, 0.0) == 1
    assert steps.next_now("t", "s", None, 60, 1.0) == 2
    assert steps.next_now("t", "s", 10, 60, 2.0) == 10
    assert steps.next_now("t", "s", None, 60, 3.0) == 11
    assert steps.next_now("t", "s", 4, 60, 4.0) == 4  # a named step is taken as is
    assert steps.next_now("t", "s", None, 60, 5.0) == 12  # the counter never goes back
    assert steps.next_now("u", "s", None, 60, 5.0) == 1  # per tenant
    assert steps.next_now("t", "s", None, 60, 100.0) == 1  # expired after the window
    steps.next_now("t", "a", None, 60, 101.0)
    steps.next_now("t", "b", None, 60, 102.0)
    assert steps.next_now("u", "s", None, 60, 103.0) == 1  # evicted (bound of 2)


def test_redis_steps_are_shared_by_replicas() -> None:
    with fresh_redis_prefix("steps") as prefix:
        async def go() -> list[int]:
            a, b = RedisSteps(REDIS_URL, prefix), RedisSteps(REDIS_URL, prefix)
            try:
                got = [await a.next_step("t", "s", None, 60), await b.next_step("t", "s", None, 60),
                       await a.next_step("t", "s", 7, 60), await b.next_step("t", "s", None, 60)]
                many = await asyncio.gather(*(x.next_step("t", "p", None, 60)
                                              for x in (a, b) * 10))
                got.append(len(set(many)))
                ttl = await a.client.pttl(a.key("t", "s"))
                got.append(int(0 < ttl <= 60_000))
                return got
            finally:
                await a.close()
                await b.close()

        assert asyncio.run(go()) == [1, 2, 7, 8, 20, 1]


def test_redis_down_numbers_in_process() -> None:
    async def go() -> list[int]:
        steps = RedisSteps("redis://127.0.0.1:1/0", "tp:test:down:", timeout_s=0.2)
        try:
            return [await steps.next_step("t", "s", None, 60) for _ in range(2)]
        finally:
            await steps.close()

    assert asyncio.run(go()) == [1, 2]
