"""Hand-built pool snapshots for the policy tests."""

from __future__ import annotations

import dataclasses

from tokenplane.autoscale.capacity import CapacityEstimator, flat_costs
from tokenplane.autoscale.forecast import DemandForecaster
from tokenplane.autoscale.model import PoolSnapshot, ReplicaView
from tokenplane.autoscale.policy import TokenplanePolicy
from tokenplane.autoscale.spec import PoolPolicySpec

# one replica delivers 1,000 tokens per second (every token costs 1 ms of engine time)
TOKENS_PER_REPLICA = 1000.0


def snap(now: float, serving: int, *, tokens_per_s: float = 0.0, warm: int = 0,
         starting: int = 0, kv: float = 0.1, waiting: int = 0, burn: float = 0.0,
         delivered: float = 0.0) -> PoolSnapshot:
    """A pool of ``serving`` ready replicas (plus ``starting`` cold-starting towards
    serving and ``warm`` warm ones) seeing ``tokens_per_s`` prompt tokens per second."""
    reps = [ReplicaView(f"s{i}", "serving", 0.0, kv_usage=kv, waiting=waiting,
                        prompt_tokens_per_s=delivered) for i in range(serving)]
    reps += [ReplicaView(f"c{i}", "starting", now) for i in range(starting)]
    reps += [ReplicaView(f"w{i}", "warm", 0.0) for i in range(warm)]
    return PoolSnapshot(pool="p", now=now, replicas=tuple(reps),
                        prompt_tokens_per_s=tokens_per_s, requests_per_s=tokens_per_s / 1000,
                        slo_burn=burn)


def policy(spec: PoolPolicySpec | None = None,
           forecaster: DemandForecaster | None = None, *, filtered: bool = False,
           headroom: bool = False) -> TokenplanePolicy:
    """The policy on ``spec``. The logic tests see the demand as given: no nowcast
    (``filtered``) and no headroom for the arrivals' spread (``headroom``);
    test_policy_noise.py runs the policy with both."""
    s = spec or PoolPolicySpec(target_utilisation=1.0, hysteresis=0.1)
    if not headroom:
        s = dataclasses.replace(s, arrival_sigmas=0.0)
    return TokenplanePolicy(s, CapacityEstimator(flat_costs(TOKENS_PER_REPLICA)), forecaster,
                            nowcast=filtered)


def drive(pol: TokenplanePolicy, demand: list[float], serving: int, *, step: float = 10.0,
          t0: float = 0.0, warm: int = 0) -> list[tuple[float, int, int, tuple[str, ...]]]:
    """Run the policy over ``demand`` (tokens per second per step) with an actuator
    that applies every decision at once; a queue forms inside the engines while
    demand exceeds the pool's capacity. Returns (t, serving, warm, reasons)."""
    out = []
    for k, d in enumerate(demand):
        t = t0 + k * step
        waiting = 2 if d > serving * TOKENS_PER_REPLICA else 0
        dec = pol.decide(snap(t, serving, tokens_per_s=d, warm=warm, waiting=waiting), t)
        serving, warm = dec.serving_to, dec.warm_to
        out.append((t, serving, warm, dec.reasons))
    return out
