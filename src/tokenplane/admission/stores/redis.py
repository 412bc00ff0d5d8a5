"""The shared counter store on Redis: one EVALSHA per operation, atomic per tenant.

Every key of a tenant carries the hash tag ``{t:<tenant>}`` so a tenant's keys live
in one slot (Redis Cluster runs the script on that slot's node). The script
(``counters.lua``) uses the caller's ``now`` -- the same injected clock as the
in-process store -- never Redis ``TIME``; it keeps a per-tenant high-water mark so
clock skew between replicas can never make time run backwards for a tenant.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from importlib import resources

import orjson
import redis.asyncio as aioredis
from redis import exceptions as rexc

from tokenplane.admission import decode
from tokenplane.admission.amounts import Amounts
from tokenplane.admission.binding import BoundLimit
from tokenplane.admission.outcomes import DebitResult, Denial, Grant, LimitStatus, Settlement
from tokenplane.admission.stores.base import StoreUnavailable

_UNREACHABLE = (rexc.ConnectionError, rexc.TimeoutError, rexc.BusyLoadingError, OSError)


def load_script() -> str:
    script = resources.files("tokenplane.admission.stores").joinpath("counters.lua")
    return script.read_text("utf-8")


class RedisStore:
    """Counters shared by every gateway replica and worker."""

    def __init__(self, client: aioredis.Redis, *, prefix: str = "tp:adm:") -> None:
        self.client = client
        self.prefix = prefix
        self.script = load_script()
        self.sha = hashlib.sha1(self.script.encode("utf-8")).hexdigest()
        self.calls = 0
        self.script_loads = 0

    @classmethod
    def from_url(cls, url: str, *, prefix: str = "tp:adm:", timeout_s: float = 0.5,
                 max_connections: int = 32) -> RedisStore:
        """A store on its own pool; callers beyond ``max_connections`` queue for one."""
        pool = aioredis.BlockingConnectionPool.from_url(
            url, max_connections=max_connections, timeout=timeout_s,
            socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
        )
        return cls(aioredis.Redis.from_pool(pool), prefix=prefix)

    def base(self, tenant: str) -> str:
        if "{" in tenant or "}" in tenant:
            raise ValueError(f"tenant id must not contain braces: {tenant!r}")
        return f"{self.prefix}{{t:{tenant}}}:"

    async def _call(self, op: str, tenant: str, payload: dict[str, object]) -> list[int]:
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

    @staticmethod
    def _payload(rid: str, limits: Sequence[BoundLimit], vec: list[int], now: float,
                 ttl_ms: int) -> dict[str, object]:
        return {"rid": rid, "now": int(now * 1000), "ttl": ttl_ms, "v": vec,
                "l": [b.wire() for b in limits]}

    async def reserve(self, tenant: str, rid: str, limits: Sequence[BoundLimit],
                      amounts: Amounts, now: float, ttl_s: float) -> Grant | Denial:
        payload = self._payload(rid, limits, amounts.vector(), now, int(ttl_s * 1000))
        raw = await self._call("reserve", tenant, payload)
        if raw[0] == -2:
            raise ValueError(f"reservation id {rid!r} is already in use")
        return decode.grant_or_denial(raw, rid, tenant, amounts, limits, now, ttl_s)

    async def debit(self, tenant: str, rid: str, limits: Sequence[BoundLimit],
                    amounts: Amounts, now: float) -> DebitResult:
        raw = await self._call("debit", tenant,
                               self._payload(rid, limits, amounts.vector(), now, 0))
        return decode.debit_result(raw, limits)

    async def reconcile(self, tenant: str, rid: str, limits: Sequence[BoundLimit],
                        actual: Amounts, now: float) -> Settlement:
        raw = await self._call("reconcile", tenant,
                               self._payload(rid, limits, actual.vector(), now, 0))
        return decode.settlement(raw, limits)

    async def status(self, tenant: str, limits: Sequence[BoundLimit],
                     now: float) -> list[LimitStatus]:
        raw = await self._call("status", tenant,
                               self._payload("", limits, [0, 0, 0, 0], now, 0))
        return decode.statuses(raw, limits, now)

    async def close(self) -> None:
        await self.client.aclose()
