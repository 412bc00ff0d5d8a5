"""Fallback plans across replicas, pools and model aliases; retry rules."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tokenplane.routing.endpoint import BREAKER_OPEN, EndpointState


@dataclass(frozen=True, slots=True)
class Candidate:
    """One place a request may be sent: a replica, in a pool, under a model alias."""

    endpoint_id: str
    pool: str
    model_alias: str


@dataclass(frozen=True, slots=True)
class FallbackStep:
    """A pool to try, and the model alias to ask it for."""

    pool: str
    model_alias: str
    max_replicas: int = 2


@dataclass(frozen=True, slots=True)
class FallbackPlan:
    """Ordered candidates: the routed replica, then others in the same pool by load,
    then the fallback pools (e.g. a hosted API) in the order configured."""

    steps: Sequence[FallbackStep]

    def candidates(
        self, first_choice: str, endpoints: Sequence[EndpointState]
    ) -> list[Candidate]:
        by_id = {e.id: e for e in endpoints}
        out: list[Candidate] = []
        seen: set[str] = set()
        first = by_id.get(first_choice)
        if first is not None:
            alias = self.steps[0].model_alias if self.steps else ""
            for s in self.steps:
                if s.pool == first.pool:
                    alias = s.model_alias
                    break
            out.append(Candidate(first.id, first.pool, alias))
            seen.add(first.id)
        for step in self.steps:
            pool = sorted(
                (
                    e
                    for e in endpoints
                    if e.pool == step.pool
                    and e.id not in seen
                    and e.healthy
                    and e.breaker_state != BREAKER_OPEN
                ),
                key=lambda e: (e.inflight_requests, e.token_load, e.id),
            )
            for e in pool[: step.max_replicas]:
                out.append(Candidate(e.id, e.pool, step.model_alias))
                seen.add(e.id)
        return out


@dataclass(frozen=True, slots=True)
class Attempt:
    """One try at a candidate, with what it produced."""

    number: int
    endpoint_id: str
    ok: bool
    tokens_to_client: int
    prompt_tokens_used: int
    output_tokens_used: int

    @property
    def produced_usage(self) -> bool:
        return self.prompt_tokens_used > 0 or self.output_tokens_used > 0


@dataclass(slots=True)
class RetryPolicy:
    """Retry only before any token reached the client, up to ``max_attempts``.

    Attempts are recorded in order; the meter bills each attempt that
    produced usage exactly once, keyed by (request id, attempt number).
    """

    max_attempts: int = 3
    attempts: list[Attempt] = field(default_factory=list)

    def record(
        self,
        endpoint_id: str,
        *,
        ok: bool,
        tokens_to_client: int = 0,
        prompt_tokens_used: int = 0,
        output_tokens_used: int = 0,
    ) -> Attempt:
        a = Attempt(
            number=len(self.attempts) + 1,
            endpoint_id=endpoint_id,
            ok=ok,
            tokens_to_client=tokens_to_client,
            prompt_tokens_used=prompt_tokens_used,
            output_tokens_used=output_tokens_used,
        )
        self.attempts.append(a)
        return a

    def may_retry(self) -> bool:
        """True if the last attempt failed, sent nothing to the client, and budget remains."""
        if not self.attempts or len(self.attempts) >= self.max_attempts:
            return False
        if any(a.tokens_to_client > 0 for a in self.attempts):
            return False
        return not self.attempts[-1].ok

    def billable(self) -> list[Attempt]:
        """Attempts to bill, each once: those that produced usage."""
        return [a for a in self.attempts if a.produced_usage]
