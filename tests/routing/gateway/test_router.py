"""The gateway's router over live replicas: versions, breakers, fallbacks, panic."""

from __future__ import annotations

from tokenplane.config.routing_schema import BreakerConfig, RoutingConfig, SplitConfig
from tokenplane.config.schema import BackendConfig
from tokenplane.routing.endpoint import BREAKER_CLOSED, BREAKER_OPEN, RouteRequest
from tokenplane.routing.gateway.replicas import LiveEndpoint, LiveView, breaker_from
from tokenplane.routing.gateway.router import GatewayRouter
from tokenplane.upstream.pool import Endpoint


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class NoTransport:
    async def send(self, req: object) -> object:
        raise AssertionError("routing tests send nothing")

    async def close(self) -> None:
        return None


def _live(spec: dict[str, list[tuple[str, str]]], breaker: BreakerConfig) -> LiveView:
    live = LiveView()
    for alias, eps in spec.items():
        for eid, version in eps:
            backend = BackendConfig(type="vllm", base_url="http://127.0.0.1:1", id=eid,
                                    model_version=version or None)
            ep = Endpoint(eid, backend, NoTransport(), alias)  # type: ignore[arg-type]
            live.add(LiveEndpoint(ep, alias, breaker_from(breaker), model_version=version))
    return live


def _router(live: LiveView, clock: Clock, **cfg: object) -> GatewayRouter:
    return GatewayRouter(RoutingConfig(**cfg), live, {"local": ["hosted"]}, clock)  # type: ignore[arg-type]


def test_idle_replicas_are_used_in_turn_and_load_counts() -> None:
    clock = Clock()
    live = _live({"local": [("a", ""), ("b", ""), ("c", "")]}, BreakerConfig())
    router = _router(live, clock)
    picks = []
    for i in range(6):
        got = router.pick("local", RouteRequest(f"r{i}"), None)
        assert got is not None
        picks.append(got[1].id)
    assert sorted(picks) == ["a", "a", "b", "b", "c", "c"]
    # the default profile weighs the prefill work in flight (uncached prompt tokens)
    live.by_id["a"].endpoint.in_flight = 3
    live.by_id["a"].endpoint.prompt_tokens_in_flight = 3000
    live.by_id["b"].endpoint.in_flight = 1
    live.by_id["b"].endpoint.prompt_tokens_in_flight = 1000
    got = router.pick("local", RouteRequest("x"), None)
    assert got is not None and got[1].id == "c"


def test_version_split_filters_replicas() -> None:
    clock = Clock()
    live = _live({"local": [("a", "v1"), ("b", "v1"), ("c", "v2")]}, BreakerConfig())
    router = _router(live, clock, splits={"local": SplitConfig(weights={"v1": 1, "v2": 1},
                                                               header="x-v",
                                                               header_versions={"new": "v2"})})
    req = RouteRequest("r", keys={"x-v": "new"})
    version = router.version("local", req)
    assert version == "v2"
    for _ in range(3):
        got = router.pick("local", req, version)
        assert got is not None and got[1].id == "c"


def test_open_breaker_is_skipped_then_probed_once_then_readmitted() -> None:
    clock = Clock()
    live = _live({"local": [("a", ""), ("b", "")]},
                 BreakerConfig(consecutive_failures=2, open_s=5, probe_successes=1))
    router = _router(live, clock)
    a = live.by_id["a"]
    router.record(a.endpoint, 503)
    router.record(a.endpoint, 502)
    assert a.snapshot(clock()).breaker_state == BREAKER_OPEN
    for i in range(4):
        got = router.pick("local", RouteRequest(f"r{i}"), None)
        assert got is not None and got[1].id == "b"
    clock.t += 5  # half-open: one probe
    live.by_id["b"].endpoint.in_flight = 5  # so the probe goes to a
    live.by_id["b"].endpoint.prompt_tokens_in_flight = 5000
    got = router.pick("local", RouteRequest("probe"), None)
    assert got is not None and got[1].id == "a"
    assert a.snapshot(clock()).breaker_state == BREAKER_OPEN  # probe out: nothing else
    got = router.pick("local", RouteRequest("next"), None)
    assert got is not None and got[1].id == "b"
    router.record(a.endpoint, None)  # the probe succeeded
    assert a.snapshot(clock()).breaker_state == BREAKER_CLOSED


def test_cancelled_probe_gives_its_slot_back() -> None:
    clock = Clock()
    live = _live({"local": [("a", "")]}, BreakerConfig(consecutive_failures=1, open_s=1))
    router = _router(live, clock)
    a = live.by_id["a"]
    router.record(a.endpoint, 503)
    clock.t += 1
    assert router.pick("local", RouteRequest("p1"), None) is not None
    assert not a.available(clock())
    router.record(a.endpoint, None, cancelled=True)
    assert a.available(clock())


