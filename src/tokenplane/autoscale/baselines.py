"""The autoscalers tokenplane is measured against, as their documentation describes
them (each a pure policy: snapshot + now -> decision; no warm pool, no forecast).

* ``static-peak`` / ``static-mean``: a fixed pool (sized for the day's peak / mean).
* ``hpa-kv``: the Kubernetes HorizontalPodAutoscaler on the replicas' mean KV-cache
  utilisation, target 70%. HPA's algorithm (kubernetes.io, "Horizontal Pod
  Autoscaling", algorithm details): ``desired = ceil(current x metric / target)``,
  no change while ``|metric / target - 1| <= 0.1`` (the default
  ``--horizontal-pod-autoscaler-tolerance``), evaluated every 15 s (the default
  sync period); scale-down takes the highest recommendation of the last 300 s (the
  default ``behavior.scaleDown.stabilizationWindowSeconds``), scale-up none, and
  scale-up is limited to doubling or +4 pods per 15 s (the default scale-up
  policies).
* ``keda-queue``: KEDA scaling on waiting requests, as llm-d's "KEDA + EPP metrics"
  path and the vLLM production stack's KEDA guide do (llm-d.ai, "Workload
  Autoscaling": KEDA's Prometheus scaler on the EPP's queue depth and running
  requests; docs.vllm.ai production-stack, "Autoscaling with KEDA":
  ``vllm:num_requests_waiting``). KEDA hands the metric to an HPA it owns as an
  ``AverageValue`` target: ``desired = ceil(total waiting / target per replica)``
  (5 waiting per replica, the threshold those guides use), polled every 30 s (KEDA's
  default ``pollingInterval``), with the HPA's 10% tolerance and 300 s scale-down
  stabilisation.
* ``aibrix-kpa``: AIBrix's KPA, Knative's Pod Autoscaler (AIBrix docs, "Autoscaling":
  KPA, HPA and APA; knative.dev, "Additional autoscaling configuration for Knative
  Pod Autoscaler"; knative/serving pkg/autoscaler): requests in flight per pod
  against a target; desired = ceil(stable-window mean / target) over a 60 s stable
  window, or over a 6 s panic window when that asks for at least 2x the ready pods
  (panic threshold 200%); in panic the pod count never goes down, and panic ends
  after a stable window without the threshold crossed. Scale-down is limited to
  halving per decision (max scale-down rate 2.0), evaluated every 2 s (Knative's
  tick).
"""

from __future__ import annotations

import math
from collections import deque

from tokenplane.autoscale.model import PoolSnapshot, ScaleDecision

HPA_TOLERANCE = 0.1
HPA_SYNC_S = 15.0
HPA_DOWN_WINDOW_S = 300.0


def _decision(snap: PoolSnapshot, now: float, to: int, reasons: tuple[str, ...],
              inputs: dict[str, float]) -> ScaleDecision:
    return ScaleDecision(pool=snap.pool, at=now, serving_from=snap.serving_count,
                         serving_to=to, warm_from=snap.warm_count, warm_to=0,
                         reasons=reasons, inputs=inputs)


class StaticPolicy:
    """A fixed pool of ``replicas``."""

    def __init__(self, name: str, replicas: int) -> None:
        if replicas < 1:
            raise ValueError("replicas must be >= 1")
        self.name = name
        self.replicas = replicas
        self.interval_s = 60.0

    def decide(self, snap: PoolSnapshot, now: float) -> ScaleDecision:
        return _decision(snap, now, self.replicas, ("static",),
                         {"replicas": float(self.replicas)})


class _HpaCore:
    """HPA's replica arithmetic: tolerance, scale-up limits, scale-down window."""

    def __init__(self, min_replicas: int, max_replicas: int,
                 down_window_s: float = HPA_DOWN_WINDOW_S) -> None:
        self.min_replicas = min_replicas
        self.max_replicas = max_replicas
        self.down_window_s = down_window_s
        self._recs: deque[tuple[float, int]] = deque()

    def settle(self, now: float, current: int, raw: int) -> tuple[int, str]:
        raw = max(self.min_replicas, min(self.max_replicas, raw))
        self._recs.append((now, raw))
        while self._recs and self._recs[0][0] < now - self.down_window_s:
            self._recs.popleft()
        if raw > current:
            limit = max(2 * current, current + 4)
            return min(raw, limit, self.max_replicas), "scale_up"
        if raw < current:
            stable = max(r for _, r in self._recs)
            return (stable, "scale_down") if stable < current else (current, "stabilising")
        return current, "steady"


