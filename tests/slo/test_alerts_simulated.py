"""Burn-rate alerting on the simulated cluster, in virtual time: an incident (one of
four replicas 5x slower for 20 minutes) pages within five minutes and resolves after;
the default routing profile steers around the slow replica so nothing pages; a
healthy simulated day fires nothing. The SLO: 99.9% of streams get their first token
within 1 s over 30 days, with the workbook's default alert rules."""

from __future__ import annotations

import random

from tokenplane.engine.profiles import get_profile
from tokenplane.routing.profiles import DEFAULT_PROFILE
from tokenplane.scheduling.slo import default_slo_classes
from tokenplane.sim.cluster import ClusterConfig, ClusterSim, Slowdown, builtin_policies
from tokenplane.sim.traces import TraceRequest
from tokenplane.sim.workload import WorkloadRules, assign
from tokenplane.slo.alerts import AlertBook, evaluate
from tokenplane.slo.evaluator import SloEvaluator
from tokenplane.slo.spec import Selector, Sli, SliKind, Slo, default_rules

WINDOW = 30 * 86400.0
SLO = Slo("ttft", Selector(), (Sli(SliKind.TTFT, 1.0),), 0.999, WINDOW,
          default_rules(WINDOW, 0.999))
INCIDENT = Slowdown(replica=0, start_s=1800.0, end_s=3000.0, factor=5.0)  # minutes 30-50


def poisson(rate: float, duration_s: float, seed: int = 3) -> list[TraceRequest]:
    rng = random.Random(seed)
    t, out, i = 0.0, [], 0
    while t < duration_s:
        t += rng.expovariate(rate)
        i += 1
        out.append(TraceRequest(t, 300 + (i * 53) % 700, 50 + (i * 37) % 150, ()))
    return out


def transitions(policy: str, replicas: int, rate: float, duration_s: float,
                slowdowns: tuple[Slowdown, ...] = (),
                fast: bool = False) -> list[tuple[int, str, str, float]]:
    """(minute, firing|resolved, severity, long window) as the gateway's alerting would
    see them: each request counted at its end, alerts evaluated every minute."""
    sim = ClusterSim(builtin_policies()[policy], get_profile("llama3-8b-a100"),
                     default_slo_classes(),
                     ClusterConfig(replicas=replicas, fast_decode=fast, idle_ticks=not fast),
                     slowdowns=slowdowns)
    sim.run(assign(poisson(rate, duration_s), WorkloadRules(batch_fraction=0.0)))
    ev = SloEvaluator([SLO])
    for rec in sim.records.values():
        ev.observe(rec.facts("sim"))
    tallies = {"ttft": ev.tally("ttft", "ttft")}
    book = AlertBook()
    out = []
    for minute in range(int(duration_s // 60) + 30):
        now = minute * 60 + 59.0
        out += [(minute, t.state, t.firing.key.severity, t.firing.key.long_s)
                for t in book.update(evaluate(SLO, tallies, now), now)]
    return out


def test_a_slow_replica_pages_within_five_minutes_and_resolves_after() -> None:
    got = transitions("round-robin", 4, 20.0, 4800.0, (INCIDENT,))
    fast = [(m, state) for m, state, sev, long_s in got if long_s == 3600.0]
    assert [s for _, s in fast] == ["firing", "resolved"], got
    fired, resolved = fast[0][0], fast[1][0]
    assert 30 <= fired < 35, "the 14.4x page within five minutes of the start"
    assert 50 <= resolved <= 60, "resolved within ten minutes of the end"
    assert all(sev in ("page", "ticket") for _, _, sev, _ in got)


def test_the_default_profile_routes_around_the_slow_replica() -> None:
    # the same incident and load: the tokenplane profile scores replicas on their
    # queue and measured prefill time, so the slow one gets little traffic
    assert transitions(DEFAULT_PROFILE, 4, 20.0, 4800.0, (INCIDENT,)) == []


def test_a_healthy_simulated_day_fires_nothing() -> None:
    assert transitions("round-robin", 2, 2.0, 86400.0, fast=True) == []
