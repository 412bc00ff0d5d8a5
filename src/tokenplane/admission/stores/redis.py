"""The shared counter store on Redis: one EVALSHA per operation, atomic per tenant.

Every key of a tenant carries the hash tag ``{t:<tenant>}`` so a tenant's keys live
in one slot (Redis Cluster runs the script on that slot's node). The script
(``counters.lua``) uses the caller's ``now`` -- the same injected clock as the
in-process store -- never Redis ``TIME``; it keeps a per-tenant high-water mark so
clock skew between replicas can never make time run backwards for a tenant.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import Any

import orjson
import redis.asyncio as aioredis
from redis import exceptions as rexc

from tokenplane.admission.stores.base import StoreUnavailable
from tokenplane.admission.stores.scripted import ScriptedStore

_UNREACHABLE = (rexc.ConnectionError, rexc.TimeoutError, rexc.BusyLoadingError, OSError)


def load_script() -> str:
    script = resources.files("tokenplane.admission.stores").joinpath("counters.lua")
    return script.read_text("utf-8")


class RedisStore(ScriptedStore):
    """Counters shared by every gateway replica and worker."""

    def __init__(self, client: aioredis.Redis, *, prefix: str = "tp:adm:",
                 lease_s: float = 0.0) -> None:
        super().__init__(lease_s=lease_s)
        self.client = client
        self.prefix = prefix
        self.script = load_script()
        self.sha = hashlib.sha1(self.script.encode("utf-8")).hexdigest()
        self.calls = 0
        self.script_loads = 0

    @classmethod
    def from_url(cls, url: str, *, prefix: str = "tp:adm:", timeout_s: float = 0.5,
                 max_connections: int = 32, lease_s: float = 0.0) -> RedisStore:
        """A store on its own pool; callers beyond ``max_connections`` queue for one."""
        pool = aioredis.BlockingConnectionPool.from_url(
            url, max_connections=max_connections, timeout=timeout_s,
            socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
        )
        return cls(aioredis.Redis.from_pool(pool), prefix=prefix, lease_s=lease_s)

    def base(self, tenant: str) -> str:
        if "{" in tenant or "}" in tenant:
            raise ValueError(f"tenant id must not contain braces: {tenant!r}")
        return f"{self.prefix}{{t:{tenant}}}:"

    async def _call(self, op: str, tenant: str, payload: dict[str, Any]) -> list[int]:
        base = self.base(tenant)
        payload["b"] = base
        keys = (base + "res", base + "exp", base + "clk")
        args = (op, orjson.dumps(payload))
        self.calls += 1
        try:
            try:
                raw = await self.client.evalsha(self.sha, 3, *keys, *args)
            except rexc.NoScriptError:
                # A fresh or flushed server: load once, then EVALSHA again.
                self.script_loads += 1
                self.sha = str(await self.client.script_load(self.script))
                raw = await self.client.evalsha(self.sha, 3, *keys, *args)
        except _UNREACHABLE as exc:
            raise StoreUnavailable(f"admission store (Redis) unreachable: {exc}") from exc
        return [int(x) for x in raw]

    async def close(self) -> None:
        await self.client.aclose()
