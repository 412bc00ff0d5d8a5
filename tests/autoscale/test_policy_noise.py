"""The tokenplane policy as a default config runs it: the demand through the nowcast
and the pool sized with headroom for the arrivals' spread within a cold start, on
snapshots whose rates carry the Poisson noise of the requests behind them."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from tests.autoscale.helpers import TOKENS_PER_REPLICA, snap
from tests.autoscale.test_nowcast import poisson
from tokenplane.autoscale.capacity import CapacityEstimator, flat_costs
from tokenplane.autoscale.model import PoolSnapshot
from tokenplane.autoscale.policy import TokenplanePolicy
from tokenplane.autoscale.spec import PoolPolicySpec

TOKENS_PER_REQUEST = 1000.0


def default_policy(**spec: float) -> TokenplanePolicy:
    return TokenplanePolicy(PoolPolicySpec(**spec),  # type: ignore[arg-type]
                            CapacityEstimator(flat_costs(TOKENS_PER_REPLICA)))


def noisy(t: float, serving: int, rate: float, rng: random.Random,
          interval: float = 10.0) -> PoolSnapshot:
    """A snapshot of ``serving`` replicas whose requests (1,000 tokens each) arrive
    at ``rate`` per second, counted over one interval."""
    n = poisson(rng, rate * interval)
    s = snap(t, serving, tokens_per_s=n * TOKENS_PER_REQUEST / interval)
    return PoolSnapshot(pool=s.pool, now=t, replicas=s.replicas,
                        prompt_tokens_per_s=s.prompt_tokens_per_s,
                        requests_per_s=n / interval, rate_window_s=interval)


def run(pol: TokenplanePolicy, rate: float, seconds: float, serving: int,
        seed: int) -> list[int]:
    rng = random.Random(seed)
    out = []
    for k in range(int(seconds // 10)):
        d = pol.decide(noisy(10.0 * k, serving, rate, rng), 10.0 * k)
        serving = d.serving_to
        out.append(serving)
    return out


def reversals(serving: list[int]) -> int:
    last, n = 0, 0
    for a, b in itertools.pairwise(serving):
        d = (b > a) - (b < a)
        if d:
            n += last != 0 and d != last
            last = d
    return n


@pytest.mark.parametrize("rate", [0.5, 0.9, 2.0, 3.0])
def test_a_quiet_pools_noise_does_not_move_it(rate: float) -> None:
    """Requests of 1,000 tokens at a steady ``rate`` for two hours (5-30 per interval:
    rates swinging by 20-45%): the pool settles on the size its demand and headroom
    ask for and stays, and the filtered demand is far closer to the truth than the
    samples."""
    pol = default_policy()
    rng = random.Random(int(rate * 10))
    spec = PoolPolicySpec()
    serving, pools, raw_err, est_err = 2, [], [], []
    for k in range(720):
        d = pol.decide(noisy(10.0 * k, serving, rate, rng), 10.0 * k)
        serving = d.serving_to
        pools.append(serving)
        if k >= 60:
            raw_err.append((d.inputs["demand_work"] - rate) ** 2)
            est_err.append((d.inputs["demand_filtered"] - rate) ** 2)
    need = rate / spec.target_utilisation * (1 + spec.arrival_sigmas * math.sqrt(
        2.0 / (rate * (spec.cold_start_s + spec.interval_s))))
    assert reversals(pools) <= 1
    assert set(pools[90:]) <= {math.ceil(need), math.ceil(need) + 1}
    assert math.sqrt(sum(est_err) / len(est_err)) < 0.5 * math.sqrt(sum(raw_err) / len(raw_err))


def test_a_quiet_pool_keeps_more_room_than_a_busy_one() -> None:
    """The same work per replica: a pool of few large requests is sized with more
    headroom than one of many small ones (square-root staffing)."""
    def need(requests_per_s: float) -> float:
        pol = default_policy()
        s = snap(0.0, 4, tokens_per_s=4000.0)
        s = PoolSnapshot(pool=s.pool, now=0.0, replicas=s.replicas, prompt_tokens_per_s=4000.0,
                         requests_per_s=requests_per_s, rate_window_s=10.0)
        return float(pol.decide(s, 0.0).inputs["need_now"])

    few, many = need(0.5), need(500.0)
    spec = PoolPolicySpec()
    arrivals = 0.5 * (spec.cold_start_s + spec.interval_s)
    assert few == pytest.approx(4.0 * (1 + spec.arrival_sigmas * math.sqrt(2.0 / arrivals))
                                / spec.target_utilisation, rel=1e-3)
    assert many < 4.0 * 1.02 / spec.target_utilisation
    assert few > 1.3 * many


def test_a_burst_is_served_in_one_decision() -> None:
    """A burst is decided at once: three times the rate with a queue forming is far
    beyond the sample's noise, so the nowcast jumps to it and its replicas are
    ordered in one decision."""
    pol = default_policy(max_step=8)
    rng = random.Random(4)
    serving = 2
    for k in range(60):  # ten minutes at 1.5 replicas of work
        serving = pol.decide(noisy(10.0 * k, serving, 1.5, rng), 10.0 * k).serving_to
    before = serving
    s = noisy(600.0, serving, 4.5, rng)
    s = PoolSnapshot(pool=s.pool, now=600.0, replicas=snap(600.0, serving, waiting=3).replicas,
                     prompt_tokens_per_s=s.prompt_tokens_per_s,
                     requests_per_s=s.requests_per_s, rate_window_s=10.0)
    d = pol.decide(s, 600.0)
    assert d.serving_to >= math.ceil(4.5 / PoolPolicySpec().target_utilisation) > before


def test_a_noisy_sample_with_a_queue_is_not_a_panic() -> None:
    """A quiet pool just under its size (11.8 requests a sample at the default 0.8
    target) sees one sample 2.3x its mean (3.2 of its spreads, sqrt(2 / 11.8): under
    the nowcast's 4) with a request waiting. That is noise: the filtered demand, a
    little over the pool, decides, and the up window is waited out; the raw sample
    alone would have ordered two more replicas at once (a panic)."""
    pol = default_policy(max_step=8)
    # replicas of work: a need of about 1.98 with its headroom (at any target)
    rate = 1.48 * PoolPolicySpec().target_utilisation
    for k in range(60):
        d = pol.decide(snap(10.0 * k, 2, tokens_per_s=rate * TOKENS_PER_REPLICA), 10.0 * k)
        assert d.serving_to == 2
    spike = snap(600.0, 2, tokens_per_s=2.3 * rate * TOKENS_PER_REPLICA, waiting=1)
    d = pol.decide(spike, 600.0)
    assert d.inputs["need_raw"] >= 1.5 * 2  # the raw sample alone would panic
    assert 2 < d.inputs["need_now"] < 1.5 * 2  # the filtered one asks a little more
    assert d.serving_to == 2 and d.reasons[0] == "stabilising"
