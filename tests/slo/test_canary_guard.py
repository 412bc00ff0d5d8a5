"""The canary guard in virtual time: 20 requests a second, a tenth to the canary,
checked every minute over the last hour, errors drawn at random (seeded)."""

from __future__ import annotations

import numpy as np
import pytest

from tokenplane.slo.canary import CanaryGuardSpec, judge, one_sided_p
from tokenplane.slo.tally import BucketTally, Tally

SPEC = CanaryGuardSpec(alias="chat", slo="avail", stable="v1", canary="v2")
OBJECTIVE = 0.99
PER_MIN = 1200
START = 1_700_000_040.0


def first_rollback(stable_rate: float, canary_rate: float, minutes: int,
                   seed: int = 7) -> int | None:
    rng = np.random.default_rng(seed)
    stable, canary = BucketTally(60), BucketTally(60)
    n_canary = PER_MIN // 10
    n_stable = PER_MIN - n_canary
    for m in range(minutes):
        bucket = stable.bucket_of(START + m * 60)
        stable.add_bucket(bucket, n_stable, int(rng.binomial(n_stable, stable_rate)))
        canary.add_bucket(bucket, n_canary, int(rng.binomial(n_canary, canary_rate)))
        now = START + m * 60 + 59
        v = judge(SPEC, OBJECTIVE, "availability", canary.window(now, SPEC.window_s),
                  stable.window(now, SPEC.window_s))
        if v.rollback:
            return m
    return None


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_healthy_canary_is_never_rolled_back_over_a_day(seed: int) -> None:
    assert first_rollback(0.002, 0.002, 24 * 60, seed) is None


def test_a_canary_worse_but_within_budget_stays() -> None:
    # 0.5% errors against 0.2%: measurably worse, but burning half the budget's pace
    assert first_rollback(0.002, 0.005, 24 * 60) is None


def test_a_canary_that_errs_clearly_faster_is_rolled_back_in_minutes() -> None:
    # 5% against 0.2%: a 5x burn, under the 14.4x limit: the comparison decides
    m = first_rollback(0.002, 0.05, 60)
    assert m is not None and m <= 3


def test_a_broken_canary_is_rolled_back_as_soon_as_it_has_its_sample() -> None:
    m = first_rollback(0.002, 0.5, 60)
    assert m == 0  # 120 canary requests in the first minute: at 50% it burns 50x


def test_verdicts_carry_their_evidence() -> None:
    v = judge(SPEC, OBJECTIVE, "availability", Tally(200, 20), Tally(2000, 4))
    assert v.rollback
    ev = v.evidence()
    assert ev["canary"] == {"valid": 200, "bad": 20, "burn_rate": pytest.approx(10.0)}
    assert ev["stable"] == {"valid": 2000, "bad": 4, "burn_rate": pytest.approx(0.2)}
    assert v.z is not None and v.z > 5 and v.p_value is not None and v.p_value < 1e-6
    waiting = judge(SPEC, OBJECTIVE, "availability", Tally(99, 99), Tally(2000, 0))
    assert not waiting.rollback and "waiting" in waiting.reason


def test_z_test_by_hand() -> None:
    # 30/1000 vs 20/1000: pooled 0.025, se = sqrt(0.025 * 0.975 * 0.002) = 0.006982
    z, p = one_sided_p(Tally(1000, 30), Tally(1000, 20))
    assert z == pytest.approx(0.01 / 0.0069821, rel=1e-4)
    assert p == pytest.approx(0.0760, abs=5e-4)
    assert one_sided_p(Tally(10, 0), Tally(10, 0)) == (None, None)
