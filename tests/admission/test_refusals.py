"""The refusal memo and the refused-bytes pace (``admission/refusals.py``), pure."""

from __future__ import annotations

import pytest

from tokenplane.admission import Denial, Scope
from tokenplane.admission.limits import LimitRule
from tokenplane.admission.refusals import BytePace, RefusalMemo

RPM = LimitRule("rpm", "window", "requests", 5, 60.0)
TPM = LimitRule("tpm", "window", "total_tokens", 100, 60.0)
GAUGE = LimitRule("max_concurrent", "gauge", "requests", 2)


def _denial(rule: LimitRule, scope: Scope, retry: float | None = 10.0,
            never: bool = False) -> Denial:
    return Denial(scope, rule.name, rule.limit, 0, retry, rule.code, rule.unit,
                  never=never, rule=rule)


def test_memo_remembers_request_rates_over_every_model_until_their_wait() -> None:
    memo = RefusalMemo()
    key, tenant = Scope("key", "k1"), Scope("tenant", "t")
    memo.note(_denial(RPM, key), 100.0)
    got = memo.refused([tenant, key], 104.0)
    assert got is not None and got.scope == key and got.retry_after_s == pytest.approx(6.0)
    assert memo.refused([tenant], 104.0) is None  # another scope is not refused
    assert memo.refused([key], 110.0) is None and len(memo) == 0  # the wait is over
    # not remembered: token rates (a smaller request may pass), gauges (a slot may free
    # at any time), one model's rate, a request that can never pass, no known wait
    for d in (_denial(TPM, key), _denial(GAUGE, key), _denial(RPM, Scope("key", "k1", "m")),
              _denial(RPM, key, never=True), _denial(RPM, key, retry=None)):
        memo.note(d, 100.0)
    assert len(memo) == 0
    memo.note(_denial(RPM, key), 100.0)
    memo.clear()
    assert memo.refused([key], 101.0) is None


def test_memo_is_bounded_oldest_first() -> None:
    memo = RefusalMemo(capacity=3)
    for i in range(5):
        memo.note(_denial(RPM, Scope("key", f"k{i}")), 0.0)
    assert len(memo) == 3
    assert memo.refused([Scope("key", "k0")], 1.0) is None
    assert memo.refused([Scope("key", "k4")], 1.0) is not None


def test_byte_pace_refills_at_its_rate_up_to_its_burst() -> None:
    pace = BytePace(rate=1000, burst=5000)
    assert pace.wait("k", 0.0) == 0.0
    assert pace.spend("k", 4000, 0.0) == 0.0
    assert pace.spend("k", 3000, 0.0) == pytest.approx(2.0)  # 2,000 bytes short
    assert pace.wait("k", 1.0) == pytest.approx(1.0)
    assert pace.wait("k", 2.0) == 0.0
    assert pace.wait("other", 2.0) == 0.0  # per key
    assert pace.spend("k", 0, 100.0) == 0.0  # refilled, never past the burst
    assert pace.spend("k", 5001, 100.0) == pytest.approx(0.001)
