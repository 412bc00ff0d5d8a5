"""``tokenplane``: the token-demand autoscaling policy (pure: snapshot + now in,
decision out; state only from earlier calls).

Each decision:

1. **Demand** in engine-seconds per second (:mod:`.capacity`), averaged over an
   exponential window of ``demand_window_s`` (0, the default: the snapshot's rates
   are already averaged by the shell): uncached prompt tokens
   arriving per second, output tokens per second (or the output tokens in flight
   over ``output_drain_s``, whichever is larger: a burst's decode work is in flight
   before it is delivered), plus the backlog -- tokens queued at the gateway and
   requests waiting inside the engines -- to be drained within ``queue_drain_s``.
   Needed replicas = demand / (corrected capacity x target utilisation); KV usage
   above ``kv_target`` and engines' own waiting requests add their own need.
2. **Forecast** (:mod:`.forecast`) of demand one cold start (+ one interval) ahead:
   the pool is scaled for the larger of now and then, so a replica ordered now is
   ready when the morning ramp arrives.
3. **SLO burn**: while the SLOs selecting the pool burn their budget faster than
   ``burn_threshold``, the target utilisation drops by ``burn_headroom``, scale-ups
   skip the up-stabilisation window and scale-downs wait (scale up faster, down
   slower).
4. **Hysteresis and stabilisation**: up when ceil(need) exceeds the pool (the lowest
   up-recommendation over ``scale_up_window_s``, skipped when demand jumped past
   ``panic_ratio`` of the pool with a queue forming, or SLOs burn); down only when
   the smaller pool stays under ``1 - hysteresis`` of the target for the larger of
   the need now and the forecast's highest need within a cooldown (the highest
   down-recommendation over ``scale_down_window_s``), and ``cooldown_s`` after the
   last scale-up.
5. **Limits**: min/max replicas, ``max_step`` per decision, the money budget per hour
   (serving and warm replicas at their prices; the warm pool is cut first).
6. **Warm pool**: a scale-up promotes warm replicas first (seconds, not a cold
   start); the pool keeps ``warm_min`` .. ``warm_max`` warm replicas, enough for the
   highest need the forecast sees within ``warm_lookahead_s`` beyond the serving
   target.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable

from tokenplane.autoscale.capacity import CapacityEstimator, flat_costs, profile_costs
from tokenplane.autoscale.forecast import DemandForecaster
from tokenplane.autoscale.model import PoolSnapshot, ScaleDecision
from tokenplane.autoscale.spec import PoolPolicySpec
from tokenplane.engine.profiles import EngineProfile


class TokenplanePolicy:
    """See the module docstring. ``forecaster`` None: reactive only."""

    name = "tokenplane"

    def __init__(
        self,
        spec: PoolPolicySpec,
        capacity: CapacityEstimator,
        forecaster: DemandForecaster | None = None,
        *,
        kv_target: float = 0.85,
        waiting_per_replica: float = 4.0,
        queue_drain_s: float = 30.0,
        output_drain_s: float = 10.0,
        panic_ratio: float = 1.5,
        burn_headroom: float = 0.15,
        warm_lookahead_s: float = 900.0,
        demand_window_s: float = 0.0,
        saturated_waiting: int = 2,
    ) -> None:
        self.spec = spec
        self.capacity = capacity
        self.forecaster = forecaster
        self.kv_target = kv_target
        self.waiting_per_replica = waiting_per_replica
        self.queue_drain_s = queue_drain_s
        self.output_drain_s = output_drain_s
        self.panic_ratio = panic_ratio
        self.burn_headroom = burn_headroom
        self.warm_lookahead_s = warm_lookahead_s
        self.demand_window_s = demand_window_s
        self.saturated_waiting = saturated_waiting
        self.smoothed: float | None = None
        self._saturated: set[str] = set()
        self._last_t: float | None = None
        self.interval_s = spec.interval_s
        self.last_up = -math.inf
        self._ups: deque[tuple[float, int]] = deque()
        self._downs: deque[tuple[float, int]] = deque()

    # --- demand ------------------------------------------------------------------
    def demand(self, snap: PoolSnapshot) -> float:
        """Engine-seconds per second of arriving work (what the forecaster learns)."""
        out = max(snap.output_tokens_per_s, snap.output_tokens_in_flight / self.output_drain_s)
        return self.capacity.costs.work(snap.prompt_tokens_per_s, out)

    def _backlog(self, snap: PoolSnapshot, waiting: int) -> float:
        per_req = (snap.prompt_tokens_per_s / snap.requests_per_s
                   if snap.requests_per_s > 0 else 0.0)
        tokens = snap.queue_tokens + waiting * per_req
        return self.capacity.costs.work(tokens, 0.0) / self.queue_drain_s

    def _smooth(self, work: float, now: float) -> float:
        """Demand averaged with an exponential window of ``demand_window_s``."""
        if self.smoothed is None or self._last_t is None or self.demand_window_s <= 0:
            self.smoothed = work
        else:
            a = 1.0 - math.exp(-max(0.0, now - self._last_t) / self.demand_window_s)
            self.smoothed += a * (work - self.smoothed)
        self._last_t = now
        return self.smoothed

    def _correct(self, snap: PoolSnapshot) -> None:
        """A replica with a queue of ``saturated_waiting`` inside its engine at both
        ends of the interval was busy throughout: what it delivered is its capacity."""
        now_sat: set[str] = set()
        for r in snap.replicas:
            if r.phase != "serving" or r.waiting < self.saturated_waiting:
                continue
            now_sat.add(r.id)
            if r.id in self._saturated and (r.prompt_tokens_per_s > 0
                                            or r.output_tokens_per_s > 0):
                self.capacity.observe_saturated(r.prompt_tokens_per_s, r.output_tokens_per_s)
        self._saturated = now_sat

    # --- the decision ------------------------------------------------------------
    def decide(self, snap: PoolSnapshot, now: float) -> ScaleDecision:
        spec = self.spec
        self._correct(snap)
        cur = snap.serving_count
        warm_now = snap.warm_count
        ready = [r for r in snap.replicas if r.phase == "serving"]
        waiting = sum(r.waiting for r in ready)
        burning = snap.slo_burn > spec.burn_threshold
        util = spec.target_utilisation * ((1.0 - self.burn_headroom) if burning else 1.0)

        work_now = self.demand(snap)
        work_avg = self._smooth(work_now, now)
        need_now = self.capacity.replicas_for(work_avg + self._backlog(snap, waiting), util)
        kv = sum(r.kv_usage for r in ready) / len(ready) if ready else 0.0
        need_kv = len(ready) * kv / self.kv_target
        need_wait = (len(ready) + 1.0 if waiting > self.waiting_per_replica * max(1, len(ready))
                     else 0.0)
        need_f = 0.0
        f_peak = 0.0
        f_hold = 0.0
        f_work = -1.0  # no forecast
        if self.forecaster is not None:
            self.forecaster.observe(now, work_now)
            horizon = spec.cold_start_s + spec.interval_s
            f = self.forecaster.forecast(now, horizon)
            need_f = self.capacity.replicas_for(f, util) if f is not None else 0.0
            f_work = f if f is not None else -1.0
            steps = max(1, int(self.warm_lookahead_s // 300))
            for k in range(1, steps + 1):
                ahead = horizon + k * 300.0
                fk = self.forecaster.forecast(now, ahead)
                if fk is None:
                    continue
                nk = self.capacity.replicas_for(fk, util)
                f_peak = max(f_peak, nk)
                if ahead <= horizon + spec.cooldown_s:
                    f_hold = max(f_hold, nk)
        signals = {"token_demand": need_now, "kv": need_kv, "queue": need_wait,
                   "forecast": need_f}
        driver = max(signals, key=lambda k: signals[k])
        x = signals[driver]
        up_target = self._clamp(math.ceil(x - 1e-9))
        # a replica the forecast needs again within a cooldown is not given back
        down_target = self._clamp(math.ceil(max(x, f_hold) / (1.0 - spec.hysteresis) - 1e-9))

        self._ups.append((now, up_target))
        self._downs.append((now, down_target))
        while self._ups and self._ups[0][0] < now - spec.scale_up_window_s:
            self._ups.popleft()
        while self._downs and self._downs[0][0] < now - spec.scale_down_window_s:
            self._downs.popleft()

        reasons: list[str] = []
        to = cur
        if up_target > cur:
            # a jump past panic_ratio with a queue forming is a burst, not noise
            queued = waiting > 0 or snap.queue_requests > 0
            panic = ((x >= self.panic_ratio * max(1, cur) and queued) or burning
                     or cur < spec.min_replicas)
            stable_up = up_target if panic else min(t for _, t in self._ups)
            if stable_up > cur:
                to = stable_up
                reasons.append(driver)
                if burning:
                    reasons.append("slo_burn")
            else:
                reasons.append("stabilising")
        elif down_target < cur:
            stable_down = max(t for _, t in self._downs)
            if burning:
                reasons.append("slo_burn")
            elif now - self.last_up < spec.cooldown_s:
                reasons.append("cooldown")
            elif stable_down < cur:
                to = stable_down
                reasons.append(driver)
            else:
                reasons.append("stabilising")
        else:
            reasons.append("hysteresis" if up_target < cur else "steady")
        raw = math.ceil(x - 1e-9)
        if raw > spec.max_replicas and to == spec.max_replicas:
            reasons.append("max")
        elif raw < spec.min_replicas and to == spec.min_replicas:
            reasons.append("min")
        if abs(to - cur) > spec.max_step:
            to = cur + spec.max_step * (1 if to > cur else -1)
            reasons.append("max_step")

        # the warm pool: what the forecast needs within the lookahead beyond the target
        want_warm = max(spec.warm_min,
                        min(spec.warm_max, math.ceil(max(0.0, f_peak - to) - 1e-9)))
        promoted = min(warm_now, max(0, to - cur))
        warm_to = max(warm_now - promoted, min(want_warm, spec.max_replicas - to))
        if promoted:
            reasons.append("warm_promotion")
        if warm_to != warm_now - promoted:
            reasons.append("warm_pool")

        # the money budget caps the pool: the warm pool first, then serving replicas
        capped = False
        while not spec.affordable(to, warm_to) and warm_to > 0:
            warm_to -= 1
            capped = True
        while not spec.affordable(to, warm_to) and to > max(spec.min_replicas, 0):
            to -= 1
            capped = True
        if capped:
            reasons.insert(0, "budget_cap")

        if to > cur:
            self.last_up = now
        inputs = {
            "demand_work": round(work_now, 4), "demand_avg": round(work_avg, 4),
            "need_now": round(need_now, 3),
            "need_kv": round(need_kv, 3), "need_queue": need_wait,
            "need_forecast": round(need_f, 3), "forecast_peak": round(f_peak, 3),
            "forecast_hold": round(f_hold, 3),
            "forecast_work": round(f_work, 5),
            "capacity_factor": round(self.capacity.factor, 4),
            "prompt_tokens_per_s": snap.prompt_tokens_per_s,
            "output_tokens_per_s": snap.output_tokens_per_s,
            "output_tokens_in_flight": float(snap.output_tokens_in_flight),
            "queue_requests": float(snap.queue_requests), "queue_tokens": float(snap.queue_tokens),
            "waiting": float(waiting), "kv_usage": round(kv, 4),
            "slo_burn": snap.slo_burn, "utilisation_target": util,
        }
        return ScaleDecision(pool=snap.pool, at=now, serving_from=cur, serving_to=to,
                             warm_from=warm_now, warm_to=warm_to, reasons=tuple(reasons),
                             inputs=inputs)

    @classmethod
    def for_profile(cls, spec: PoolPolicySpec, profile: EngineProfile, *,
                    mean_prompt: float = 1024.0, mean_output: float = 256.0,
                    history: Iterable[tuple[float, float]] = ()) -> TokenplanePolicy:
        """The policy for a pool on ``profile``: token costs from its step-time model
        for the pool's mean request (or ``spec.replica_tokens_per_s`` when set), a
        forecaster that learned ``history`` (per-minute ``(t, demand)``, demand in
        engine-seconds per second, e.g. from the ledger's token counts priced with
        the same costs). The gateway shell builds it this way."""
        costs = (flat_costs(spec.replica_tokens_per_s) if spec.replica_tokens_per_s > 0
                 else profile_costs(profile, mean_prompt, mean_output))
        forecaster = DemandForecaster()
        forecaster.learn(history)
        return cls(spec, CapacityEstimator(costs), forecaster)

    def _clamp(self, n: int) -> int:
        return max(self.spec.min_replicas, min(self.spec.max_replicas, n))
