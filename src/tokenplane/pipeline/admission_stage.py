"""The admission stage and finisher: reserve before the upstream call, debit a stream
while it runs, settle with the real usage when the request ends.

* :class:`AdmissionStage` reserves the exact prompt plus the predicted output (and
  its cost) at every scope of the caller's chain at once; 429 on a denial (``code``
  tells a rate limit from a budget), 503 when the shared store is down and the policy
  is fail-closed. The ``x-ratelimit-*`` headers of the grant go on the response.
* :class:`StreamDebit` (installed as ``ctx.stream_guard``) debits ``G`` output tokens
  *before* forwarding tokens beyond those covered; when a limit runs out the relay
  ends the stream with ``finish_reason: "length"``.
* :class:`AdmissionFinisher` replaces the reservation by the real usage (a cache hit:
  by what it is billed, ``cache/billing.py``), or releases it when the request never
  reached the upstream. (The meter finisher teaches the shared length predictor.)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tokenplane.admission.amounts import TOKEN_UNITS, Amounts
from tokenplane.admission.binding import BoundLimit
from tokenplane.admission.errors import denial_error, unavailable_error
from tokenplane.admission.gateway.service import AdmissionService
from tokenplane.admission.headers import ratelimit_headers, refusal_headers
from tokenplane.admission.outcomes import Denial, Grant
from tokenplane.admission.planning import ReservationPlan, clamp_share, plan_reservation
from tokenplane.admission.scopes import Scope
from tokenplane.admission.stores.base import StoreUnavailable
from tokenplane.admission.ticket import Ticket
from tokenplane.config.schema import ModelConfig
from tokenplane.pipeline.context import RequestContext
from tokenplane.pipeline.meter_stage import HitBilling, settled_counts
from tokenplane.sessions.budget import describe_denial, session_limits
from tokenplane.sessions.ids import session_budget_error


class StreamDebit:
    """Pre-debits a stream's output ``granularity`` tokens at a time."""

    def __init__(self, svc: AdmissionService, ctx: RequestContext, grant: Grant,
                 covered: int, granularity: int, step_cost: int) -> None:
        self.svc = svc
        self.ctx = ctx
        self.grant = grant
        self.covered = covered
        self.granularity = granularity
        self.step_cost = step_cost
        self.debits = 0
        self.note: dict[str, Any] = {}

    async def extend(self, produced: int) -> bool:
        svc = self.svc
        while self.covered < produced:
            try:
                res = await svc.admission.debit(self.grant, self.granularity, time.time(),
                                                cost_micros=self.step_cost)
            except StoreUnavailable as exc:
                return self._stop("admission_unavailable", f"Admission store unavailable: {exc}")
            svc.alerts.emit(self.grant.tenant, res.alerts)
            if not res.ok:
                if res.denial is None:
                    return self._stop("reservation_expired",
                                      "The request's reservation expired before it ended.")
                code = ("session_budget_exceeded" if res.denial.scope.kind == "session"
                        else res.denial.code)
                return self._stop(code, res.denial.describe(svc.currency()))
            self.covered += self.granularity
            self.debits += 1
        return True

    def _stop(self, code: str, message: str) -> bool:
        self.note = {"code": code, "message": message}
        self.ctx.flags.append("budget_stopped")
        self.svc.metrics.budget_stream_stops.labels(code, self.grant.tenant).inc()
        return False

    def end_note(self) -> dict[str, Any]:
        return dict(self.note)


