"""The tokenplane autoscaling policy on hand-built snapshots."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import pytest

from tests.autoscale.helpers import TOKENS_PER_REPLICA, drive, policy, snap
from tokenplane.autoscale.forecast import DAY_S, DemandForecaster
from tokenplane.autoscale.policy import TokenplanePolicy
from tokenplane.autoscale.spec import PoolPolicySpec


def reversal_steps(serving: list[int]) -> list[int]:
    """The steps at which the pool's size changed direction."""
    out: list[int] = []
    last = 0
    for k, (a, b) in enumerate(itertools.pairwise(serving), start=1):
        d = (b > a) - (b < a)
        if d:
            if last and d != last:
                out.append(k)
            last = d
    return out


def reversals(serving: list[int]) -> int:
    return len(reversal_steps(serving))


def test_ramp_scales_up_step_by_step_to_the_demand() -> None:
    spec = PoolPolicySpec(target_utilisation=1.0, hysteresis=0.1, max_step=2,
                          scale_up_window_s=20.0)
    pol = policy(spec)
    # demand climbs 300 tokens/s per step: 0.3 replica per 10 s, from 1 to ~7.5
    demand = [1000.0 + 300.0 * k for k in range(22)] + [7500.0] * 6
    out = drive(pol, demand, serving=1)
    serving = [s for _, s, _, _ in out]
    assert serving == sorted(serving)  # a ramp never scales down
    assert serving[-1] == 8  # ceil(7.5)
    for (_, a, _, _), (_, b, _, _) in itertools.pairwise(out):
        assert b - a <= 2  # max_step
    # never more than the demand of the last stabilisation window asked for
    for k, (_, s, _, _) in enumerate(out):
        assert s <= math.ceil(max(demand[max(0, k - 2):k + 1]) / TOKENS_PER_REPLICA)
    assert "token_demand" in {r[0] for _, _, _, r in out}


def test_burst_shorter_than_the_cooldown_does_not_flap() -> None:
    pol = policy(PoolPolicySpec(target_utilisation=1.0, hysteresis=0.1, cooldown_s=900.0,
                                scale_down_window_s=300.0))
    # steady 2 replicas of demand, a 60 s burst to 6, back to 2 for half an hour
    demand = [2000.0] * 6 + [6000.0] * 6 + [2000.0] * 180
    out = drive(pol, demand, serving=2)
    serving = [s for _, s, _, _ in out]
    assert max(serving) == 6  # the burst is served (a 3x jump: no stabilisation wait)
    up_at = next(t for t, s, _, _ in out if s == 6)
    down_at = next(t for t, s, _, _ in out if t > up_at and s < 6)
    assert down_at - up_at >= 900.0  # held for the cooldown after the last scale-up
    assert any("cooldown" in r for t, _, _, r in out if up_at < t < up_at + 900.0)
    assert reversals(serving) == 1  # up once, down once: no flapping
    # down to the smallest pool that runs under 90% (the hysteresis band): 3
    assert serving[-1] == math.ceil(2 / 0.9)


def test_a_jump_without_a_queue_is_noise_and_waits_out_the_up_window() -> None:
    pol = policy(PoolPolicySpec(target_utilisation=1.0, scale_up_window_s=60.0))
    d = pol.decide(snap(0.0, 2, tokens_per_s=2000.0), 0.0)
    d = pol.decide(snap(10.0, 2, tokens_per_s=4000.0), 10.0)  # 2x, nothing waiting
    assert d.serving_to == 2 and d.reasons == ("stabilising",)
    d = pol.decide(snap(20.0, 2, tokens_per_s=4000.0, waiting=3), 20.0)  # a queue: a burst
    # 4 replicas of demand plus the 6 waiting requests' 6,000 tokens over 30 s
    assert d.serving_to == 5


def test_short_blip_below_the_panic_ratio_waits_out_the_up_window() -> None:
    pol = policy(PoolPolicySpec(target_utilisation=1.0, scale_up_window_s=30.0))
    out = drive(pol, [4000.0] * 3 + [5000.0] + [4000.0] * 5, serving=4)
    assert all(s == 4 for _, s, _, _ in out)
    assert "stabilising" in out[3][3]


def _history(days: int = 7) -> list[tuple[float, float]]:
    """Per-minute demand of earlier days: 1 replica of work at night, a ramp from
    08:00 to 6 replicas at 09:00 (in work units: one unit = one replica)."""
    pts = []
    for d in range(days, 0, -1):
        for m in range(1440):
            h = m / 60
            v = 1.0 if h < 8 else 6.0 if h >= 9 else 1.0 + 5.0 * (h - 8)
            pts.append((m * 60.0 - d * DAY_S, v))
    return pts


