"""``tokenplane``: the token-demand autoscaling policy (pure: snapshot + now in,
decision out; state only from earlier calls).

Each decision:

1. **Demand** in engine-seconds per second (:mod:`.capacity`): uncached prompt tokens
   arriving per second, output tokens per second (or the output tokens in flight
   over ``output_drain_s``, whichever is larger: a burst's decode work is in flight
   before it is delivered), plus the backlog -- tokens queued at the gateway and
   requests waiting inside the engines -- to be drained within ``queue_drain_s``.
   The sample goes through the **nowcast** (:mod:`.nowcast`), a Kalman filter that
   weighs it by the requests behind it: a quiet pool's swinging rates are averaged,
   a busy pool's taken as they are, a jump (a burst) at once.
2. **Headroom for the arrivals' spread**: a replica ordered now serves after a cold
   start, and the requests arriving within one are Poisson, so their relative spread
   is sqrt(c / (rate x horizon)) (c: :attr:`size_moment`). The pool is sized for
   the demand ``arrival_sigmas`` spreads above the estimate: a quiet pool keeps
   proportionally more room than a busy one (the square-root staffing rule), at
   ``target_utilisation`` of each replica's corrected capacity. KV usage above
   ``kv_target`` and the engines' own waiting requests add their own need.
3. **Forecast** (:mod:`.forecast`) of demand one cold start, one interval and the
   up-stabilisation window ahead: the pool is scaled for the larger of now and then,
   so a replica ordered now serves when the morning ramp arrives.
4. **SLO burn**: while the SLOs selecting the pool burn their budget faster than
   ``burn_threshold``, the target utilisation drops by ``burn_headroom``, scale-ups
   skip the up-stabilisation window and scale-downs wait (scale up faster, down
   slower).
5. **Hysteresis and stabilisation**: up when ceil(need) exceeds the pool (the lowest
   up-recommendation over ``scale_up_window_s``, skipped when the filtered need jumped
   past ``panic_ratio`` of the pool with a queue forming, or SLOs burn); down only
   when the smaller pool stays under ``1 - hysteresis`` of the target for the larger
   of the need now and the forecast's highest need within ``hold_lookahead_s`` (an
   hour: a replica the forecast needs back within it is kept; the highest
   down-recommendation over ``scale_down_window_s``), and ``cooldown_s`` after the
   last scale-up. **Flap damping**: a scale-down that would reverse the last
   scale-up waits while it would make the last hour hold more than
   ``max_reversals_per_hour`` reversals (a scale-up is never held, so an hour can
   go one over, by the scale-up answering the last scale-down allowed).
6. **Limits**: min/max replicas, ``max_step`` per decision, the money budget per hour
   (serving and warm replicas at their prices; the warm pool is cut first).
7. **Warm pool**: a scale-up promotes warm replicas first (seconds, not a cold
   start); the pool keeps ``warm_min`` .. ``warm_max`` warm replicas, as many as
   the forecast's demand within ``warm_lookahead_s`` rises beyond what the serving
   target (with its headroom) covers.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from tokenplane.autoscale.capacity import CapacityEstimator, flat_costs, profile_costs
from tokenplane.autoscale.forecast import DemandForecaster
from tokenplane.autoscale.model import PoolSnapshot, ScaleDecision
from tokenplane.autoscale.nowcast import DemandNowcast
from tokenplane.autoscale.spec import PoolPolicySpec
from tokenplane.engine.profiles import EngineProfile


@dataclass(slots=True)
class _ForecastNeeds:
    need: float = 0.0  # replicas for the demand a scale-up ordered now serves
    peak: float = 0.0  # the highest within the warm lookahead (no spread headroom)
    hold: float = 0.0  # the highest within a cooldown (what a scale-down keeps)
    work: float = -1.0  # the forecast demand (-1: no forecast)


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
        saturated_waiting: int = 2,
        nowcast: DemandNowcast | bool | None = True,
        size_moment: float = 2.0,
        hold_lookahead_s: float = 3600.0,
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
        self.saturated_waiting = saturated_waiting
        self.hold_lookahead_s = hold_lookahead_s
        # the demand now, filtered by how many requests stand behind each sample
        self.nowcast: DemandNowcast | None = (
            DemandNowcast(size_moment=size_moment) if nowcast is True
            else nowcast if nowcast else None)
        # the request rate, filtered the same way (counts: Poisson), for the spread
        self._rates = DemandNowcast(size_moment=1.0) if self.nowcast is not None else None
        self._saturated: set[str] = set()
        self._last_t: float | None = None
        # E[w^2] / E[w]^2 of one request's work (the arrivals' spread, the nowcast)
        self.size_moment = size_moment
        self.interval_s = spec.interval_s
        self.last_up = -math.inf
        self._first_t: float | None = None  # the first decision's time
        # work per request (EWMA of the filtered demand over the filtered request
        # rate): the arrivals behind a forecast demand, for the forecast's headroom
        self._work_per_request = 0.0
        self._ups: deque[tuple[float, int]] = deque()
        self._downs: deque[tuple[float, int]] = deque()
        self._direction = 0  # of the last change: +1 up, -1 down
        self._reversals: deque[float] = deque()  # times the direction changed

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

    def _filtered(self, snap: PoolSnapshot, work: float, now: float) -> tuple[float, float]:
        """The demand and the request rate now through the nowcast (the raw samples
        without one)."""
        since = now - self._last_t if self._last_t is not None else self.interval_s
        self._last_t = now
        if self.nowcast is None or self._rates is None:
            return work, snap.requests_per_s
        window = snap.rate_window_s if snap.rate_window_s > 0 else since
        overlap = window / max(since, 1e-9)
        n = snap.requests_per_s * window
        profile = self.forecaster.profile(now) if self.forecaster is not None else None
        return (self.nowcast.update(now, work, n, overlap, profile),
                self._rates.update(now, snap.requests_per_s, n, overlap))

    def _spread(self, requests_per_s: float) -> float:
        """The demand's relative headroom: ``arrival_sigmas`` spreads of the requests a
        cold start lets arrive (Poisson, each of ``size_moment`` relative work)."""
        horizon = self.spec.cold_start_s + self.spec.interval_s
        arrivals = requests_per_s * horizon
        return self.spec.arrival_sigmas * math.sqrt(self.size_moment / max(1.0, arrivals))

    def _learn_request_size(self, work: float, requests_per_s: float) -> None:
        if work > 0 and requests_per_s > 0:
            w = work / requests_per_s
            self._work_per_request = (w if self._work_per_request <= 0
                                      else 0.9 * self._work_per_request + 0.1 * w)

    def _forecast_up(self, work: float) -> float:
        """1 + the headroom for a forecast demand: the spread of the arrivals behind
        that demand, not behind today's (a pool idle now, or just started, is not sized
        for its emptiness's spread). Before any request was seen: none."""
        if self._work_per_request <= 0:
            return 1.0
        return 1.0 + self._spread(work / self._work_per_request)

    def _forecast_needs(self, now: float, work_now: float, util: float) -> _ForecastNeeds:
        """The forecast's needs: at the horizon a scale-up ordered now serves (a cold
        start, an interval, and the up window it still waits out), the highest within
        the warm lookahead (without the spread: the warm pool covers the forecast's
        rise, the serving target's headroom the noise) and within the hold lookahead
        (what a scale-down keeps)."""
        if self.forecaster is None:
            return _ForecastNeeds()
        spec = self.spec
        self.forecaster.observe(now, work_now)
        horizon = spec.cold_start_s + spec.interval_s
        f = self.forecaster.forecast(now, horizon + spec.scale_up_window_s)
        out = _ForecastNeeds()
        if f is not None:
            out.need = self.capacity.replicas_for(f * self._forecast_up(f), util)
            out.work = f
        hold = max(spec.cooldown_s, self.hold_lookahead_s)
        for k in range(1, max(1, int(max(self.warm_lookahead_s, hold) // 300)) + 1):
            ahead = horizon + k * 300.0
            fk = self.forecaster.forecast(now, ahead)
            if fk is None:
                continue
            if k * 300.0 <= self.warm_lookahead_s:
                out.peak = max(out.peak, self.capacity.replicas_for(fk, util))
            if ahead <= horizon + hold:
                out.hold = max(out.hold, self.capacity.replicas_for(
                    fk * self._forecast_up(fk), util))
        return out

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
        if self._first_t is None:
            self._first_t = now
        self._correct(snap)
        cur = snap.serving_count
        warm_now = snap.warm_count
        ready = [r for r in snap.replicas if r.phase == "serving"]
        waiting = sum(r.waiting for r in ready)
        burning = snap.slo_burn > spec.burn_threshold
        util = spec.target_utilisation * ((1.0 - self.burn_headroom) if burning else 1.0)

        work_now = self.demand(snap)
        work_avg, rps = self._filtered(snap, work_now, now)
        backlog = self._backlog(snap, waiting)
        self._learn_request_size(work_avg, rps)
        up = 1.0 + self._spread(rps)
        need_raw = self.capacity.replicas_for(work_now * up + backlog, util)
        need_now = self.capacity.replicas_for(work_avg * up + backlog, util)
        kv = sum(r.kv_usage for r in ready) / len(ready) if ready else 0.0
        need_kv = len(ready) * kv / self.kv_target
        need_wait = (len(ready) + 1.0 if waiting > self.waiting_per_replica * max(1, len(ready))
                     else 0.0)
        fc = self._forecast_needs(now, work_now, util)
        need_f, f_peak, f_hold = fc.need, fc.peak, fc.hold
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
            # a jump past panic_ratio with a queue forming is a burst, not noise: the
            # filtered demand (the nowcast jumps to a sample beyond its noise, and
            # averages one within it), so a noisy sample of a quiet pool waits out the
            # up window like any other
            queued = waiting > 0 or snap.queue_requests > 0
            panic = ((x >= self.panic_ratio * max(1, cur) and queued)
                     or burning or cur < spec.min_replicas)
            stable_up = (self._clamp(math.ceil(x - 1e-9)) if panic
                         else min(t for _, t in self._ups))
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
            elif now - self._first_t < spec.scale_down_window_s:
                # a scale-down needs a whole down window of recommendations behind it
                reasons.append("stabilising")
            elif now - self.last_up < spec.cooldown_s:
                reasons.append("cooldown")
            elif stable_down < cur and self._flapping(now):
                reasons.append("flap_damping")
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
        self._record_direction(now, cur, to)
        inputs = {
            "demand_work": round(work_now, 4), "demand_filtered": round(work_avg, 4),
            "need_now": round(need_now, 3), "need_raw": round(need_raw, 3),
            "need_kv": round(need_kv, 3), "need_queue": need_wait,
            "need_forecast": round(need_f, 3), "forecast_peak": round(f_peak, 3),
            "forecast_hold": round(f_hold, 3),
            "forecast_work": round(fc.work, 5), "headroom": round(up - 1.0, 4),
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

    def _flapping(self, now: float) -> bool:
        """Whether a scale-down now, reversing the last scale-up, must wait: with it
        the last hour would hold more than ``max_reversals_per_hour`` reversals."""
        limit = self.spec.max_reversals_per_hour
        if limit is None or self._direction <= 0:
            return False
        while self._reversals and self._reversals[0] <= now - 3600.0:
            self._reversals.popleft()
        return len(self._reversals) + 1 > limit

    def _record_direction(self, now: float, cur: int, to: int) -> None:
        if to == cur:
            return
        d = 1 if to > cur else -1
        if self._direction and d != self._direction:
            self._reversals.append(now)
        self._direction = d

    def _clamp(self, n: int) -> int:
        return max(self.spec.min_replicas, min(self.spec.max_replicas, n))
