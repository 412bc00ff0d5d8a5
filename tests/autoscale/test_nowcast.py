"""The demand nowcast (``autoscale/nowcast.py``): a Kalman filter that weighs each rate
sample by the requests behind it."""

from __future__ import annotations

import math
import random

import pytest

from tokenplane.autoscale.nowcast import DemandNowcast


def poisson(rng: random.Random, lam: float) -> int:
    # Knuth for small means, normal approximation above
    if lam > 60:
        return max(0, round(rng.gauss(lam, math.sqrt(lam))))
    n, p, limit = 0, 1.0, math.exp(-lam)
    while True:
        p *= rng.random()
        if p <= limit:
            return n
        n += 1


def samples(rate: float, interval: float, n: int, seed: int) -> list[float]:
    """Per-interval demand samples of a pool whose requests arrive at ``rate`` per
    second, one unit of work each."""
    rng = random.Random(seed)
    return [poisson(rng, rate * interval) / interval for _ in range(n)]


@pytest.mark.parametrize("rate", [0.8, 5.0, 50.0])
def test_quiet_pool_is_averaged_busy_pool_taken_as_it_is(rate: float) -> None:
    nc = DemandNowcast()
    raw_err, est_err = [], []
    for k, z in enumerate(samples(rate, 10.0, 600, seed=int(rate * 10))):
        est = nc.update(k * 10.0, z, z * 10.0)
        if k >= 30:
            raw_err.append((z - rate) ** 2)
            est_err.append((est - rate) ** 2)
    raw = math.sqrt(sum(raw_err) / len(raw_err)) / rate
    filt = math.sqrt(sum(est_err) / len(est_err)) / rate
    assert filt < raw  # never worse than the sample itself
    if rate < 1:
        assert filt < 0.4 * raw  # a quiet pool's samples swing: averaged
    # the filter is never overconfident: the spread it believes covers the error it
    # makes (it believes more, for the drift it allows that this pool has not)
    assert 0.7 < nc.sigma / filt < 3.0


def test_a_burst_is_taken_at_once() -> None:
    nc = DemandNowcast()
    rng = random.Random(3)
    for k in range(100):
        nc.update(k * 10.0, poisson(rng, 8.0) / 10.0, 8.0)
    before = nc.ratio
    assert before is not None and 0.6 < before < 1.0
    est = nc.update(1000.0, 2.4, 24.0)  # three times the rate
    assert est == pytest.approx(2.4)


def test_a_ramp_is_followed_closely_when_busy() -> None:
    nc = DemandNowcast()
    est = 0.0
    for k in range(200):
        rate = 20.0 + 0.2 * k  # +2 requests per second per minute
        est = nc.update(k * 10.0, rate, rate * 10.0)
    assert est == pytest.approx(20.0 + 0.2 * 199, rel=0.05)


def test_the_profile_carries_the_shape() -> None:
    """Filtering the ratio to the seasonal profile: a demand that follows its
    profile exactly is followed exactly, however quiet."""
    nc = DemandNowcast()
    for k in range(100):
        profile = 1.0 + 0.5 * math.sin(k / 10.0)
        est = nc.update(k * 10.0, 1.2 * profile, 5.0, 1.0, profile)
        if k > 5:
            assert est == pytest.approx(1.2 * profile, rel=1e-6)


def test_no_requests_yet_is_not_a_zero_estimate() -> None:
    nc = DemandNowcast()
    assert nc.update(0.0, 0.0, 0.0) == 0.0
    assert nc.ratio is None  # nothing behind it: not learned
    for k in range(1, 10):
        est = nc.update(k * 10.0, 2.0, 20.0)
    assert est == pytest.approx(2.0)


def test_bad_parameters() -> None:
    with pytest.raises(ValueError):
        DemandNowcast(drift_per_sqrt_s=0.0)
    with pytest.raises(ValueError):
        DemandNowcast(size_moment=-1.0)


def _tripled(cusum_limit: float, seed: int) -> tuple[int, float]:
    """A quiet pool (8 requests a sample) whose rate triples; how many samples the
    estimate takes to pass twice the old rate, and its level 20 samples on."""
    nc = DemandNowcast(jump_sigmas=100.0, cusum_limit=cusum_limit)  # no single-sample jump
    rng = random.Random(seed)
    for k in range(100):
        z = poisson(rng, 8.0) / 10.0
        nc.update(k * 10.0, z, z * 10.0)
    found = -1
    est = 0.0
    for k in range(20):
        z = poisson(rng, 24.0) / 10.0
        est = nc.update(1000.0 + k * 10.0, z, z * 10.0)
        if found < 0 and est > 1.6:
            found = k + 1
    return found, est


def test_a_step_within_each_samples_noise_is_found_in_a_few_samples() -> None:
    # every sample of the tripled rate (about 2.4 +- 0.5) is within the filter's noise
    # of the old level: the Kalman gain alone takes minutes, the CUSUM a few samples
    with_cusum = [_tripled(5.0, seed) for seed in range(20)]
    without = [_tripled(1e9, seed) for seed in range(20)]
    assert sorted(f for f, _ in with_cusum)[10] <= 6  # the median: within a minute
    assert all(0 < f <= 12 for f, _ in with_cusum)
    assert sorted(f if f > 0 else 99 for f, _ in without)[10] > 12
    assert all(1.8 < e < 3.0 for _, e in with_cusum)


def test_the_cusum_rarely_fires_on_noise() -> None:
    # 24 hours of 10-second samples of a steady quiet pool: the estimate stays near the
    # rate (an alarm moves it to the mean of a run of samples, which noise keeps close)
    nc = DemandNowcast()
    rng = random.Random(11)
    worst = 0.0
    for k in range(8640):
        z = poisson(rng, 8.0) / 10.0
        est = nc.update(k * 10.0, z, z * 10.0)
        if k > 30:
            worst = max(worst, abs(est - 0.8) / 0.8)
    assert worst < 0.6
