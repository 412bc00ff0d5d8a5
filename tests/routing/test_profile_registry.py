"""Profiles built from config dicts by name, with weights and clamping."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tokenplane.routing.endpoint import EndpointState, RouteRequest
from tokenplane.routing.plugins import RoutingContext
from tokenplane.routing.profile import NoEndpointError
from tokenplane.routing.profiles import PROFILES, build_profile
from tokenplane.routing.registry import default_registry


class OverScorer:
    """A plugin that misbehaves: scores outside [0, 1]."""

    def score(self, req: RouteRequest, endpoints: Sequence[EndpointState]) -> dict[str, float]:
        return {e.id: (5.0 if e.id == "a" else -3.0) for e in endpoints}


def test_build_from_config_and_weights() -> None:
    reg = default_registry()
    ctx = RoutingContext()
    prof = reg.build_profile(
        {
            "name": "t",
            "filters": ["healthy"],
            "scorers": [{"name": "queue_depth", "weight": 1.0}, {"name": "kv_cache", "weight": 3}],
            "picker": "max_score",
        },
        ctx,
    )
    eps = [
        EndpointState("a", num_waiting=0, kv_usage=0.9),
        EndpointState("b", num_waiting=5, kv_usage=0.1),
        EndpointState("c", healthy=False),
    ]
    # a: 1 + 3*0.1 = 1.3 ; b: 0 + 3*0.9 = 2.7
    assert prof.route(RouteRequest("r"), eps) == "b"


def test_scores_are_clamped() -> None:
    reg = default_registry()
    reg.add_scorer("over", lambda p, c: OverScorer())
    ctx = RoutingContext()
    prof = reg.build_profile(
        {"scorers": [{"name": "over", "weight": 1.0}, {"name": "kv_cache", "weight": 1.5}]}, ctx
    )
    eps = [EndpointState("a", kv_usage=1.0), EndpointState("b", kv_usage=0.0)]
    # unclamped a would get 5; clamped a = 1 + 0, b = 0 + 1.5
    assert prof.route(RouteRequest("r"), eps) == "b"


def test_unknown_plugin_names_fail_clearly() -> None:
    reg = default_registry()
    with pytest.raises(ValueError, match="unknown scorer 'nope'"):
        reg.build_profile({"scorers": ["nope"]}, RoutingContext())
    with pytest.raises(ValueError, match="unknown picker"):
        reg.build_profile({"picker": "nope"}, RoutingContext())
    with pytest.raises(ValueError, match="plugin entry"):
        reg.build_profile({"filters": [3]}, RoutingContext())
    with pytest.raises(ValueError, match=r"unknown routing profile .nope.; known: tokenplane, "):
        build_profile("nope", RoutingContext())


def test_no_endpoint_left() -> None:
    prof = build_profile("least-requests", RoutingContext())
    with pytest.raises(NoEndpointError):
        prof.route(RouteRequest("r"), [EndpointState("a", healthy=False)])


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_builtin_profile_routes(name: str) -> None:
    ctx = RoutingContext(seed=1)
    prof = build_profile(name, ctx)
    eps = [EndpointState(f"e{i}", inflight_requests=i) for i in range(4)]
    for k in range(10):
        eid = prof.route(RouteRequest(f"r{k}", prompt_tokens=100, block_hashes=(k, k + 1)), eps)
        assert eid in {e.id for e in eps}


def test_route_learns_prefix_and_choose_does_not() -> None:
    ctx = RoutingContext()
    prof = build_profile("tokenplane", ctx)
    eps = [EndpointState("a"), EndpointState("b")]
    req = RouteRequest("r", prompt_tokens=320, block_hashes=tuple(range(20)))
    prof.choose(req, eps)
    assert ctx.prefix_index.size("a") + ctx.prefix_index.size("b") == 0
    first = prof.route(req, eps)
    assert ctx.prefix_index.size(first) == 20
    # the follow-up turn sticks to the replica that holds the prefix
    follow = RouteRequest("r2", prompt_tokens=400, block_hashes=tuple(range(25)))
    assert prof.route(follow, eps) == first
    assert ctx.last_matched_blocks == 20


@pytest.mark.parametrize(
    ("warm_prefill_in_flight", "expected"),
    [
        # the follow-up turn reuses 4,000 tokens (250 blocks) of a 5,000-token prompt;
        # tokenplane's profile weighs a cached token 8x (cache_weight 8): it stays on
        # the warm replica until the prefill queued there exceeds ~8 x 4,000 - 4,000
        (0, "warm"),
        (8_000, "warm"),  # a cache_weight of 1 or 2 would already move it
        (20_000, "warm"),
        (27_000, "warm"),
        (40_000, "cold"),  # queueing there is now worse than a recompute elsewhere
    ],
)
def test_tokenplane_profile_keeps_a_conversation_on_its_replica(
    warm_prefill_in_flight: int, expected: str
) -> None:
    ctx = RoutingContext(block_size=16)
    prof = build_profile("tokenplane", ctx)
    history = tuple(range(1000, 1250))
    ctx.record(RouteRequest("turn1", prompt_tokens=4000, block_hashes=history), "warm")
    eps = [
        EndpointState(
            "warm",
            inflight_requests=2,
            inflight_prefill_tokens=warm_prefill_in_flight,
            prefill_s_per_token=67e-6,
            token_capacity=60_000,
        ),
        EndpointState("cold", prefill_s_per_token=67e-6, token_capacity=60_000),
    ]
    turn2 = RouteRequest("turn2", prompt_tokens=5000, block_hashes=(*history, *range(9, 70)))
    assert prof.choose(turn2, eps) == expected
