"""What the Redis store and the host-local store share: both send each operation as
one call (``op``, tenant, JSON-able payload) to a server that runs the counter book's
semantics atomically (the Lua script, or :class:`CounterBook` in the serve parent)
and answers in the raw integer form that :mod:`decode` reads.

Concurrency units (gauges) are leases of ``lease_s``: the grants of this worker that
hold one are noted in :class:`Leases` and renewed by :meth:`ScriptedStore.heartbeat`
(one call per tenant, run concurrently), so a worker that dies stops renewing and its
units come back within ``lease_s``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from tokenplane.admission import decode
from tokenplane.admission.amounts import Amounts
from tokenplane.admission.binding import BoundLimit
from tokenplane.admission.leases import Leases, holds_gauge
from tokenplane.admission.outcomes import DebitResult, Denial, Grant, LimitStatus, Settlement


class ScriptedStore:
    """A counter store whose every operation is one call of :meth:`_call`."""

    def __init__(self, *, lease_s: float = 0.0) -> None:
        self.lease_ms = int(lease_s * 1000)
        self.leases = Leases()

    async def _call(self, op: str, tenant: str, payload: dict[str, Any]) -> list[int]:
        raise NotImplementedError

    @staticmethod
    def _payload(rid: str, limits: Sequence[BoundLimit], vec: list[int], now: float,
                 ttl_ms: int) -> dict[str, Any]:
        return {"rid": rid, "now": int(now * 1000), "ttl": ttl_ms, "v": vec,
                "l": [b.wire() for b in limits]}

    async def reserve(self, tenant: str, rid: str, limits: Sequence[BoundLimit],
                      amounts: Amounts, now: float, ttl_s: float) -> Grant | Denial:
        payload = self._payload(rid, limits, amounts.vector(), now, int(ttl_s * 1000))
        leased = self.lease_ms > 0 and holds_gauge(limits)
        if leased:
            payload["ls"] = self.lease_ms
        raw = await self._call("reserve", tenant, payload)
        if raw[0] == -2:
            raise ValueError(f"reservation id {rid!r} is already in use")
        if leased and raw[0] == 1:
            self.leases.add(tenant, rid)
        return decode.grant_or_denial(raw, rid, tenant, amounts, limits, now, ttl_s)

    async def debit(self, tenant: str, rid: str, limits: Sequence[BoundLimit],
                    amounts: Amounts, now: float) -> DebitResult:
        raw = await self._call("debit", tenant,
                               self._payload(rid, limits, amounts.vector(), now, 0))
        return decode.debit_result(raw, limits)

    async def reconcile(self, tenant: str, rid: str, limits: Sequence[BoundLimit],
                        actual: Amounts, now: float) -> Settlement:
        self.leases.discard(tenant, rid)  # settled or not, this worker is done with it
        raw = await self._call("reconcile", tenant,
                               self._payload(rid, limits, actual.vector(), now, 0))
        return decode.settlement(raw, limits)

    async def status(self, tenant: str, limits: Sequence[BoundLimit],
                     now: float) -> list[LimitStatus]:
        raw = await self._call("status", tenant,
                               self._payload("", limits, [0, 0, 0, 0], now, 0))
        return decode.statuses(raw, limits, now)

    async def renew(self, tenant: str, rids: Sequence[str], now: float) -> list[int]:
        """``[renewed, reacquired]`` for the leases of ``rids``."""
        payload: dict[str, Any] = {"now": int(now * 1000), "ls": self.lease_ms,
                                   "rids": list(rids)}
        return await self._call("renew", tenant, payload)

    async def heartbeat(self, now: float) -> None:
        """Renew every lease this worker holds (one call per tenant, concurrently)."""
        if self.lease_ms <= 0:
            return
        batches = self.leases.by_tenant()
        if batches:
            await asyncio.gather(*(self.renew(t, rids, now) for t, rids in batches))