def test_fallback_alias_then_panic_then_nothing() -> None:
    clock = Clock()
    live = _live({"local": [("a", ""), ("b", "")], "hosted": [("api", "")]},
                 BreakerConfig(consecutive_failures=1, open_s=60))
    router = _router(live, clock)
    for eid in ("a", "b"):
        live.by_id[eid].healthy = False
    got = router.pick("local", RouteRequest("r"), None)
    assert got is not None and got == ("hosted", live.by_id["api"].endpoint)
    live.by_id["api"].healthy = False
    got = router.pick("local", RouteRequest("r2"), None, exclude=["api"])
    assert got is not None and got[0] == "local"  # panic: unhealthy but breaker closed
    router.record(live.by_id["a"].endpoint, 503)
    router.record(live.by_id["b"].endpoint, 503)
    assert router.pick("local", RouteRequest("r3"), None, exclude=["api"]) is None


def test_tried_replicas_are_excluded_on_retry() -> None:
    clock = Clock()
    live = _live({"local": [("a", ""), ("b", "")], "hosted": [("api", "")]}, BreakerConfig())
    router = _router(live, clock)
    got = router.pick("local", RouteRequest("r"), None, exclude=["a"])
    assert got is not None and got[1].id == "b"
    got = router.pick("local", RouteRequest("r"), None, exclude=["a", "b"])
    assert got is not None and got[1].id == "api"


def test_config_refuses_unknown_fallbacks_classes_and_profiles() -> None:
    import pytest

    from tokenplane.compose.config_file import validate_config

    def cfg(**extra: object) -> dict[str, object]:
        model: dict[str, object] = {"alias": "m", "backends": [{"type": "sim"}]}
        model.update(extra.pop("model", {}))  # type: ignore[arg-type]
        return {"models": [model], **extra}

    with pytest.raises(Exception, match="fallback"):
        validate_config(cfg(model={"fallbacks": ["nope"]}))
    with pytest.raises(Exception, match="unknown SLO classes"):
        validate_config(cfg(scheduling={"by_app": {"x": "gold"}}))
    with pytest.raises(Exception, match=r"scheduling\.classes\.gold\.speed: unknown field"):
        validate_config(cfg(scheduling={"classes": {"gold": {"speed": 1}}}))
    with pytest.raises(Exception, match=r"scheduling\.classes\.gold\.ttft_s"):
        validate_config(cfg(scheduling={"classes": {"gold": {"ttft_s": -1}}}))
    with pytest.raises(Exception, match=r"scheduling\.classes\.gold\.gate_fraction"):
        validate_config(cfg(scheduling={"classes": {"gold": {"gate_fraction": 0}}}))
    with pytest.raises(Exception, match=r"routing.profile: unknown routing profile 'nonesuch'; "
                       r"known: tokenplane, least-requests, "):
        validate_config(cfg(routing={"profile": "nonesuch"}))
    with pytest.raises(Exception, match=r"routing.models: m: unknown routing profile 'x'"):
        validate_config(cfg(routing={"models": {"m": "x"}}))
    with pytest.raises(Exception, match="unknown scorer 'nope'"):
        validate_config(cfg(routing={"profile": {"scorers": ["nope"]}}))


def test_snapshot_counts_gateway_load_and_trusts_an_engine_with_more_slots() -> None:
    from tokenplane.routing.engine_metrics import EngineMetrics
    from tokenplane.scheduling.gate import SaturationGate

    clock = Clock()
    live = _live({"local": [("a", "")]}, BreakerConfig())
    a = live.by_id["a"]
    gate = SaturationGate()
    a.endpoint.in_flight = 300  # more than the default 256 slots, nothing scraped yet
    s = a.snapshot(clock())
    assert (s.num_running, s.queue_depth, s.inflight_requests) == (256, 44, 300)
    assert not gate.accepts(s)
    a.scraped = EngineMetrics(num_running=300, num_waiting=0, kv_usage=0.5)
    s = a.snapshot(clock())  # the engine runs them all and queues none: it has room
    assert s.queue_depth == 0 and gate.accepts(s)
    a.scraped = EngineMetrics(num_running=300, num_waiting=9, kv_usage=0.5)
    assert not gate.accepts(a.snapshot(clock()))
    a.slots_known, a.max_num_seqs = True, 4  # configured slots are a hard limit
    a.scraped = EngineMetrics(num_running=4, num_waiting=0, kv_usage=0.1)
    a.endpoint.in_flight = 4
    assert not gate.accepts(a.snapshot(clock()))
