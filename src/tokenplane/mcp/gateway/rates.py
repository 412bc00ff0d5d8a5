"""Where the per-tool rate limits count: in the worker (``mcp/limits.RateLog``), or in
Redis when the MCP sessions live there, so that every replica counts against one
window. A Redis that fails falls back to the worker's count (logged)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

from redis import exceptions as rexc
from redis.asyncio import Redis

from tokenplane.mcp.limits import RateLog, RateRule

log = logging.getLogger("tokenplane.mcp")

# KEYS[1]: the subject's sorted set of call times (ms); ARGV: calls, window (ms), a
# unique member. Returns -1 when the call is counted, else the ms until one is allowed.
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return math.max(0, tonumber(oldest[2]) + window - now)
end
redis.call('ZADD', KEYS[1], now, ARGV[3])
redis.call('PEXPIRE', KEYS[1], window)
return -1
"""


class RateStore(Protocol):
    async def take(self, subject: tuple[str, str], rule: RateRule) -> float | None: ...


class LocalRates:
    def __init__(self, longest_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.log = RateLog()
        self.longest_s = longest_s
        self.clock = clock
        self._calls = 0

    async def take(self, subject: tuple[str, str], rule: RateRule) -> float | None:
        now = self.clock()
        self._calls += 1
        if self._calls % 1024 == 0:
            self.log.forget_idle(now, self.longest_s)
        return self.log.take(subject, rule, now)


class RedisRates:
    def __init__(self, redis: Redis, prefix: str, fallback: LocalRates) -> None:
        self.redis = redis
        self.prefix = f"{prefix}mcp:rate:"
        self.script = redis.register_script(_TAKE)
        self.fallback = fallback
        self._n = 0

    async def take(self, subject: tuple[str, str], rule: RateRule) -> float | None:
        tool, who = subject
        self._n += 1
        member = f"{time.time_ns()}:{id(self)}:{self._n}"
        key = f"{self.prefix}{len(tool)}:{tool}:{who}"
        try:
            got = int(await self.script(keys=[key], args=[rule.calls,
                                                          int(rule.per_s * 1000), member]))
        except (rexc.RedisError, OSError) as exc:
            log.warning("mcp rate limits: Redis unavailable (%s); counting in this worker",
                        exc)
            return await self.fallback.take(subject, rule)
        return None if got < 0 else got / 1000
