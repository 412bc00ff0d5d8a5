"""Percentiles, Jain's index, the prefix-cache oracle, goodput."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenplane.scheduling.slo import SloClass
from tokenplane.sim.cluster import RequestRecord
from tokenplane.sim.metrics import (
    goodput,
    jain_index,
    lru_prefix_hit_rate,
    oracle_prefix_hit_rate,
    percentile,
    summarize,
)
from tokenplane.sim.workload import SimRequest


def test_percentile() -> None:
    assert math.isnan(percentile([], 50))
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile(list(map(float, range(1, 101))), 99) == 99.0
    assert percentile([5.0], 99) == 5.0


@given(st.lists(st.floats(0, 1e6), min_size=1, max_size=50))
def test_jain_bounds(xs: list[float]) -> None:
    j = jain_index(xs)
    assert 1.0 / len(xs) - 1e-9 <= j <= 1.0 + 1e-9


def test_jain_values() -> None:
    assert jain_index([5, 5, 5, 5]) == pytest.approx(1.0)
    assert jain_index([1, 0, 0, 0]) == pytest.approx(0.25)


def _rec(rid: str, t: float, prompt: int, hashes: tuple[int, ...], **kw: float) -> RequestRecord:
    req = SimRequest(rid, t, prompt, 10, hashes, "t0", "interactive")
    rec = RequestRecord(req=req, slo=SloClass("interactive", ttft_s=1.0), predicted=10)
    for k, v in kw.items():
        setattr(rec, k, v)
    return rec


def test_oracle_hit_rate() -> None:
    recs = [
        _rec("a", 0.0, 64, (1, 2, 3, 4)),
        _rec("b", 1.0, 64, (1, 2, 9, 9)),  # 2 blocks cached
        _rec("c", 2.0, 64, (1, 2, 3, 4)),  # 3 blocks (the last token is never cached)
    ]
    assert oracle_prefix_hit_rate(recs, 16) == pytest.approx((0 + 32 + 48) / 192)


def test_summarize_attainment_and_shed() -> None:
    ok = _rec("a", 0.0, 100, (), first_token=0.5, finish=1.0, output_tokens=10)
    slow = _rec("b", 0.0, 100, (), first_token=2.0, finish=3.0, output_tokens=10)
    shed = _rec("c", 0.0, 100, (), shed=True)
    s = summarize([ok, slow, shed], span_s=10.0, block_size=16)
    assert s["slo_attainment"] == pytest.approx(1 / 3)
    assert s["shed"] == 1 and s["completed"] == 2
    assert s["rate_rps"] == pytest.approx(0.3)
    assert s["per_class"]["interactive"]["requests"] == 3
    assert s["oracle_prefix_hit_rate"] is None


def test_goodput_picks_highest_passing_rate() -> None:
    pts = [
        {"rate_rps": 1.0, "slo_attainment": 0.99},
        {"rate_rps": 2.0, "slo_attainment": 0.92},
        {"rate_rps": 3.0, "slo_attainment": 0.5},
    ]
    assert goodput(pts) == 2.0
    assert goodput([{"rate_rps": 1.0, "slo_attainment": 0.1}]) == 0.0


def test_lru_oracle_matches_unlimited_when_big_and_loses_when_small() -> None:
    reqs = [(64, (1, 2, 3, 4)), (64, (5, 6, 7, 8)), (64, (1, 2, 3, 4))]
    assert lru_prefix_hit_rate(reqs, 16, 1000) == pytest.approx(48 / 192)
    # capacity 4: the second request evicts the first one's blocks
    assert lru_prefix_hit_rate(reqs, 16, 4) == 0.0
    recs = [_rec(f"r{i}", float(i), p, h) for i, (p, h) in enumerate(reqs)]
    assert oracle_prefix_hit_rate(recs, 16) == lru_prefix_hit_rate(reqs, 16, 10**9)
