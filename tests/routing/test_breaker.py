"""Circuit breaker transitions with an injected clock."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.routing.breaker import Breaker
from tokenplane.routing.endpoint import BREAKER_CLOSED, BREAKER_HALF_OPEN, BREAKER_OPEN


def test_consecutive_failures_open_then_half_open_then_close() -> None:
    b = Breaker(consecutive_failures=3, open_s=5.0, probe_budget=1, probe_successes=2)
    for t in (0.0, 0.1):
        b.record_failure(t)
        assert b.state(t) == BREAKER_CLOSED
    b.record_failure(0.2)
    assert b.state(0.2) == BREAKER_OPEN
    assert not b.allow(3.0)
    assert b.state(5.2) == BREAKER_HALF_OPEN
    assert b.allow(5.2)  # the one probe
    assert not b.allow(5.3)  # budget spent
    b.record_success(5.5)
    assert b.state(5.5) == BREAKER_HALF_OPEN
    assert b.allow(5.6)
    b.record_success(5.7)
    assert b.state(5.7) == BREAKER_CLOSED
    assert b.allow(5.8)


def test_success_resets_the_streak() -> None:
    b = Breaker(consecutive_failures=3, min_requests=1000)
    for i in range(10):
        b.record_failure(i * 0.01)
        b.record_failure(i * 0.01)
        b.record_success(i * 0.01)
    assert b.state(1.0) == BREAKER_CLOSED


def test_error_rate_opens() -> None:
    b = Breaker(consecutive_failures=100, error_rate=0.5, min_requests=10, window_s=10.0)
    for i in range(10):
        (b.record_failure if i % 2 else b.record_success)(i * 0.1)
    assert b.state(1.0) == BREAKER_OPEN


def test_old_outcomes_leave_the_window() -> None:
    b = Breaker(consecutive_failures=100, error_rate=0.5, min_requests=4, window_s=1.0)
    b.record_failure(0.0)
    b.record_failure(0.1)
    for t in (5.0, 5.1, 5.2):
        b.record_success(t)
    b.record_failure(5.3)  # 1 failure of 4 in the window
    assert b.state(5.3) == BREAKER_CLOSED


def test_failed_probe_reopens_for_longer() -> None:
    b = Breaker(consecutive_failures=1, open_s=2.0, max_open_s=5.0)
    b.record_failure(0.0)
    assert b.allow(2.0)
    b.record_failure(2.1)
    assert b.state(2.1) == BREAKER_OPEN
    assert b.state(5.0) == BREAKER_OPEN  # 4 s now, not 2
    assert b.state(6.2) == BREAKER_HALF_OPEN
    assert b.allow(6.2)
    b.record_failure(6.3)
    assert b.state(11.2) == BREAKER_OPEN  # capped at 5 s
    assert b.state(11.4) == BREAKER_HALF_OPEN


@settings(max_examples=80, deadline=None)
@given(
    events=st.lists(
        st.tuples(st.sampled_from(["ok", "fail", "allow"]), st.floats(0.0, 3.0)), max_size=80
    ),
    budget=st.integers(1, 3),
)
def test_half_open_never_exceeds_probe_budget(
    events: list[tuple[str, float]], budget: int
) -> None:
    """In half-open, allow() grants a probe exactly while fewer than ``budget``
    granted probes are still unanswered; open never allows, closed always does."""
    b = Breaker(consecutive_failures=2, open_s=1.0, probe_budget=budget, probe_successes=3)
    now = 0.0
    outstanding = 0
    for kind, dt in events:
        now += dt
        state = b.state(now)
        if state != BREAKER_HALF_OPEN:
            outstanding = 0
        if kind == "allow":
            ok = b.allow(now)
            if state == BREAKER_HALF_OPEN:
                assert ok == (outstanding < budget)
                outstanding += ok
            else:
                assert ok == (state == BREAKER_CLOSED)
        elif kind == "ok":
            b.record_success(now)
            outstanding = max(0, outstanding - 1)
        else:
            b.record_failure(now)
            if state == BREAKER_HALF_OPEN:
                outstanding = 0  # it opened again: the next half-open starts afresh
