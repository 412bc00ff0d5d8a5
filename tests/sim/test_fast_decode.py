"""Running an engine's decode-only steps back to back (``ClusterConfig.fast_decode``,
``Engine.decode_until``) gives exactly the run of one event per step: the same replica,
first token, finish, cached tokens and shedding for every request, and the same gateway
queue statistics -- sparse traffic (mostly decode alone) and bursts that queue at the
gateway, with and without the gateway queue, with expiry ticks all along or paused
while the gateway queue is empty (``idle_ticks``)."""

from __future__ import annotations

import random
from dataclasses import asdict, replace

import pytest

from tokenplane.engine.profiles import get_profile
from tokenplane.scheduling.slo import default_slo_classes
from tokenplane.sim.cluster import ClusterConfig, ClusterSim, builtin_policies
from tokenplane.sim.traces import TraceRequest
from tokenplane.sim.workload import WorkloadRules, assign

PROFILE = get_profile("llama3-8b-a100")


def workload(seed: int) -> list[TraceRequest]:
    """Quiet stretches (a request every few seconds) and bursts (dozens at once) of
    conversations that share prefixes."""
    rng = random.Random(seed)
    out, t = [], 0.0
    for i in range(400):
        t += rng.expovariate(0.3) if (i // 50) % 2 == 0 else rng.expovariate(60.0)
        k = rng.randrange(12)
        blocks = rng.randint(5, 300)
        hashes = tuple(range(k * 10_000, k * 10_000 + blocks))
        out.append(TraceRequest(t, 16 * blocks + rng.randint(0, 15), rng.randint(1, 700),
                                hashes))
    return out


def records(policy: str, fast: bool, seed: int,
            idle_ticks: bool) -> tuple[list[tuple[object, ...]], object]:
    cfg = replace(ClusterConfig(replicas=3, seed=seed), fast_decode=fast,
                  idle_ticks=idle_ticks)
    sim = ClusterSim(builtin_policies()[policy], PROFILE, default_slo_classes(), cfg)
    sim.run(assign(workload(seed), WorkloadRules(batch_fraction=0.4, seed=seed)))
    recs = [(rid, r.endpoint, r.first_token, r.finish, r.cached_tokens, r.output_tokens,
             r.shed, r.preemptions) for rid, r in sorted(sim.records.items())]
    stats = ({k: asdict(v) for k, v in sim.scheduler.stats.items()}
             if sim.scheduler is not None else None)
    return recs, stats


@pytest.mark.parametrize("policy", ["tokenplane", "least-requests"])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("idle_ticks", [True, False])
def test_fast_decode_is_the_same_run(policy: str, seed: int, idle_ticks: bool) -> None:
    slow = records(policy, False, seed, idle_ticks)
    fast = records(policy, True, seed, idle_ticks)
    assert fast == slow
    if policy == "tokenplane":  # the bursts queued at the gateway
        assert isinstance(slow[1], dict) and slow[1]["batch"]["wait_sum_s"] > 10
