"""Budget-protecting admission: the pure policy (engage, hold, release with
hysteresis), the scheduler's restriction of a class, and the same policy in the
simulated cluster, where the interactive traffic it protects gets what batch yields."""

from __future__ import annotations

import random

import pytest

from tokenplane.engine.profiles import get_profile
from tokenplane.routing.endpoint import EndpointState, RouteRequest
from tokenplane.routing.plugins import RoutingContext
from tokenplane.routing.profiles import DEFAULT_PROFILE, build_profile
from tokenplane.scheduling.scheduler import ClassRestriction, GatewayScheduler, QueuedRequest
from tokenplane.scheduling.slo import SloClass
from tokenplane.sim.cluster import ClusterConfig, ClusterSim, builtin_policies
from tokenplane.sim.traces import TraceRequest
from tokenplane.sim.workload import WorkloadRules, assign
from tokenplane.slo.evaluator import SloEvaluator
from tokenplane.slo.protection import BudgetProtection, ProtectSpec
from tokenplane.slo.spec import Selector, Sli, SliKind, Slo, default_rules
from tokenplane.slo.verdict import RequestFacts

SLO = Slo("interactive-ttft", Selector(slo_class="interactive"), (Sli(SliKind.TTFT, 1.0),),
          0.99, 86400.0, default_rules(86400.0, 0.99))
SPEC = ProtectSpec("interactive-ttft", ("batch",), burn_rate=2.0, release_burn_rate=1.0,
                   window_s=300.0, gate_fraction=0.1, max_wait_s=1.0)


def feed(ev: SloEvaluator, minute: int, good: int, bad: int) -> None:
    for i in range(good + bad):
        ev.observe(RequestFacts(
            ts=minute * 60.0 + i * 0.01, model="m", tenant="t", department="", app="",
            slo_class="interactive", status="ok", http_status=200, error_code=None,
            stream=True, ttft_s=2.0 if i < bad else 0.1, tpot_s=None, latency_s=1.0))


def test_engages_above_the_burn_holds_and_releases_with_hysteresis() -> None:
    ev = SloEvaluator([SLO])
    p = BudgetProtection([SPEC], [SLO])
    feed(ev, 0, 990, 10)  # 1% bad: burn 1, not above 2
    assert p.decide(ev, 59.0) == {}
    feed(ev, 1, 950, 50)  # the last 5 minutes: 60 of 2000 bad, burn 3
    assert p.decide(ev, 119.0) == {"batch": ClassRestriction(0.1, 1.0)}
    assert p.burns["interactive-ttft"] == pytest.approx(3.0)
    feed(ev, 2, 1000, 0)  # 60 of 3000: burn 2, under the engage rate, above release
    assert p.decide(ev, 179.0) == {"batch": ClassRestriction(0.1, 1.0)}
    for m in range(3, 9):  # clean minutes: the bad ones leave the 5-minute window
        feed(ev, m, 1000, 0)
    assert p.decide(ev, 9 * 60 - 1.0) == {}


INTERACTIVE = SloClass("interactive", priority=0, ttft_s=1.0)
BATCH = SloClass("batch", priority=1, deadline_s=600.0, sheddable=True, gate_fraction=0.5)


def _q(rid: str, cls: SloClass, t: float) -> QueuedRequest:
    return QueuedRequest(RouteRequest(rid, tenant="t", prompt_tokens=100, predicted_output=10),
                         cls, t)


def test_a_restricted_class_gets_less_of_the_gate_and_is_shed_after_its_wait() -> None:
    restrictions: dict[str, ClassRestriction] = {}
    s = GatewayScheduler(build_profile("least-requests", RoutingContext(seed=0)),
                         aging_tokens_per_s=0.0, restrictions=restrictions)
    assert s.class_fraction(BATCH) == 0.5
    restrictions["batch"] = ClassRestriction(gate_fraction=0.1, max_wait_s=1.0)
    assert s.class_fraction(BATCH) == 0.1 and s.class_fraction(INTERACTIVE) == 1.0
    s.submit(_q("b1", BATCH, 0.0), 0.0)
    s.submit(_q("i1", INTERACTIVE, 0.0), 0.0)
    full = [EndpointState("e0", num_waiting=4, max_waiting=4)]
    assert s.release(full, 0.5) == []
    # past max_wait the batch request is shed (the interactive one keeps waiting),
    # though a 10-minute deadline is far away
    shed = s.expire(1.5)
    assert [x.item.route.request_id for x in shed] == ["b1"]
    assert "error budget" in shed[0].reason and len(s) == 1


def _mixed_trace(n: int = 3000, rate: float = 25.0, seed: int = 1) -> list[TraceRequest]:
    """Poisson arrivals (seeded): prompts of 400-2,000 tokens, 100-400 out."""
    rng = random.Random(seed)
    ts, out = 0.0, []
    for i in range(n):
        ts += rng.expovariate(rate)
        out.append(TraceRequest(ts, 400 + (i * 53) % 1600, 100 + (i * 37) % 300, ()))
    return out


# batch with a 30-second deadline: after 15 s of waiting it is promoted to the whole
# gate and competes with interactive traffic (what protection switches off)
CLASSES = {"interactive": INTERACTIVE,
           "batch": SloClass("batch", priority=1, deadline_s=30.0, sheddable=True,
                             gate_fraction=0.5)}


def _interactive_ttft(protect: bool) -> tuple[float, int]:
    slo = Slo("interactive-ttft", Selector(slo_class="interactive"),
              (Sli(SliKind.TTFT, 1.0),), 0.99, 86400.0, default_rules(86400.0, 0.99))
    spec = ProtectSpec("interactive-ttft", ("batch",), window_s=60.0, max_wait_s=2.0)
    sim = ClusterSim(builtin_policies()[DEFAULT_PROFILE], get_profile("llama3-8b-a100"),
                     CLASSES, ClusterConfig(replicas=2),
                     protection=BudgetProtection([spec], [slo]) if protect else None)
    sim.run(assign(_mixed_trace(), WorkloadRules(batch_fraction=0.5, seed=0)))
    inter = [r for r in sim.records.values() if r.req.slo_class == "interactive"]
    ok = sum(1 for r in inter if r.done and not r.shed and r.ttft <= 1.0)
    shed = sum(1 for r in sim.records.values() if r.req.slo_class == "batch" and r.shed)
    return ok / len(inter), shed


def test_in_the_simulator_protection_gives_interactive_what_batch_yields() -> None:
    off, shed_off = _interactive_ttft(False)
    on, shed_on = _interactive_ttft(True)
    assert off < 0.99, "the workload must push interactive under its objective"
    assert on > off + 0.005 and shed_on > shed_off  # batch pays for it
