"""Reservation planning and the HTTP errors of admission outcomes."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenplane.admission import Amounts, Denial, Scope, StoreUnavailable
from tokenplane.admission.errors import denial_error, unavailable_error
from tokenplane.admission.planning import clamp_share, plan_reservation

MAYBE = st.none() | st.integers(0, 5000)


@given(prompt=st.integers(0, 5000), max_tokens=MAYBE, predicted=MAYBE, allowed=MAYBE)
def test_plan_caps_prediction_and_clamps_max_tokens(prompt: int, max_tokens: int | None,
                                                    predicted: int | None,
                                                    allowed: int | None) -> None:
    plan = plan_reservation(prompt, max_tokens=max_tokens, predicted_output=predicted,
                            default_output=300, allowed_output=allowed,
                            cost=lambda i, o: i * 2 + o * 5)
    a = plan.amounts
    assert (a.requests, a.input_tokens) == (1, prompt)
    assert a.cost_micros == prompt * 2 + a.output_tokens * 5
    limits = [x for x in (max_tokens, allowed) if x is not None]
    assert plan.max_tokens == (min(limits) if limits else None)
    if plan.max_tokens is not None:
        assert a.output_tokens <= plan.max_tokens
    if plan.max_tokens != 0:
        assert a.output_tokens >= 1
    wanted = 300 if predicted is None else predicted
    capped = wanted if plan.max_tokens is None else min(wanted, plan.max_tokens)
    assert a.output_tokens == max(capped, 0 if plan.max_tokens == 0 else 1)


def test_denial_becomes_a_429_with_retry_after() -> None:
    d = Denial(Scope("department", "eng"), "budget", 1000, 0, 12.2, "budget_exceeded",
               "cost_micros")
    err = denial_error(d, extra_headers={"x-ratelimit-limit-requests": "5"})
    assert (err.status, err.code, err.type) == (429, "budget_exceeded", "rate_limit_error")
    assert err.headers == {"x-ratelimit-limit-requests": "5", "retry-after": "13"}
    assert "department eng" in err.message and "Budget 0.001000 for" in err.message
    full = denial_error(Denial(Scope("tenant", "t"), "max_concurrent", 2, 0, None,
                               "concurrency_limit_exceeded", "requests"))
    assert full.headers["retry-after"] == "1"
    never = denial_error(Denial(Scope("tenant", "t"), "tpm", 100, 100, None,
                                "rate_limit_exceeded", "total_tokens", requested=276,
                                never=True), extra_headers={"x-ratelimit-limit-tokens": "1"})
    assert (never.status, never.code, never.type) == (400, "request_exceeds_limit",
                                                      "invalid_request_error")
    assert never.headers == {}  # waiting cannot help: no retry-after
    assert "can never pass the limit 'tpm' of tenant t" in never.message
    assert "276 total_tokens" in never.message


def test_store_down_becomes_a_503() -> None:
    err = unavailable_error(StoreUnavailable("connection refused"))
    assert (err.status, err.code) == (503, "admission_unavailable")
    assert "unavailable" in err.message and err.headers["retry-after"] == "1"


def test_bad_plans_and_amounts_are_refused() -> None:
    with pytest.raises(ValueError):
        plan_reservation(-1, max_tokens=None, predicted_output=None)
    with pytest.raises(ValueError, match="input_tokens"):
        Amounts(1, -5)
    assert orjson.dumps(Amounts(1, 2, 3, 4).vector()) == b"[1,2,3,4]"


@given(allowed=st.integers(-5, 100_000), in_flight=st.integers(0, 64),
       room=st.integers(-5, 10_000))
def test_clamp_share_is_within_the_window_and_a_share_of_what_is_left(
        allowed: int, in_flight: int, room: int) -> None:
    share = clamp_share(allowed, in_flight, room)
    if allowed <= 0 or room <= 0:
        assert share == 0
        return
    assert 1 <= share <= room
    # at most this request's part of what is left, shared with those in flight and
    # one more to come (1 at the least, while anything is left)
    assert share <= max(1, allowed // (in_flight + 2))
    # a burst, each reserving its share of what the ones before it left: together
    # never past what was left
    left, taken = allowed, 0
    for k in range(in_flight + 1):
        s = clamp_share(left, k, room)
        taken, left = taken + s, left - s
    assert taken <= allowed and left >= 0


@given(prompt=st.integers(0, 5000), max_tokens=MAYBE, allowed=st.integers(1, 5000))
def test_the_clamp_reserves_its_whole_cap(prompt: int, max_tokens: int | None,
                                          allowed: int) -> None:
    plan = plan_reservation(prompt, max_tokens=max_tokens, predicted_output=7,
                            allowed_output=allowed, reserve_cap=True)
    assert plan.max_tokens is not None
    assert plan.amounts.output_tokens == max(plan.max_tokens, 1 if plan.max_tokens else 0)
    assert plan.max_tokens == min(allowed, max_tokens if max_tokens is not None else allowed)
