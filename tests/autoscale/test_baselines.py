"""The baseline autoscalers do what their documentation says."""

from __future__ import annotations

from tokenplane.autoscale.baselines import (
    AibrixKpaPolicy,
    HpaKvPolicy,
    KedaQueuePolicy,
    StaticPolicy,
)
from tokenplane.autoscale.model import PoolSnapshot, ReplicaView


def pool(now: float, n: int, *, kv: float = 0.0, waiting: int = 0, running: int = 0,
         queue: int = 0) -> PoolSnapshot:
    reps = tuple(ReplicaView(f"r{i}", "serving", 0.0, kv_usage=kv, waiting=waiting,
                             running=running) for i in range(n))
    return PoolSnapshot(pool="p", now=now, replicas=reps, queue_requests=queue)


def test_static() -> None:
    d = StaticPolicy("static-peak", 8).decide(pool(0.0, 3), 0.0)
    assert d.serving_to == 8 and d.warm_to == 0


def test_hpa_formula_tolerance_and_scale_down_window() -> None:
    hpa = HpaKvPolicy(1, 16)
    # 75% against 70%: ratio 1.07, inside the 10% tolerance: no change
    assert hpa.decide(pool(0.0, 4, kv=0.75), 0.0).serving_to == 4
    # 91%: ceil(4 x 0.91 / 0.7) = 6
    assert hpa.decide(pool(15.0, 4, kv=0.91), 15.0).serving_to == 6
    # a drop to 20% waits out the 300 s window of recommendations
    assert hpa.decide(pool(30.0, 6, kv=0.2), 30.0).serving_to == 6
    assert hpa.decide(pool(320.0, 6, kv=0.2), 320.0).serving_to == 2
    # scale-up limited to doubling or +4 per sync
    big = HpaKvPolicy(1, 64)
    assert big.decide(pool(0.0, 2, kv=1.0), 0.0).serving_to == 3  # ceil(2 x 1/0.7)
    assert HpaKvPolicy(1, 64, target=0.1).decide(pool(0.0, 2, kv=1.0), 0.0).serving_to == 6


def test_keda_scales_on_waiting_requests_per_replica() -> None:
    keda = KedaQueuePolicy(1, 16)
    # 4 replicas x 5 waiting + 10 in the gateway queue = 30: ceil(30 / 5) = 6
    assert keda.decide(pool(0.0, 4, waiting=5, queue=10), 0.0).serving_to == 6
    # no queue: down to the minimum once the 300 s window has passed
    assert keda.decide(pool(30.0, 6), 30.0).serving_to == 6
    assert keda.decide(pool(400.0, 6), 400.0).serving_to == 1


def test_kpa_panics_on_a_2x_burst_and_never_scales_down_in_panic() -> None:
    kpa = AibrixKpaPolicy(1, 20, target_per_pod=10.0)
    t = 0.0
    for _ in range(30):  # a minute at 40 in flight over 4 pods: stable at 4
        d = kpa.decide(pool(t, 4, running=10), t)
        t += 2.0
    assert d.serving_to == 4 and d.reasons == ("stable",)
    # a burst to 200 in flight: the 6 s window asks for >= 2 x 4 ready pods: panic
    d = kpa.decide(pool(t, 4, running=50), t)
    d = kpa.decide(pool(t + 2, 4, running=50), t + 2)
    assert d.reasons == ("panic",) and d.serving_to >= 8
    n = d.serving_to
    t += 4
    # load falls away: no scale-down while panicking (60 s without the threshold)
    for _ in range(20):
        d = kpa.decide(pool(t, n, running=1), t)
        t += 2.0
        assert d.serving_to >= n
    for _ in range(40):
        d = kpa.decide(pool(t, n, running=1), t)
        t += 2.0
    assert d.reasons == ("stable",) and d.serving_to < n
    # halving at most per decision
    assert d.serving_to >= (n + 1) // 2