def test_forecast_scales_up_before_the_morning_ramp() -> None:
    spec = PoolPolicySpec(target_utilisation=1.0, cold_start_s=600.0, interval_s=10.0)
    fc = DemandForecaster()
    fc.learn(_history())
    pol = policy(spec, fc)
    reactive = policy(spec)
    start = 7.5 * 3600  # 07:30, demand still at the night level
    t_fc = t_re = None
    serving_fc = serving_re = 1
    for k in range(0, 240):  # 07:30 to 08:10
        t = start + 10.0 * k
        h = t / 3600
        d = TOKENS_PER_REPLICA * (1.0 if h < 8 else min(6.0, 1.0 + 5.0 * (h - 8)))
        a = pol.decide(snap(t, serving_fc, tokens_per_s=d), t)
        b = reactive.decide(snap(t, serving_re, tokens_per_s=d), t)
        if a.serving_to > serving_fc and t_fc is None:
            t_fc = t
            assert a.reasons[0] == "forecast"
        if b.serving_to > serving_re and t_re is None:
            t_re = t
        serving_fc, serving_re = a.serving_to, b.serving_to
    assert t_fc is not None and t_re is not None
    # the forecast orders replicas about a cold start before demand needs them
    assert t_fc < 8 * 3600 and t_re > 8 * 3600
    assert t_re - t_fc >= 0.75 * spec.cold_start_s


def test_warm_replicas_are_promoted_when_demand_jumps() -> None:
    pol = policy(PoolPolicySpec(target_utilisation=1.0, warm_min=2, warm_max=2))
    d = pol.decide(snap(0.0, 2, tokens_per_s=2000.0, warm=2), 0.0)
    assert (d.serving_to, d.warm_to) == (2, 2)
    d = pol.decide(snap(10.0, 2, tokens_per_s=4000.0, warm=2, waiting=3), 10.0)
    assert d.serving_to == 5  # 4 of demand, plus the queue to drain
    assert "warm_promotion" in d.reasons
    # the two promoted ones leave the warm pool; it is refilled to warm_min
    assert d.warm_from == 2 and d.warm_to == 2


def test_warm_pool_follows_the_forecast() -> None:
    spec = PoolPolicySpec(target_utilisation=1.0, warm_min=0, warm_max=3, cold_start_s=120.0)
    fc = DemandForecaster()
    fc.learn(_history())
    pol = policy(spec, fc)
    night = pol.decide(snap(3 * 3600.0, 1, tokens_per_s=1000.0), 3 * 3600.0)
    assert night.warm_to == 0  # nothing coming within the hour
    t = 7.9 * 3600
    before_ramp = pol.decide(snap(t, 1, tokens_per_s=1000.0), t)
    # the ramp starts within a cold start plus the 15-minute lookahead: load replicas
    # now, as many as it will need beyond the serving pool by then (08:11: ~1.9)
    assert before_ramp.warm_to == 1
    assert before_ramp.serving_to == 1


def test_budget_caps_the_pool_warm_first() -> None:
    spec = PoolPolicySpec(target_utilisation=1.0, price_per_replica_hour=2.0,
                          budget_per_hour=10.0, warm_min=1, warm_max=1, max_step=8)
    pol = policy(spec)
    d = pol.decide(snap(0.0, 2, tokens_per_s=8000.0, warm=1), 0.0)
    assert d.serving_to == 5 and d.warm_to == 0  # 5 x 2.0 = the budget
    assert d.reasons[0] == "budget_cap"
    cheap_warm = PoolPolicySpec(target_utilisation=1.0, price_per_replica_hour=2.0,
                                warm_price_per_replica_hour=1.0, budget_per_hour=11.0,
                                warm_min=1, warm_max=1, max_step=8)
    d = policy(cheap_warm).decide(snap(0.0, 2, tokens_per_s=5000.0), 0.0)
    assert (d.serving_to, d.warm_to) == (5, 1)  # 10 + 1 fits


def test_min_and_max_replicas() -> None:
    spec = PoolPolicySpec(min_replicas=2, max_replicas=6, target_utilisation=1.0,
                          cooldown_s=0.0, scale_down_window_s=0.0, max_step=8)
    pol = policy(spec)
    d = pol.decide(snap(0.0, 4, tokens_per_s=0.0), 0.0)
    assert d.serving_to == 2 and "min" in d.reasons
    d = pol.decide(snap(10.0, 2, tokens_per_s=50_000.0, waiting=10), 10.0)
    assert d.serving_to == 6 and "max" in d.reasons


