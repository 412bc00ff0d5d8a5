"""MCP session ids and what the gateway remembers of each (the key that opened it,
the server it is scoped to, the protocol version, the accounting model): in this
process, or in Redis so that any replica continues a session."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Protocol

import orjson
from redis.asyncio import Redis


@dataclass(frozen=True)
class McpSession:
    key_id: str
    server: str | None  # None: the aggregated /mcp
    protocol: str
    model: str | None


def new_session_id() -> str:
    return secrets.token_hex(16)


class SessionStore(Protocol):
    async def put(self, sid: str, session: McpSession) -> None: ...

    async def get(self, sid: str) -> McpSession | None: ...

    async def delete(self, sid: str) -> bool: ...

    async def close(self) -> None: ...


class MemorySessions:
    """Sessions of this process, forgotten ``ttl_s`` after their last use."""

    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic,
                 max_sessions: int = 100_000) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self.max_sessions = max_sessions
        self._items: dict[str, tuple[McpSession, float]] = {}

    async def put(self, sid: str, session: McpSession) -> None:
        now = self.clock()
        if len(self._items) >= self.max_sessions:
            self._expire(now)
            if len(self._items) >= self.max_sessions:  # still full: drop the oldest
                del self._items[next(iter(self._items))]
        self._items[sid] = (session, now)

    async def get(self, sid: str) -> McpSession | None:
        item = self._items.get(sid)
        if item is None:
            return None
        now = self.clock()
        if now - item[1] > self.ttl_s:
            del self._items[sid]
            return None
        self._items[sid] = (item[0], now)
        return item[0]

    async def delete(self, sid: str) -> bool:
        return self._items.pop(sid, None) is not None

    def _expire(self, now: float) -> None:
        for sid in [s for s, (_, t) in self._items.items() if now - t > self.ttl_s]:
            del self._items[sid]

    async def close(self) -> None:
        self._items.clear()


class RedisSessions:
    """Sessions in Redis under ``<prefix>mcp:session:<id>``, expiring ``ttl_s`` after
    their last use (each read renews them)."""

    def __init__(self, redis: Redis, prefix: str, ttl_s: float) -> None:
        self.redis = redis
        self.prefix = f"{prefix}mcp:session:"
        self.ttl_ms = max(1, int(ttl_s * 1000))

    async def put(self, sid: str, session: McpSession) -> None:
        await self.redis.set(self.prefix + sid, orjson.dumps(asdict(session)), px=self.ttl_ms)

    async def get(self, sid: str) -> McpSession | None:
        raw = await self.redis.getex(self.prefix + sid, px=self.ttl_ms)
        if raw is None:
            return None
        data = orjson.loads(raw)
        return McpSession(data["key_id"], data.get("server"), data["protocol"],
                          data.get("model"))

    async def delete(self, sid: str) -> bool:
        return bool(await self.redis.delete(self.prefix + sid))

    async def close(self) -> None:
        await self.redis.aclose()