class AdmissionStage:
    """Reserves at every scope of the caller's chain, or refuses the request."""

    def __init__(self, svc: AdmissionService) -> None:
        self.svc = svc

    async def run(self, ctx: RequestContext) -> None:
        svc, p, alias = self.svc, ctx.principal, ctx.alias
        if p is None or alias is None or not svc.cfg.enabled:
            return
        svc.refresh()
        scopes = svc.scopes(p, alias)
        table = svc.admission.table
        now = time.time()
        session = ctx.session
        extra = (session_limits(p.tenant, session.session_id, session.rules, now)
                 if session is not None and session.rules else [])
        if not extra and not any(table.rules(s) for s in scopes):
            return  # nothing limits this caller: no reservation, no store round trip
        prompt = ctx.counts.prompt
        embeddings = not ctx.operation.generates
        # a batch of prompts (completions): each is answered on its own, so the output
        # reserved (and a cap to clamp) is per prompt times the prompts
        each = 1 if embeddings else ctx.operation.prompts(ctx.body)
        clamp = svc.cfg.clamp_max_tokens and not embeddings
        # the clamp shares what is left among the tenant's requests in flight
        others = svc.enter_flight(p.tenant) if clamp else 0
        try:
            try:
                plan, result = await self._reserve(ctx, scopes, extra, now, clamp, others)
            except StoreUnavailable as exc:
                svc.note_store_health()
                svc.metrics.admission_unavailable.labels(p.tenant).inc()
                raise unavailable_error(exc) from None
            svc.note_store_health()
            if isinstance(result, Denial):
                svc.refusals.note(result, now)  # its next calls: 429 before they are counted
                if session is not None and result.scope.kind == "session":
                    svc.metrics.session_budget_denials.labels(p.tenant).inc()
                    raise session_budget_error(
                        session.session_id,
                        describe_denial(session.session_id, result, svc.currency(),
                                        plan.amounts.of(result.unit)))
                code = "request_exceeds_limit" if result.never else result.code
                svc.metrics.admission_denials.labels(code, result.scope.kind, p.tenant).inc()
                raise denial_error(result, extra_headers=refusal_headers(result),
                                   currency=svc.currency(), now=now)
        except BaseException:
            if clamp:
                svc.leave_flight(p.tenant)
            raise
        ctx.ticket = Ticket(result, prompt, p.tenant if clamp else None)
        ctx.response_headers.update(ratelimit_headers(result.headroom))
        svc.alerts.emit(p.tenant, result.alerts)
        if plan.clamped and plan.max_tokens is not None and not embeddings:
            self._clamp(ctx, plan.max_tokens // each)
        if ctx.stream and result.limits and not embeddings:
            g = svc.cfg.debit_granularity
            ctx.stream_guard = StreamDebit(svc, ctx, result, plan.amounts.output_tokens, g,
                                           svc.output_cost(alias, prompt, g))

    async def _reserve(self, ctx: RequestContext, scopes: list[Scope],
                       extra: list[BoundLimit], now: float, clamp: bool, others: int
                       ) -> tuple[ReservationPlan, Grant | Denial]:
        """The plan and its reservation. With the clamp, a token limit in the chain
        caps ``max_tokens`` at the request's share of what is left and within the
        window (``clamp_share``), and that whole cap is reserved: the request can
        never use more than it was granted. A concurrent request may take the room
        between the read and the reservation: then it is read and tried once more."""
        svc, p, alias = self.svc, ctx.principal, ctx.alias
        assert p is not None and alias is not None
        prompt = ctx.counts.prompt
        embeddings = not ctx.operation.generates
        window_room = (ctx.model.context_window - prompt if ctx.model is not None
                       else prompt + 1)
        each = 1 if embeddings else ctx.operation.prompts(ctx.body)  # a batch's prompts
        cap = ctx.max_tokens
        for attempt in (0, 1):
            allowed: int | None = None
            if clamp:
                left = await svc.admission.allowed_tokens(scopes, now, prompt_tokens=prompt,
                                                          extra=extra)
                if left:  # None: no token limit; 0: let the reservation say which
                    allowed = clamp_share(left, others, window_room)
                    if allowed is not None and each > 1:
                        # a whole cap for every prompt (none left: the reservation says)
                        allowed = allowed // each * each or None
            predicted = None if embeddings else svc.predict(p, alias, prompt // each)
            plan = plan_reservation(
                prompt, max_tokens=0 if embeddings else cap if cap is None else cap * each,
                predicted_output=None if predicted is None else predicted * each,
                default_output=svc.cfg.default_output_tokens * each, allowed_output=allowed,
                cost=lambda i, o: svc.cost(alias, i, o), reserve_cap=allowed is not None,
            )
            result = await svc.admission.reserve(scopes, plan.amounts, now,
                                                 reservation_id=ctx.request_id, extra=extra)
            if not (clamp and attempt == 0 and isinstance(result, Denial) and not result.never
                    and result.unit in TOKEN_UNITS):
                break
            now = time.time()
        return plan, result

    def _clamp(self, ctx: RequestContext, max_tokens: int) -> None:
        assert ctx.principal is not None
        param = ctx.operation.cap_param(ctx.body)
        ctx.body[param] = max_tokens
        ctx.max_tokens = max_tokens
        ctx.flags.append("max_tokens_clamped")
        self.svc.metrics.max_tokens_clamped.labels(ctx.principal.tenant).inc()


async def charge_session_hit(svc: AdmissionService, grant: Grant, billed: Amounts,
                             saved: Amounts, rid: str, now: float) -> None:
    """A cache hit's answer is in the agent's context all the same: its session's
    budget counts every token it saved, not what the hit is billed (``billing.tokens``
    may count none). The tokens beyond the billed ones go on the session's limits only,
    as a reservation of nothing settled with them (a settlement may pass the limit,
    as a stream's last chunk may; the session's next step is then refused)."""
    limits = [b for b in grant.limits if b.scope.kind == "session"]
    extra = Amounts(0, max(0, saved.input_tokens - billed.input_tokens),
                    max(0, saved.output_tokens - billed.output_tokens))
    if not limits or extra.tokens == 0:
        return
    store = svc.admission.store
    held = await store.reserve(grant.tenant, rid, limits, Amounts(), now, svc.admission.ttl_s)
    if isinstance(held, Grant):
        await store.reconcile(grant.tenant, rid, limits, extra, now)


class AdmissionFinisher:
    """Settles the request's reservation exactly once: real usage, a cache hit's charge
    (``hits``: the one the meter bills it at), or a release."""

    def __init__(self, svc: AdmissionService,
                 count_text: Callable[[ModelConfig, str], int],
                 hits: HitBilling | None = None) -> None:
        self.svc = svc
        self.count_text = count_text
        self.hits = hits

    async def _session_hit(self, ctx: RequestContext, grant: Grant, billed: Amounts,
                           now: float) -> None:
        hit = ctx.cache_hit
        if hit is None or ctx.session is None:
            return
        saved = Amounts(0, ctx.estimated_input_tokens, hit.entry.output_tokens)
        try:
            await charge_session_hit(self.svc, grant, billed, saved,
                                     f"{grant.reservation_id}#hit", now)
        except StoreUnavailable:
            self.svc.note_store_health()

    async def finish(self, ctx: RequestContext) -> None:
        ticket, ctx.ticket = ctx.ticket, None
        if ticket is None:
            return
        svc, grant, now = self.svc, ticket.grant, time.time()
        if ticket.in_flight is not None:
            svc.leave_flight(ticket.in_flight)
        charge = self.hits.charge(ctx) if self.hits is not None else None
        if charge is not None:  # a cache hit: what the ledger bills it
            actual = Amounts(1, charge.input_tokens, charge.output_tokens, charge.cost_micros)
            settlement = await svc.admission.reconcile(grant, actual, now)
            await self._session_hit(ctx, grant, actual, now)
        elif ctx.upstream_start is None:  # never sent: refund everything
            settlement = await svc.admission.release(grant, now)
        else:
            c = settled_counts(ctx, self.count_text)
            alias = ctx.alias or ""
            cost = svc.cost(alias, c.prompt, c.output, cached=c.cached, reasoning=c.reasoning)
            actual = Amounts(1, c.prompt, c.output, cost)
            settlement = await svc.admission.reconcile(grant, actual, now)
        svc.alerts.emit(grant.tenant, settlement.alerts)
