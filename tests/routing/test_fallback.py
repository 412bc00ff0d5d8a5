"""Fallback candidates and retry rules that never bill twice."""

from __future__ import annotations

from tokenplane.routing.endpoint import BREAKER_OPEN, EndpointState
from tokenplane.routing.fallback import FallbackPlan, FallbackStep, RetryPolicy


def test_candidates_order_across_pools_and_aliases() -> None:
    eps = [
        EndpointState("l1", pool="local", inflight_requests=5),
        EndpointState("l2", pool="local", inflight_requests=1),
        EndpointState("l3", pool="local", inflight_requests=0, healthy=False),
        EndpointState("l4", pool="local", inflight_requests=0, breaker_state=BREAKER_OPEN),
        EndpointState("h1", pool="hosted"),
    ]
    plan = FallbackPlan(
        [FallbackStep("local", "llama-3-8b", max_replicas=3), FallbackStep("hosted", "gpt-4o-mini")]
    )
    got = [(c.endpoint_id, c.model_alias) for c in plan.candidates("l1", eps)]
    assert got == [("l1", "llama-3-8b"), ("l2", "llama-3-8b"), ("h1", "gpt-4o-mini")]


def test_retry_only_before_tokens_reach_the_client() -> None:
    rp = RetryPolicy(max_attempts=3)
    rp.record("a", ok=False, prompt_tokens_used=100)
    assert rp.may_retry()
    rp.record("b", ok=False, tokens_to_client=3, prompt_tokens_used=100, output_tokens_used=3)
    assert not rp.may_retry()


def test_retry_budget_and_success() -> None:
    rp = RetryPolicy(max_attempts=2)
    assert not rp.may_retry()  # nothing tried yet
    rp.record("a", ok=False)
    assert rp.may_retry()
    rp.record("b", ok=True, prompt_tokens_used=10, output_tokens_used=5)
    assert not rp.may_retry()
    rp2 = RetryPolicy(max_attempts=2)
    rp2.record("a", ok=False)
    rp2.record("b", ok=False)
    assert not rp2.may_retry()


def test_billable_attempts_each_once() -> None:
    rp = RetryPolicy(max_attempts=3)
    rp.record("a", ok=False)  # connection refused: no usage
    rp.record("b", ok=False, prompt_tokens_used=50)  # died during prefill
    rp.record("c", ok=True, tokens_to_client=7, prompt_tokens_used=50, output_tokens_used=7)
    bill = rp.billable()
    assert [(a.number, a.endpoint_id) for a in bill] == [(2, "b"), (3, "c")]
    assert len({a.number for a in bill}) == len(bill)
