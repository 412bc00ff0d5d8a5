"""Filters and pickers, including SGLang's cache-aware policy."""

from __future__ import annotations

from collections import Counter

import pytest

from tokenplane.routing.endpoint import (
    BREAKER_HALF_OPEN,
    BREAKER_OPEN,
    EndpointState,
    RouteRequest,
)
from tokenplane.routing.filters import (
    HealthyFilter,
    ModelVersionFilter,
    PoolFilter,
    UnsaturatedFilter,
)
from tokenplane.routing.pickers import (
    MaxScorePicker,
    RandomPicker,
    RoundRobinPicker,
    SglangCacheAwarePicker,
)
from tokenplane.routing.plugins import RoutingContext

EPS = [
    EndpointState("a", pool="local", model_version="v1"),
    EndpointState("b", pool="local", model_version="v2", healthy=False),
    EndpointState("c", pool="hosted", model_version="v1", breaker_state=BREAKER_OPEN),
    EndpointState("d", pool="hosted", model_version="v2", breaker_state=BREAKER_HALF_OPEN),
]


@pytest.mark.parametrize(
    ("flt", "req", "want"),
    [
        (HealthyFilter(), RouteRequest("r"), ["a", "d"]),
        (PoolFilter(), RouteRequest("r", pool="hosted"), ["c", "d"]),
        (PoolFilter(), RouteRequest("r"), ["a", "b", "c", "d"]),
        (ModelVersionFilter(), RouteRequest("r", model_version="v2"), ["b", "d"]),
        (ModelVersionFilter(), RouteRequest("r"), ["a", "b", "c", "d"]),
    ],
)
def test_filters(flt: HealthyFilter | PoolFilter | ModelVersionFilter, req: RouteRequest,
                 want: list[str]) -> None:
    assert [e.id for e in flt.filter(req, EPS)] == want


def test_unsaturated_filter_keeps_all_when_all_saturated() -> None:
    f = UnsaturatedFilter(kv_limit=0.9)
    eps = [EndpointState("a", kv_usage=0.95), EndpointState("b", kv_usage=0.5)]
    assert [e.id for e in f.filter(RouteRequest("r"), eps)] == ["b"]
    full = [EndpointState("a", kv_usage=0.95), EndpointState("b", num_waiting=8, max_waiting=8)]
    assert [e.id for e in f.filter(RouteRequest("r"), full)] == ["a", "b"]


def test_max_score_picker_and_ties() -> None:
    ctx = RoutingContext(seed=1)
    p = MaxScorePicker(ctx)
    assert p.pick(RouteRequest("r"), {"a": 0.2, "b": 0.9}, []) == "b"
    counts = Counter(p.pick(RouteRequest("r"), {"a": 1.0, "b": 1.0}, []) for _ in range(400))
    assert set(counts) == {"a", "b"} and min(counts.values()) > 120
    with pytest.raises(LookupError):
        p.pick(RouteRequest("r"), {}, [])


def test_round_robin_and_random() -> None:
    rr = RoundRobinPicker()
    scored = {"c": 0.0, "a": 0.0, "b": 0.0}
    assert [rr.pick(RouteRequest("r"), scored, []) for _ in range(4)] == ["a", "b", "c", "a"]
    rnd = RandomPicker(RoutingContext(seed=3))
    seq1 = [rnd.pick(RouteRequest("r"), scored, []) for _ in range(20)]
    rnd2 = RandomPicker(RoutingContext(seed=3))
    assert seq1 == [rnd2.pick(RouteRequest("r"), scored, []) for _ in range(20)]
    assert set(seq1) == {"a", "b", "c"}


def _sglang(eps: list[EndpointState], req: RouteRequest, ctx: RoutingContext) -> str:
    return SglangCacheAwarePicker(ctx).pick(req, {e.id: 0.0 for e in eps}, eps)


def test_sglang_imbalanced_goes_to_shortest_queue() -> None:
    ctx = RoutingContext()
    ctx.record(RouteRequest("old", block_hashes=(1, 2, 3)), "a")
    req = RouteRequest("r", block_hashes=(1, 2, 3))
    # 100 - 10 > 64 and 100 > 1.5 * 10: imbalanced
    eps = [EndpointState("a", inflight_requests=100), EndpointState("b", inflight_requests=10)]
    assert _sglang(eps, req, ctx) == "b"
    # absolute gap 60 <= 64: balanced, cache wins
    eps = [EndpointState("a", inflight_requests=70), EndpointState("b", inflight_requests=10)]
    assert _sglang(eps, req, ctx) == "a"
    # relative 100 <= 1.5 * 80: balanced
    eps = [EndpointState("a", inflight_requests=100), EndpointState("b", inflight_requests=80)]
    assert _sglang(eps, req, ctx) == "a"


def test_sglang_cache_threshold_and_smallest_tree() -> None:
    ctx = RoutingContext()
    ctx.record(RouteRequest("o1", block_hashes=(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)), "a")
    ctx.record(RouteRequest("o2", block_hashes=(50, 51)), "b")
    eps = [EndpointState("a"), EndpointState("b"), EndpointState("c")]
    # 4 of 10 blocks match on a: 0.4 > 0.3 -> a
    assert _sglang(eps, RouteRequest("r", block_hashes=(1, 2, 3, 4, 0, 0, 0, 0, 0, 0)), ctx) == "a"
    # 2 of 10 match: 0.2 <= 0.3 -> smallest tree (c is empty)
    assert _sglang(eps, RouteRequest("r", block_hashes=(1, 2, 0, 0, 0, 0, 0, 0, 0, 0)), ctx) == "c"