def test_slo_burn_scales_up_sooner_and_holds_scale_down() -> None:
    spec = PoolPolicySpec(target_utilisation=0.8, hysteresis=0.1, scale_up_window_s=60.0,
                          cooldown_s=0.0, scale_down_window_s=0.0)
    # a small rise (not a panic): stabilised without burn, immediate with it
    calm, hot = policy(spec), policy(spec)
    for t in (0.0, 10.0):
        calm.decide(snap(t, 4, tokens_per_s=3000.0), t)
        hot.decide(snap(t, 4, tokens_per_s=3000.0, burn=5.0), t)
    a = calm.decide(snap(20.0, 4, tokens_per_s=3500.0), 20.0)
    b = hot.decide(snap(20.0, 4, tokens_per_s=3500.0, burn=5.0), 20.0)
    assert a.serving_to == 4 and a.reasons == ("stabilising",)
    # burning: the target utilisation drops by 15% and the window is skipped
    assert b.serving_to == math.ceil(3500 / (1000 * 0.8 * 0.85)) == 6
    assert "slo_burn" in b.reasons
    # demand falls: the calm pool scales down, the burning one holds
    a = calm.decide(snap(30.0, 4, tokens_per_s=1000.0), 30.0)
    b = hot.decide(snap(30.0, 6, tokens_per_s=1000.0, burn=5.0), 30.0)
    assert a.serving_to < 4
    assert b.serving_to == 6 and b.reasons[0] == "slo_burn"


def test_queue_and_kv_add_their_own_need() -> None:
    pol = policy(PoolPolicySpec(target_utilisation=1.0))
    d = pol.decide(snap(0.0, 4, tokens_per_s=1000.0, kv=0.95), 0.0)
    assert d.serving_to == 5 and d.reasons[0] == "kv"
    pol = policy(PoolPolicySpec(target_utilisation=1.0))
    d = pol.decide(snap(0.0, 4, tokens_per_s=1000.0, waiting=8), 0.0)
    assert d.serving_to > 4 and d.reasons[0] in ("queue", "token_demand")


def test_capacity_is_corrected_from_what_saturated_replicas_delivered() -> None:
    pol = policy(PoolPolicySpec(target_utilisation=1.0))
    # saturated replicas (requests waiting) deliver only 500 of the modelled 1000 tok/s
    for k in range(120):
        pol.decide(snap(10.0 * k, 4, tokens_per_s=2000.0, waiting=2, delivered=500.0),
                   10.0 * k)
    assert 0.5 <= pol.capacity.factor < 0.55
    for t in (1200.0, 1210.0, 1220.0, 1230.0, 1240.0, 1250.0, 1260.0):  # past the up window
        d = pol.decide(snap(t, 4, tokens_per_s=3000.0), t)
    assert d.inputs["need_now"] > 5.9
    assert d.serving_to == 6  # 3000 tok/s at ~500 per replica


def test_for_profile_prices_tokens_with_the_engine_profile() -> None:
    from tokenplane.engine.profiles import get_profile

    prof = get_profile("llama3-8b-a100")
    pol = TokenplanePolicy.for_profile(PoolPolicySpec(target_utilisation=1.0), prof,
                                       mean_prompt=1155, mean_output=211)
    # a prompt token costs about a (67 us) plus its chunk's attention; an output token
    # a plus reading ~1,260 tokens of KV at 65.5 ns each
    assert 6.8e-5 < pol.capacity.costs.prompt_s < 7.0e-5
    assert 1.45e-4 < pol.capacity.costs.output_s < 1.55e-4
    # 9 requests/s of that mix is about one replica at full load
    d = pol.decide(snap(0.0, 1, tokens_per_s=9 * 1155.0), 0.0)
    assert 0.6 < d.inputs["need_now"] < 0.8  # prompts alone: 72% of a replica
    flat = TokenplanePolicy.for_profile(
        PoolPolicySpec(target_utilisation=1.0, replica_tokens_per_s=2000.0), prof)
    assert flat.capacity.costs.prompt_s == flat.capacity.costs.output_s == 1 / 2000.0


def test_a_fresh_policy_waits_a_down_window_before_it_scales_down() -> None:
    """A policy that has just started (a gateway restart) has no recommendations
    behind it: it does not give replicas back before a whole down window."""
    spec = PoolPolicySpec(target_utilisation=1.0, scale_down_window_s=300.0, cooldown_s=0.0)
    pol = policy(spec)
    out = drive(pol, [1000.0] * 40, serving=4)  # 400 s of a 1-replica demand
    first_down = next(t for t, s, _, _ in out if s < 4)
    assert first_down >= 300.0
    assert out[0][3][0] == "stabilising"


