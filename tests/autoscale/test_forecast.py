"""The demand forecaster: the seasonal profile, the Holt correction, its error."""

from __future__ import annotations

import random

import pytest

from tokenplane.autoscale.forecast import DAY_S, DemandForecaster


def day_shape(t: float) -> float:
    """1.0 at night, a ramp 08:00-09:00 to 6.0, back down 18:00-20:00."""
    h = (t % DAY_S) / 3600
    if h < 8 or h >= 20:
        return 1.0
    if h < 9:
        return 1.0 + 5.0 * (h - 8)
    if h < 18:
        return 6.0
    return 6.0 - 2.5 * (h - 18)


def history(days: int, noise: float = 0.05, seed: int = 0) -> list[tuple[float, float]]:
    rng = random.Random(seed)
    return [(m * 60.0 - d * DAY_S, day_shape(m * 60.0) * rng.uniform(1 - noise, 1 + noise))
            for d in range(days, 0, -1) for m in range(1440)]


def test_profile_learns_the_day_and_forecasts_the_ramp_a_cold_start_ahead() -> None:
    fc = DemandForecaster()
    assert fc.forecast(0.0, 120.0) is None  # no history, no forecast
    fc.learn(history(7))
    # at 07:58 (still night) the forecast for 08:30 sees the ramp
    t = 7 * 3600 + 58 * 60.0
    for k in range(10):
        fc.observe(t - 600 + 60 * k, 1.0)
    f = fc.forecast(t, 32 * 60.0)
    assert f is not None and f == pytest.approx(day_shape(t + 32 * 60.0), rel=0.1)


def test_holt_level_follows_a_day_running_above_its_profile() -> None:
    fc = DemandForecaster()
    fc.learn(history(7, noise=0.0))
    t0 = 10 * 3600.0
    for m in range(60):  # an hour at 1.3x the profile
        fc.observe(t0 + 60 * m, 1.3 * day_shape(t0 + 60 * m))
    t = t0 + 3600.0
    f = fc.forecast(t, 600.0)
    assert f is not None and f == pytest.approx(1.3 * day_shape(t + 600), rel=0.08)


def test_without_history_the_trend_extrapolates() -> None:
    fc = DemandForecaster()
    for m in range(30):  # a rising line: +0.1 per minute
        fc.observe(60.0 * m, 1.0 + 0.1 * m)
    near = fc.forecast(30 * 60.0, 60.0)
    far = fc.forecast(30 * 60.0, 600.0)
    assert near is not None and far is not None
    assert near > 3.5  # the level follows the line (with Holt's lag)
    assert far > near + 0.2  # the (damped) trend carries on rising


def test_one_cold_start_ahead_error_beats_persistence_on_a_noisy_day() -> None:
    fc = DemandForecaster()
    fc.learn(history(7, seed=1))
    rng = random.Random(2)
    horizon = 120.0
    errs_f: list[float] = []
    errs_p: list[float] = []
    preds: dict[int, float] = {}
    actual: dict[int, float] = {}
    for m in range(1440):
        t = m * 60.0
        v = day_shape(t) * rng.uniform(0.95, 1.05)
        actual[m] = v
        fc.observe(t, v)
        f = fc.forecast(t, horizon)
        assert f is not None
        preds[m + 2] = f
    for m in range(2, 1440):
        errs_f.append(abs(preds[m] - actual[m]) / actual[m])
        errs_p.append(abs(actual[m - 2] - actual[m]) / actual[m])
    mape_f = sum(errs_f) / len(errs_f)
    mape_p = sum(errs_p) / len(errs_p)
    assert mape_f < 0.06
    assert mape_f < mape_p


def test_bad_parameters_are_rejected() -> None:
    with pytest.raises(ValueError):
        DemandForecaster(bin_s=7.0)
    with pytest.raises(ValueError):
        DemandForecaster(alpha=0.0)


def test_a_burst_barely_moves_the_level_a_lasting_shift_does() -> None:
    """Robust Holt: a 5-minute burst at 3x the profile moves the level by a few
    clipped steps; an hour at 1.3x is followed as before."""
    def run(factor: float, minutes: int) -> float:
        fc = DemandForecaster()
        fc.learn(history(7, noise=0.05))
        rng = random.Random(3)
        t0 = 10 * 3600.0
        for m in range(30):  # half an hour as the profile says, with its noise
            t = t0 + 60 * m
            fc.observe(t, day_shape(t) * rng.uniform(0.95, 1.05))
        for m in range(30, 30 + minutes):
            t = t0 + 60 * m
            fc.observe(t, factor * day_shape(t) * rng.uniform(0.95, 1.05))
        t = t0 + 60 * (30 + minutes)
        fc.observe(t, day_shape(t))  # closes the last minute
        f = fc.forecast(t, 120.0)
        assert f is not None
        return f / day_shape(t + 120.0)

    burst = run(3.0, 5)
    assert burst < 1.35  # unclipped, the level would be about 2.5x
    plain = DemandForecaster(huber_k=1e9)  # the same smoothing without the clipping
    plain.learn(history(7, noise=0.05))
    t0 = 10 * 3600.0
    for m in range(35):
        t = t0 + 60 * m
        plain.observe(t, (3.0 if m >= 30 else 1.0) * day_shape(t))
    plain.observe(t0 + 35 * 60.0, day_shape(t0 + 35 * 60.0))
    f = plain.forecast(t0 + 35 * 60.0, 120.0)
    assert f is not None and f / day_shape(t0 + 37 * 60.0) > 1.8
    assert run(1.3, 60) == pytest.approx(1.3, rel=0.08)
