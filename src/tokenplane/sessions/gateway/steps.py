"""Step numbers of sessions whose client does not name its steps.

A step the client names is taken as is (and the counter moves up to it); an unnamed
one gets the next number of its session. With Redis (``redis_url``) every replica
numbers from one counter per session (one round trip, a Lua script, the key expiring
``window_s`` after the session's last step); without it, each process keeps its own
(bounded) counters, so under ``serve --workers N`` without Redis two workers may
give one step number twice (docs/SESSIONS.md). When Redis cannot be reached the
step is numbered in-process (a step number guards nothing) and a warning is logged.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from typing import Protocol

import redis.asyncio as aioredis
from redis import exceptions as rexc

log = logging.getLogger("tokenplane.sessions")

_NEXT = """
local c = tonumber(redis.call('GET', KEYS[1]) or '0')
local n = tonumber(ARGV[1])
if n == 0 then n = c + 1 end
if n > c then redis.call('SET', KEYS[1], n) end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return n
"""


class StepCounter(Protocol):
    async def next_step(self, tenant: str, session_id: str, named: int | None,
                        ttl_s: float) -> int: ...

    async def close(self) -> None: ...


class MemorySteps:
    """Per-process counters, the least recently used dropped beyond ``max_sessions``."""

    def __init__(self, max_sessions: int = 100_000) -> None:
        self.max_sessions = max_sessions
        self._steps: OrderedDict[tuple[str, str], tuple[int, float]] = OrderedDict()

    async def next_step(self, tenant: str, session_id: str, named: int | None,
                        ttl_s: float) -> int:
        return self.next_now(tenant, session_id, named, ttl_s, time.monotonic())

    def next_now(self, tenant: str, session_id: str, named: int | None, ttl_s: float,
                 now: float) -> int:
        key = (tenant, session_id)
        last, expires = self._steps.pop(key, (0, 0.0))
        if expires <= now:
            last = 0
        step = named if named is not None else last + 1
        self._steps[key] = (max(last, step), now + ttl_s)
        while len(self._steps) > self.max_sessions:
            self._steps.popitem(last=False)
        return step

    async def close(self) -> None:
        self._steps.clear()


class RedisSteps:
    """One counter per session in Redis, shared by every replica."""

    def __init__(self, url: str, prefix: str, timeout_s: float = 0.5) -> None:
        self.prefix = prefix
        self.client = aioredis.Redis.from_url(url, socket_timeout=timeout_s,
                                              socket_connect_timeout=timeout_s)
        self.script = self.client.register_script(_NEXT)
        self.fallback = MemorySteps()

    def key(self, tenant: str, session_id: str) -> str:
        return f"{self.prefix}sess:{len(tenant)}:{tenant}:{session_id}"

    async def next_step(self, tenant: str, session_id: str, named: int | None,
                        ttl_s: float) -> int:
        try:
            got = await self.script(keys=[self.key(tenant, session_id)],
                                    args=[named or 0, int(ttl_s * 1000)])
            return int(got)
        except (rexc.RedisError, OSError) as exc:
            log.warning("session steps: Redis unavailable (%s); numbering in-process", exc)
            return await self.fallback.next_step(tenant, session_id, named, ttl_s)

    async def close(self) -> None:
        await self.client.aclose()


def make_steps(redis_url: str | None, prefix: str, timeout_s: float = 0.5) -> StepCounter:
    if redis_url:
        return RedisSteps(redis_url, prefix, timeout_s)
    return MemorySteps()
