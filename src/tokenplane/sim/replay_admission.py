"""The gateway's admission run over recorded traffic in virtual time.

The same pure parts the gateway's admission stage and finisher use: the limit table
binds the caller's scope chain (``admission_parties(...).scope_chain(alias)``), a
request that exceeds a limit by itself is refused at once (``never_fits``), and the
in-process counter book (``CounterBook``, what ``MemoryStore`` runs) reserves at every
scope at once and is settled with the recorded usage when the request ended.

What is reserved: the prompt as the gateway counted it plus the predicted output (the
gateway's ``LengthPredictor``, fed every successful request at its end, as the meter
finisher does; ``default_output_tokens`` before it has history; ``predict_output``
off: the default) and its cost at the config's prices. The ledger does not keep a
request's ``max_tokens``, so the prediction is not capped by it. Request and
concurrency limits (``rpm``, ``max_concurrent``) therefore come out exactly as the
gateway decided them; token and money limits the same arithmetic on the gateway's
prediction, which starts fresh in every worker.

A request the ledger recorded as refused that a looser config admits has no recorded
usage: it reserves and settles its counted prompt and predicted output, at once.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from tokenplane.admission import decode
from tokenplane.admission.amounts import Amounts
from tokenplane.admission.binding import LimitTable
from tokenplane.admission.book import CounterBook
from tokenplane.admission.limiter import never_fits
from tokenplane.admission.outcomes import Denial, Grant
from tokenplane.admission.planning import plan_reservation
from tokenplane.admission.scopes import Scope, admission_parties, tenant_of
from tokenplane.metering.events import UsageEvent
from tokenplane.metering.pricing import PriceBook
from tokenplane.sim.replay_workload import ReplayRequest
from tokenplane.tokens.predictor import LengthKey, LengthPredictor


@dataclass(frozen=True, slots=True)
class AdmissionSetup:
    """A config's admission: its limits and how it plans a reservation."""

    table: LimitTable
    enabled: bool = True
    default_output_tokens: int = 256
    predict_output: bool = True
    ttl_s: float = 900.0
    prices: PriceBook | None = None


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why replay refused a request (what the gateway's 429 would say)."""

    code: str  # rate_limit_exceeded | budget_exceeded | concurrency_limit_exceeded |
    #            request_exceeds_limit
    scope: str
    limit: str


def cost_micros(prices: PriceBook | None, alias: str, input_tokens: int, output_tokens: int,
                cached: int = 0, reasoning: int = 0) -> int:
    """Cost as the ledger prices an event of these counts."""
    if prices is None:
        return 0
    ev = UsageEvent(request_id="", attempt=0, ts=0.0, model=alias, input_tokens=input_tokens,
                    cached_input_tokens=cached, output_tokens=output_tokens,
                    reasoning_tokens=reasoning)
    return prices.cost(ev)[0]


def scope_chain(e: UsageEvent) -> list[Scope]:
    return admission_parties(e.tenant, e.department or None, e.app or None,
                             e.key_id or None, e.end_user or None).scope_chain(e.model)


def admit(workload: Sequence[ReplayRequest], setup: AdmissionSetup) -> dict[str, Refusal]:
    """Runs admission over ``workload`` (arrival order) in virtual time; returns the
    refused requests by id and why."""
    refused: dict[str, Refusal] = {}
    if not setup.enabled or not setup.table.has_limits():
        return refused  # nothing limits anyone
    book = CounterBook()
    predictor = LengthPredictor(default=setup.default_output_tokens)
    ttl_ms = int(setup.ttl_s * 1000)
    # settlements due: (time, seq, grant, actual, learn) -- learn: (key, prompt, output)
    due: list[tuple[float, int, Grant | None, Amounts,
                    tuple[LengthKey, int, int] | None]] = []
    seq = 0
    chains: dict[tuple[str, ...], list[Scope]] = {}

    def settle_until(t: float) -> None:
        while due and due[0][0] <= t:
            at, _, grant, actual, learn = heapq.heappop(due)
            if grant is not None and grant.limits:
                book.reconcile(grant.reservation_id, [b.wire() for b in grant.limits],
                               actual.vector(), int(at * 1000))
            if learn is not None:
                predictor.observe(*learn)

    for r in workload:
        e = r.event
        settle_until(r.arrival)
        key = LengthKey(e.tenant, e.app, e.model)
        prompt = e.estimated_input_tokens or r.prompt_tokens
        who = (e.tenant, e.department, e.app, e.key_id, e.end_user, e.model)
        scopes = chains.get(who) or chains.setdefault(who, scope_chain(e))
        limits = setup.table.bind(scopes, r.arrival)
        grant: Grant | None = None
        predicted = (predictor.predict(key, prompt) if setup.predict_output and limits
                     else setup.default_output_tokens)
        if limits:
            plan = plan_reservation(
                prompt, max_tokens=None, predicted_output=predicted,
                default_output=setup.default_output_tokens,
                cost=partial(cost_micros, setup.prices, e.model))
            result: Grant | Denial | None = never_fits(limits, plan.amounts)
            if result is None:
                raw = book.reserve(tenant_of(scopes), r.request_id,
                                   [b.wire() for b in limits], plan.amounts.vector(),
                                   int(r.arrival * 1000), ttl_ms, 0)
                result = decode.grant_or_denial(raw, r.request_id, tenant_of(scopes),
                                                plan.amounts, limits, r.arrival, setup.ttl_s)
            if isinstance(result, Denial):
                code = "request_exceeds_limit" if result.never else result.code
                refused[r.request_id] = Refusal(code, result.scope.label, result.limit_name)
                continue
            grant = result
        if r.refused:  # admitted now, refused when recorded: no usage was recorded
            if grant is not None:
                heapq.heappush(due, (r.arrival, seq, grant,
                                     Amounts(1, prompt, predicted,
                                             cost_micros(setup.prices, e.model, prompt,
                                                         predicted)), None))
        else:
            reached = r.reached_upstream
            actual = (Amounts(1, e.input_tokens, e.output_tokens,
                              cost_micros(setup.prices, e.model, e.input_tokens,
                                          e.output_tokens, e.cached_input_tokens,
                                          e.reasoning_tokens))
                      if reached and grant is not None else Amounts())
            learn = ((key, e.input_tokens, e.output_tokens)
                     if reached and e.status == "ok" and e.usage_source == "upstream"
                     and e.operation != "embeddings" and "budget_stopped" not in e.flags
                     else None)
            heapq.heappush(due, (e.ts, seq, grant, actual, learn))
        seq += 1
    return refused