class HpaKvPolicy:
    """``hpa-kv``: HPA on mean KV-cache utilisation (target 70%)."""

    name = "hpa-kv"

    def __init__(self, min_replicas: int, max_replicas: int, target: float = 0.7) -> None:
        self.target = target
        self.core = _HpaCore(min_replicas, max_replicas)
        self.interval_s = HPA_SYNC_S

    def decide(self, snap: PoolSnapshot, now: float) -> ScaleDecision:
        ready = [r for r in snap.replicas if r.phase == "serving"]
        cur = snap.serving_count
        kv = sum(r.kv_usage for r in ready) / len(ready) if ready else 0.0
        ratio = kv / self.target
        # HPA computes from the ready pods; pods not yet ready count at 0 on scale-up
        raw = cur if abs(ratio - 1.0) <= HPA_TOLERANCE else math.ceil(len(ready) * ratio)
        if raw > cur or not ready:
            raw = max(raw, cur)
        to, why = self.core.settle(now, cur, raw)
        return _decision(snap, now, to, ("kv", why) if to != cur else (why,),
                         {"kv_usage": round(kv, 4), "ratio": round(ratio, 4)})


class KedaQueuePolicy:
    """``keda-queue``: KEDA on waiting requests (target 5 per replica)."""

    name = "keda-queue"

    def __init__(self, min_replicas: int, max_replicas: int,
                 target_waiting: float = 5.0, polling_s: float = 30.0) -> None:
        self.target = target_waiting
        self.core = _HpaCore(min_replicas, max_replicas)
        self.interval_s = polling_s

    def decide(self, snap: PoolSnapshot, now: float) -> ScaleDecision:
        cur = snap.serving_count
        waiting = snap.queue_requests + sum(r.waiting for r in snap.replicas
                                            if r.phase == "serving")
        # AverageValue: the HPA divides the total by the target per replica
        per = waiting / max(1, cur)
        ratio = per / self.target
        raw = cur if abs(ratio - 1.0) <= HPA_TOLERANCE else math.ceil(waiting / self.target)
        to, why = self.core.settle(now, cur, raw)
        return _decision(snap, now, to, ("queue", why) if to != cur else (why,),
                         {"waiting": float(waiting), "ratio": round(ratio, 4)})


class AibrixKpaPolicy:
    """``aibrix-kpa``: Knative-style KPA on requests in flight per pod."""

    name = "aibrix-kpa"

    def __init__(self, min_replicas: int, max_replicas: int, target_per_pod: float,
                 stable_window_s: float = 60.0, panic_window_s: float = 6.0,
                 panic_threshold: float = 2.0, max_scale_down_rate: float = 2.0,
                 tick_s: float = 2.0) -> None:
        if target_per_pod <= 0:
            raise ValueError("target_per_pod must be > 0")
        self.min_replicas = min_replicas
        self.max_replicas = max_replicas
        self.target = target_per_pod
        self.stable_window_s = stable_window_s
        self.panic_window_s = panic_window_s
        self.panic_threshold = panic_threshold
        self.max_down_rate = max_scale_down_rate
        self.interval_s = tick_s
        self._samples: deque[tuple[float, float]] = deque()
        self.panic_since: float | None = None
        self._last_panic_cross = -math.inf

    def decide(self, snap: PoolSnapshot, now: float) -> ScaleDecision:
        ready = [r for r in snap.replicas if r.phase == "serving"]
        cur = snap.serving_count
        inflight = float(snap.queue_requests + sum(r.running + r.waiting for r in ready))
        self._samples.append((now, inflight))
        while self._samples and self._samples[0][0] < now - self.stable_window_s:
            self._samples.popleft()
        stable = sum(v for _, v in self._samples) / len(self._samples)
        recent = [v for t, v in self._samples if t >= now - self.panic_window_s]
        panic_avg = sum(recent) / len(recent) if recent else stable
        want_stable = math.ceil(stable / self.target - 1e-9)
        want_panic = math.ceil(panic_avg / self.target - 1e-9)
        n_ready = max(1, len(ready))
        if want_panic / n_ready >= self.panic_threshold:
            self._last_panic_cross = now
            if self.panic_since is None:
                self.panic_since = now
        elif (self.panic_since is not None
              and now - self._last_panic_cross >= self.stable_window_s):
            self.panic_since = None
        reasons: tuple[str, ...]
        if self.panic_since is not None:
            to = max(cur, want_panic)  # never scale down in panic
            reasons = ("panic",)
        else:
            to = want_stable
            reasons = ("stable",)
            floor = math.ceil(cur / self.max_down_rate)
            to = max(to, floor)
        to = max(self.min_replicas, min(self.max_replicas, to))
        return _decision(snap, now, to, reasons,
                         {"inflight": inflight, "stable_avg": round(stable, 3),
                          "panic_avg": round(panic_avg, 3)})
