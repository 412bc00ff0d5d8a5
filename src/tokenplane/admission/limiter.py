"""Admission: reserve at every scope at once, debit streams, settle with real usage."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from tokenplane.admission.amounts import Amounts
from tokenplane.admission.binding import BoundLimit, LimitTable, rebind
from tokenplane.admission.outcomes import DebitResult, Denial, Grant, LimitStatus, Settlement
from tokenplane.admission.scopes import Scope, tenant_of
from tokenplane.admission.stores.base import CounterStore


def never_fits(limits: Sequence[BoundLimit], amounts: Amounts) -> Denial | None:
    """The first limit that ``amounts`` exceed by themselves (so no wait can help)."""
    for b in limits:
        n = amounts.of(b.rule.unit)
        if n > b.rule.limit:
            return Denial(scope=b.scope, limit_name=b.rule.name, limit=b.rule.limit,
                          remaining=b.rule.limit, retry_after_s=None, code=b.rule.code,
                          unit=b.rule.unit, requested=n, never=True, rule=b.rule)
    return None


class Admission:
    """The admission API the gateway calls; ``now`` always comes from the caller.

    * :meth:`reserve` before the upstream call (all-or-nothing across scopes);
    * :meth:`debit` during a stream, each time the tokens covered so far run out;
    * :meth:`reconcile` when the request ends (real usage replaces the
      reservation), or :meth:`release` when it never reached the upstream.
    A reservation never settled expires after ``ttl_s`` (counted from its last
    debit) and is then settled as if fully used.
    """

    def __init__(self, table: LimitTable, store: CounterStore, *, ttl_s: float = 600.0) -> None:
        if ttl_s <= 0:
            raise ValueError("ttl_s must be positive")
        self.table = table
        self.store = store
        self.ttl_s = ttl_s

    async def reserve(self, scopes: Sequence[Scope], amounts: Amounts, now: float,
                      *, reservation_id: str | None = None,
                      extra: Sequence[BoundLimit] = ()) -> Grant | Denial:
        """``extra``: limits that are not in the table (an agent session's budget),
        reserved with the chain's in the same atomic step."""
        tenant = tenant_of(scopes)
        rid = reservation_id or uuid.uuid4().hex
        limits = [*self.table.bind(scopes, now), *extra]
        if not limits:
            return Grant(rid, tenant, amounts, (), now + self.ttl_s)
        never = never_fits(limits, amounts)
        if never is not None:
            return never  # no store call: waiting cannot help
        return await self.store.reserve(tenant, rid, limits, amounts, now, self.ttl_s)

    async def debit(self, grant: Grant, tokens: int, now: float, *,
                    cost_micros: int = 0) -> DebitResult:
        """Ask for ``tokens`` more output tokens (and their cost) for a stream.

        On ``ok`` they are charged and may be forwarded; on ``exhausted`` nothing
        is charged and the stream should end (``finish_reason: "length"``).
        """
        if not grant.limits:
            return DebitResult(ok=True)
        amounts = Amounts(output_tokens=tokens, cost_micros=cost_micros)
        limits = rebind(grant.limits, now)
        return await self.store.debit(grant.tenant, grant.reservation_id, limits, amounts, now)

    async def reconcile(self, grant: Grant, actual: Amounts, now: float) -> Settlement:
        """Replace the reservation (and its debits) by the real usage."""
        if not grant.limits:
            return Settlement(found=True)
        limits = rebind(grant.limits, now)
        return await self.store.reconcile(grant.tenant, grant.reservation_id, limits, actual,
                                          now)

    async def release(self, grant: Grant, now: float) -> Settlement:
        """Refund everything: the request was cancelled before using anything."""
        return await self.reconcile(grant, Amounts(), now)

    async def status(self, tenant: str, scope: Scope, now: float) -> list[LimitStatus]:
        limits = self.table.bind([scope], now)
        if not limits:
            return []
        return await self.store.status(tenant, limits, now)

    async def allowed_tokens(self, scopes: Sequence[Scope], now: float, *,
                             prompt_tokens: int = 0,
                             extra: Sequence[BoundLimit] = ()) -> int | None:
        """Most output tokens every scope still allows (``None``: unlimited).

        Total-token limits count the prompt too. Use it to clamp ``max_tokens``.
        """
        limits = [b for b in [*self.table.bind(scopes, now), *extra]
                  if b.rule.unit in ("output_tokens", "total_tokens")]
        if not limits:
            return None
        report = await self.store.status(tenant_of(scopes), limits, now)
        allowed: int | None = None
        for st in report:
            room = st.remaining - (prompt_tokens if st.unit == "total_tokens" else 0)
            allowed = room if allowed is None else min(allowed, room)
        return max(0, allowed) if allowed is not None else None
