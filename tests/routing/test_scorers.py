"""Each scorer on hand-built endpoint snapshots (table-driven)."""

from __future__ import annotations

import pytest

from tokenplane.routing.endpoint import EndpointState, RouteRequest
from tokenplane.routing.plugins import RoutingContext, Scorer, clamp01, inverse_minmax
from tokenplane.routing.prefix_scorers import PrefixAffinityScorer, StickyUntilSaturatedScorer
from tokenplane.routing.scorers import (
    CostScorer,
    KvCacheScorer,
    OutstandingRequestsScorer,
    QueueDepthScorer,
    SessionAffinityScorer,
    TokenLoadScorer,
)

REQ = RouteRequest("r1", prompt_tokens=1000, predicted_output=100)

CASES: list[tuple[str, Scorer, list[EndpointState], dict[str, float]]] = [
    (
        "queue depth: shortest queue wins",
        QueueDepthScorer(),
        [EndpointState("a", num_waiting=0), EndpointState("b", num_waiting=4),
         EndpointState("c", num_waiting=2)],
        {"a": 1.0, "b": 0.0, "c": 0.5},
    ),
    (
        "queue depth counts gateway in-flight not yet running",
        QueueDepthScorer(),
        [EndpointState("a", num_running=2, inflight_requests=6),
         EndpointState("b", num_running=2, inflight_requests=2)],
        {"a": 0.0, "b": 1.0},
    ),
    (
        "queue depth: all equal -> all 1",
        QueueDepthScorer(),
        [EndpointState("a", num_waiting=3), EndpointState("b", num_waiting=3)],
        {"a": 1.0, "b": 1.0},
    ),
    (
        "outstanding requests",
        OutstandingRequestsScorer(),
        [EndpointState("a", inflight_requests=10), EndpointState("b", inflight_requests=0)],
        {"a": 0.0, "b": 1.0},
    ),
    (
        "kv cache: free fraction",
        KvCacheScorer(),
        [EndpointState("a", kv_usage=0.25), EndpointState("b", kv_usage=1.5)],
        {"a": 0.75, "b": 0.0},
    ),
    (
        "token load against capacity",
        TokenLoadScorer(),
        [EndpointState("a", inflight_prefill_tokens=500, inflight_decode_tokens=500,
                       token_capacity=2000),
         EndpointState("b", inflight_prefill_tokens=4000, token_capacity=2000)],
        {"a": 0.5, "b": 0.0},
    ),
    (
        "cost: cheapest wins",
        CostScorer(),
        [EndpointState("a", cost_per_token=1.0), EndpointState("b", cost_per_token=3.0),
         EndpointState("c", cost_per_token=2.0)],
        {"a": 1.0, "b": 0.0, "c": 0.5},
    ),
]


@pytest.mark.parametrize(("name", "scorer", "eps", "want"), CASES, ids=[c[0] for c in CASES])
def test_load_scorers(
    name: str, scorer: Scorer, eps: list[EndpointState], want: dict[str, float]
) -> None:
    got = scorer.score(REQ, eps)
    assert got == pytest.approx(want)
    assert all(0.0 <= v <= 1.0 for v in got.values())


def test_session_affinity() -> None:
    ctx = RoutingContext()
    eps = [EndpointState("a"), EndpointState("b")]
    req = RouteRequest("r1", session_id="s1")
    sc = SessionAffinityScorer(ctx)
    assert sc.score(req, eps) == {"a": 0.0, "b": 0.0}
    ctx.record(req, "b")
    assert sc.score(RouteRequest("r2", session_id="s1"), eps) == {"a": 0.0, "b": 1.0}
    assert sc.score(RouteRequest("r3", session_id="s2"), eps) == {"a": 0.0, "b": 0.0}
    assert sc.score(RouteRequest("r4"), eps) == {"a": 0.0, "b": 0.0}


def test_session_table_is_bounded() -> None:
    ctx = RoutingContext(max_sessions=2)
    for i in range(3):
        ctx.record(RouteRequest(f"r{i}", session_id=f"s{i}"), "a")
    assert list(ctx.sessions) == ["s1", "s2"]


def test_prefix_affinity_scores_fraction_matched() -> None:
    ctx = RoutingContext()
    eps = [EndpointState("a"), EndpointState("b"), EndpointState("c")]
    ctx.record(RouteRequest("old", block_hashes=(1, 2, 3, 4)), "a")
    ctx.record(RouteRequest("old2", block_hashes=(1, 9)), "b")
    got = PrefixAffinityScorer(ctx).score(RouteRequest("new", block_hashes=(1, 2, 3, 5)), eps)
    assert got == pytest.approx({"a": 0.75, "b": 0.25, "c": 0.0})
    assert PrefixAffinityScorer(ctx).score(RouteRequest("x"), eps) == {"a": 0, "b": 0, "c": 0}


def _sticky_case(
    inflight_warm: int, inflight_cold: int, cache_weight: float = 1.0
) -> dict[str, float]:
    ctx = RoutingContext(block_size=16)
    hashes = tuple(range(100, 150))  # 50 blocks = 800 tokens
    ctx.record(RouteRequest("turn1", block_hashes=hashes), "warm")
    eps = [
        EndpointState("warm", inflight_prefill_tokens=inflight_warm, prefill_s_per_token=1e-4),
        EndpointState("cold", inflight_prefill_tokens=inflight_cold, prefill_s_per_token=1e-4),
    ]
    req = RouteRequest("turn2", prompt_tokens=1000, block_hashes=(*hashes, 999))
    return StickyUntilSaturatedScorer(ctx, floor_s=0.0, cache_weight=cache_weight).score(req, eps)


@pytest.mark.parametrize(
    ("warm_load", "cold_load", "cache_weight", "winner"),
    [
        (0, 0, 1.0, "warm"),  # cache saves 800 tokens
        (700, 0, 1.0, "warm"),  # 700 + 200 < 0 + 1000
        (900, 0, 1.0, "cold"),  # 900 + 200 > 1000: queueing outweighs the cache
        (5000, 4500, 1.0, "warm"),
        # cache_weight w: warm = max(0, queue + 1000 - w x 800), cold = queue + 1000
        (1500, 0, 2.0, "warm"),  # 1500 + 1000 - 1600 = 900 < 1000
        (2000, 0, 2.0, "cold"),  # 2000 - 600 = 1400 > 1000
        (5000, 0, 8.0, "warm"),  # 5000 + 1000 - 6400 < 0 -> 0 < 1000
        (6500, 0, 8.0, "cold"),  # 6500 - 5400 = 1100 > 1000
        (9000, 3000, 8.0, "warm"),  # 9000 - 5400 = 3600 < 3000 + 1000
    ],
)
def test_sticky_until_saturated(
    warm_load: int, cold_load: int, cache_weight: float, winner: str
) -> None:
    scores = _sticky_case(warm_load, cold_load, cache_weight)
    assert scores[winner] == 1.0
    loser = "cold" if winner == "warm" else "warm"
    assert scores[loser] < 1.0


def test_clamp_and_minmax() -> None:
    assert clamp01(float("nan")) == 0.0
    assert clamp01(-1) == 0.0 and clamp01(2) == 1.0 and clamp01(0.3) == 0.3
    assert inverse_minmax({}) == {}