def test_the_forecasts_headroom_is_for_the_forecasts_arrivals() -> None:
    """A pool that is idle now is not sized for its emptiness's spread: the
    headroom of what the forecast asks for is that of the forecast's own arrivals."""
    spec = PoolPolicySpec(target_utilisation=1.0, cold_start_s=120.0, arrival_sigmas=3.0)
    fc = DemandForecaster()
    fc.learn(_history())
    pol = TokenplanePolicy(spec, policy(spec, headroom=True).capacity, fc, nowcast=False)
    t = 12 * 3600.0  # midday: the profile says 6 replicas' worth
    # the first decision: nothing seen yet (a gateway just started), no size known
    d = pol.decide(snap(t, 6, tokens_per_s=0.0), t)
    work = d.inputs["forecast_work"]  # engine-seconds per second: replicas at target 1
    assert work > 4.0
    assert d.inputs["need_forecast"] == pytest.approx(work, rel=1e-3)  # no spread
    # once requests of 1,000 tokens were seen at the forecast's rate (6 per second,
    # ~780 within a cold start): a few percent of headroom, not the 3 x sqrt(2)
    # an empty pool's spread would give
    for k in range(1, 7):
        d = pol.decide(snap(t + 10.0 * k, 6, tokens_per_s=6000.0), t + 10.0 * k)
    work = d.inputs["forecast_work"]
    assert work * 1.02 < d.inputs["need_forecast"] < work * 1.2


def _reversals_per_hour(out: list[tuple[float, int, int, tuple[str, ...]]],
                        window: float = 3600.0) -> int:
    """The most direction reversals in any window of ``window`` seconds."""
    times = [out[k][0] for k in reversal_steps([s for _, s, _, _ in out])]
    return max((sum(1 for u in times if t <= u < t + window) for t in times), default=0)


@pytest.mark.parametrize("limit", [1, 2])
def test_flap_damping_holds_scale_downs_that_would_pass_the_reversal_limit(limit: int) -> None:
    # a load that swings every 16 minutes: without damping the pool follows it (up at
    # once, down after each 15-minute cooldown), close to 4 reversals an hour
    spec = PoolPolicySpec(target_utilisation=1.0, hysteresis=0.1, cooldown_s=900.0,
                          scale_down_window_s=60.0, max_reversals_per_hour=None)
    demand = [2000.0] * 6 + ([2000.0] * 96 + [4000.0] * 96) * 8
    free = drive(policy(spec), demand, serving=2)
    damped = drive(policy(replace(spec, max_reversals_per_hour=limit)), demand, serving=2)
    assert _reversals_per_hour(free) > limit + 1
    # a scale-down never passes the limit; the scale-up answering it may (one over)
    assert _reversals_per_hour(damped) <= limit + 1
    assert any("flap_damping" in r for *_, r in damped)
    assert reversals([s for _, s, _, _ in damped]) >= 2  # it still follows the load
    # scale-ups are never held: demand above the pool is served within the up window
    for k, (_, s, _, r) in enumerate(damped):
        if k >= 7 and all(d > 3000.0 for d in demand[k - 7:k]):
            assert s >= 4, (k, s, r)


def test_flap_damping_lets_the_pool_return_from_a_burst() -> None:
    # down from a ramp, a burst (up: a reversal), back down (a second): both within
    # the limit of 2, so the burst's replicas go after the cooldown as without damping
    spec = PoolPolicySpec(target_utilisation=1.0, hysteresis=0.1, cooldown_s=900.0,
                          scale_down_window_s=60.0)
    demand = [2000.0] * 60 + [6000.0] * 30 + [2000.0] * 150
    out = drive(policy(spec), demand, serving=4)
    serving = [s for _, s, _, _ in out]
    assert serving[59] < 4 and max(serving) >= 6 and serving[-1] < 4
    assert not any("flap_damping" in r for *_, r in out)


def test_flap_damping_is_validated() -> None:
    with pytest.raises(ValueError, match="max_reversals_per_hour"):
        PoolPolicySpec(max_reversals_per_hour=0)


@pytest.mark.parametrize(("lookahead", "keeps"), [(3600.0, True), (900.0, False)])
def test_a_scale_down_keeps_what_the_forecast_needs_back_within_the_hour(
        lookahead: float, keeps: bool) -> None:
    # 07:06, a pool of 3 at 0.8 replica of demand; the ramp starts at 08:00.
    # Looking an hour ahead the pool keeps the replicas 08:00 wants back; looking one
    # cooldown ahead (the old hold) it gives them back and will order them again
    spec = PoolPolicySpec(target_utilisation=1.0, cold_start_s=120.0, cooldown_s=900.0,
                          scale_down_window_s=60.0, arrival_sigmas=0.0)
    fc = DemandForecaster()
    fc.learn(_history())
    pol = TokenplanePolicy(spec, policy(spec).capacity, fc, nowcast=False,
                           hold_lookahead_s=lookahead)
    serving = 3
    for k in range(60):  # 07:06 to 07:16
        t = 7.1 * 3600 + 10.0 * k
        d = pol.decide(snap(t, serving, tokens_per_s=0.8 * TOKENS_PER_REPLICA), t)
        serving = d.serving_to
    assert (serving >= 2) is keeps
