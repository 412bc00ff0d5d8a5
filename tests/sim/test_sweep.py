"""Goodput bisection: bracket, precision, and the cases it cannot refine."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.sim.sweep import refine_goodput

BASE_RPS = 5.0


def point(load: float, knee: float) -> dict[str, Any]:
    """Attainment falls linearly through 0.9 at ``knee``."""
    return {"load": load, "rate_rps": BASE_RPS * load, "slo_attainment": 0.9 - (load - knee) / 20}


@settings(max_examples=100, deadline=None)
@given(knee=st.floats(min_value=6.01, max_value=11.99), tol=st.sampled_from([0.05, 0.01, 0.002]))
def test_bisection_brackets_the_knee_to_the_tolerance(knee: float, tol: float) -> None:
    coarse = [point(x, knee) for x in (4.0, 6.0, 12.0, 14.0)]
    calls: list[float] = []

    def evaluate(load: float) -> dict[str, Any]:
        calls.append(load)
        return point(load, knee)

    est = refine_goodput(coarse, evaluate, rel_tol=tol, max_probes=50)
    assert est.load_fail is not None
    assert est.load_pass <= knee < est.load_fail
    assert est.rel_precision is not None and est.rel_precision <= tol
    assert est.goodput_rps == pytest.approx(BASE_RPS * est.load_pass)
    assert len(est.probes) == len(calls)
    assert all(6.0 < c < 12.0 for c in calls)


def test_cases_that_cannot_be_refined() -> None:
    def never(load: float) -> dict[str, Any]:
        raise AssertionError("no probe expected")

    nothing_passes = [point(x, 1.0) for x in (4.0, 6.0)]
    est = refine_goodput(nothing_passes, never)
    assert est.goodput_rps == 0.0 and est.rel_precision is None
    all_pass = [point(x, 100.0) for x in (4.0, 6.0)]
    est = refine_goodput(all_pass, never)
    assert est.goodput_rps == BASE_RPS * 6.0 and est.load_fail is None
    with pytest.raises(ValueError):
        refine_goodput(all_pass, never, rel_tol=0.0)


def test_probe_budget_caps_the_work() -> None:
    est = refine_goodput(
        [point(x, 7.3) for x in (6.0, 12.0)], lambda load: point(load, 7.3),
        rel_tol=1e-6, max_probes=3,
    )
    assert len(est.probes) == 3
    assert est.load_pass <= 7.3 < (est.load_fail or 0.0)
