"""A pool's snapshot from what the gateway counts: token tallies turned into rates
between rounds, decode tokens in flight, the scheduler's backlog, the SLOs that select
the alias."""

from __future__ import annotations

from tokenplane.autoscale.gateway.signals import PoolSignals
from tokenplane.autoscale.model import ReplicaView
from tokenplane.config.schema import ModelConfig
from tokenplane.routing.endpoint import RouteRequest
from tokenplane.routing.gateway.replicas import LiveView
from tokenplane.scheduling.scheduler import GatewayScheduler, QueuedRequest
from tokenplane.scheduling.slo import default_slo_classes
from tokenplane.slo.budget import BudgetState
from tokenplane.slo.evaluator import SliStatus
from tokenplane.upstream.inprocess import InProcessTransport
from tokenplane.upstream.pool import Endpoint, Pool


def _pool() -> Pool:
    model = ModelConfig.model_validate({"alias": "chat", "backends": [{"type": "sim"}]})
    return Pool(model)


def _status(slo: str, burn: dict[float, float], remaining: float) -> SliStatus:
    return SliStatus(slo, "ttft", 1.0, 0.99, 86400.0,
                     BudgetState(100, 1, 0.99, 1.0, 0.0, remaining), burn, ())


def test_tallies_become_rates_between_rounds() -> None:
    pool = _pool()
    pool.endpoints.append(Endpoint("sim/0", pool.model.backends[0],
                                   InProcessTransport(None),  # type: ignore[arg-type]
                                   "chat", decode_tokens_in_flight=300))
    sig = PoolSignals("chat", pool, LiveView(), None, None, [], lambda: 0.0)
    replicas = (ReplicaView("sim/0", "serving", 0.0),)
    first = sig.snapshot(replicas, 100.0)
    assert (first.prompt_tokens_per_s, first.requests_per_s) == (0.0, 0.0)  # no interval yet
    assert first.output_tokens_in_flight == 300
    pool.admitted_requests += 20
    pool.admitted_prompt_tokens += 50_000
    pool.delivered_output_tokens += 4_000
    snap = sig.snapshot(replicas, 110.0)
    assert (snap.requests_per_s, snap.prompt_tokens_per_s, snap.output_tokens_per_s) == (
        2.0, 5_000.0, 400.0)


def test_the_slos_selecting_the_alias_give_the_burn() -> None:
    rows = [_status("chat-ttft", {300.0: 3.0, 3600.0: 1.5}, 0.6),
            _status("chat-avail", {300.0: 0.5, 3600.0: 9.0}, 0.2),
            _status("other-model", {300.0: 50.0}, -1.0)]
    sig = PoolSignals("chat", _pool(), LiveView(), None, lambda: rows,
                      ["chat-ttft", "chat-avail"], lambda: 0.0)
    snap = sig.snapshot((), 1.0)
    # the shortest window's burn (the one that moves first), the lowest budget left
    assert (snap.slo_burn, snap.slo_budget_left) == (3.0, 0.2)


def test_the_scheduler_backlog() -> None:
    classes = default_slo_classes()
    sched = GatewayScheduler(router=None)  # type: ignore[arg-type]
    for i, arrival in enumerate((10.0, 12.0, 13.0)):
        shed = sched.submit(QueuedRequest(RouteRequest(f"r{i}", prompt_tokens=100,
                                                       predicted_output=50),
                                          classes["interactive"], arrival), arrival)
        assert shed is None
    assert sched.backlog(20.0) == (3, 450, 10.0)
