"""The one snapshot builder: every field filled from spec, engine and live figures."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import pytest

from tokenplane.routing.endpoint import BREAKER_OPEN, EndpointState
from tokenplane.routing.snapshot import (
    DEFAULT_PREFILL_S_PER_TOKEN,
    EngineFigures,
    PrefillRate,
    ReplicaSpec,
    cost_per_token,
    replica_snapshot,
)


def test_every_field_comes_from_its_source() -> None:
    spec = ReplicaSpec("r1", pool="llama", model_version="v2", max_num_seqs=64,
                       max_waiting=5, token_capacity=9000, prefill_capacity=4000,
                       cost_per_token=2e-6)
    snap = replica_snapshot(
        spec, EngineFigures(num_running=3, num_waiting=2, kv_usage=0.4),
        inflight_requests=4, inflight_prefill_tokens=1200, inflight_decode_tokens=300,
        prefill_s_per_token=5e-5, healthy=False, breaker_state=BREAKER_OPEN,
    )
    assert snap == EndpointState(
        id="r1", pool="llama", healthy=False, num_running=4, num_waiting=2, kv_usage=0.4,
        inflight_requests=4, inflight_prefill_tokens=1200, inflight_decode_tokens=300,
        max_num_seqs=64, max_waiting=5, token_capacity=9000, prefill_capacity=4000,
        prefill_s_per_token=5e-5, cost_per_token=2e-6, model_version="v2",
        breaker_state=BREAKER_OPEN,
    )
    # no field of EndpointState is left to its default by the builder
    names = {f.name for f in dataclasses.fields(EndpointState)}
    assert names == {f.name for f in dataclasses.fields(snap)}


def test_unknown_engine_and_guessed_slots() -> None:
    spec = ReplicaSpec("r", max_num_seqs=4, slots_known=False)
    snap = replica_snapshot(spec, None, inflight_requests=2, inflight_prefill_tokens=0,
                            inflight_decode_tokens=0, prefill_s_per_token=1e-4)
    assert (snap.num_running, snap.num_waiting, snap.kv_usage) == (2, 0, 0.0)
    # an engine running more than the guess with nothing waiting evidently has more slots
    busy = replica_snapshot(spec, EngineFigures(9, 0, 0.5), inflight_requests=9,
                            inflight_prefill_tokens=0, inflight_decode_tokens=0,
                            prefill_s_per_token=1e-4)
    assert busy.max_num_seqs == 10
    known = replica_snapshot(dataclasses.replace(spec, slots_known=True),
                             EngineFigures(9, 0, 0.5), inflight_requests=9,
                             inflight_prefill_tokens=0, inflight_decode_tokens=0,
                             prefill_s_per_token=1e-4)
    assert known.max_num_seqs == 4


def test_cost_per_token_is_the_mean_price_per_token() -> None:
    assert cost_per_token(Decimal("0.50"), Decimal("1.50")) == pytest.approx(1e-6)
    assert cost_per_token("2.5", "10") == pytest.approx(6.25e-6)
    assert cost_per_token(0, 0) == 0.0


def test_prefill_rate_from_ttft() -> None:
    rate = PrefillRate()
    assert rate.value == DEFAULT_PREFILL_S_PER_TOKEN
    rate.observe(0.5, 100)  # too few tokens: mostly overhead, not counted
    rate.observe(0.0, 1000)
    assert rate.samples == 0
    rate.observe(0.2, 2000)  # 1e-4 s/token; the prior counts as one sample
    assert rate.value == pytest.approx((7e-5 + 1e-4) / 2)
    for _ in range(200):
        rate.observe(0.1, 2000)  # 5e-5 s/token from now on
    assert rate.value == pytest.approx(5e-5, rel=1e-3)
    assert PrefillRate(prior=67e-6).value == 67e-6
