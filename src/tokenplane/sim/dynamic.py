"""A cluster whose replica set an autoscaling policy changes, in virtual time.

:class:`AutoscaledCluster` is a :class:`ClusterSim` with ``cfg.replicas`` engines
allocated (the pool's maximum) of which only the *serving* ones take traffic.
Every ``interval_s`` of virtual time it builds a :class:`PoolSnapshot` from the
simulated state and acts on the policy's :class:`ScaleDecision` as an actuator
would: a new replica cold-starts (``cold_start_s``: the profile's, weights loading)
before it serves; a warm one is promoted in ``promote_s``; a removed one drains (no
new requests, in-flight ones finish) and then stops, or joins the warm pool.
The pool's token and request rates in the snapshot are measured over the last
interval, as the gateway's controller measures them (``rate_window_s``: a trailing
window instead, e.g. 60 s for what a Prometheus ``rate(...[1m])`` gives); the
replicas' own rates (the capacity correction's input) over the last interval.
It records replica-seconds per phase, the decisions, the cold starts and the
per-minute pool, for :mod:`tokenplane.sim.autoscale_run`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tokenplane.autoscale.model import AutoscalePolicy, PoolSnapshot, ReplicaView, ScaleDecision
from tokenplane.engine.core import FinishedRequest
from tokenplane.engine.profiles import EngineProfile
from tokenplane.routing.endpoint import EndpointState
from tokenplane.routing.snapshot import replica_snapshot
from tokenplane.scheduling.slo import SloClass
from tokenplane.sim.cluster import ClusterConfig, ClusterSim, PolicySpec, RequestRecord
from tokenplane.sim.workload import SimRequest

PHASES = ("off", "starting", "warm", "serving", "draining")


@dataclass(slots=True)
class Replica:
    """One engine slot of the pool and its lifecycle."""

    phase: str = "off"
    since: float = 0.0
    ready_at: float = 0.0
    target: str = "serving"  # where a starting replica goes once loaded
    after_drain: str = "off"  # where a draining one goes once empty
    cold: bool = False  # a starting replica loading weights (not a warm promotion)
    cold_idx: int = -1  # its entry in ScalingLog.cold_starts (a scale-up's cold start)
    prompt_total: int = 0
    gen_total: int = 0


@dataclass(slots=True)
class ScalingLog:
    """What the actuator did over the run."""

    decisions: list[ScaleDecision] = field(default_factory=list)
    cold_starts: list[tuple[float, float]] = field(default_factory=list)  # ordered, ready
    promotions: int = 0
    replica_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    # per minute: (serving incl. starting and draining, ready serving, warm incl. starting)
    minutes: dict[int, tuple[int, int, int]] = field(default_factory=dict)


class AutoscaledCluster(ClusterSim):
    """See the module docstring. ``initial`` serving and ``initial_warm`` warm
    replicas at time 0; ``end_s``: the policy stops deciding after it."""

    def __init__(
        self,
        routing: PolicySpec,
        engine_profile: EngineProfile,
        classes: Mapping[str, SloClass],
        cfg: ClusterConfig,
        autoscaler: AutoscalePolicy,
        *,
        initial: int,
        initial_warm: int = 0,
        interval_s: float = 10.0,
        cold_start_s: float | None = None,
        promote_s: float = 5.0,
        end_s: float = float("inf"),
        slo_target: float = 0.99,
        burn_window_s: float = 300.0,
        interactive_class: str = "interactive",
        pool: str = "sim",
        rate_window_s: float | None = None,
    ) -> None:
        super().__init__(routing, engine_profile, classes, cfg)
        if not 1 <= initial <= cfg.replicas or initial + initial_warm > cfg.replicas:
            raise ValueError("need 1 <= initial and initial + initial_warm <= replicas")
        self.autoscaler = autoscaler
        self.interval_s = interval_s
        self.cold_start_s = engine_profile.cold_start_s if cold_start_s is None else cold_start_s
        self.promote_s = promote_s
        self.end_s = end_s
        self.slo_target = slo_target
        self.burn_window_s = burn_window_s
        self.interactive = interactive_class
        self.pool = pool
        self.rate_window_s = interval_s if rate_window_s is None else rate_window_s
        # (t, dt, arrived, uncached prompt tokens, output tokens) of the last intervals
        self._window: deque[tuple[float, float, int, int, int]] = deque()
        self.replicas = [Replica() for _ in range(cfg.replicas)]
        for i in range(initial):
            self.replicas[i].phase = "serving"
        for i in range(initial, initial + initial_warm):
            self.replicas[i].phase = "warm"
        self._serving = [i for i, r in enumerate(self.replicas) if r.phase == "serving"]
        self.log = ScalingLog()
        self._tick_at = 0.0
        self._last_account = 0.0
        self._last_decide = 0.0
        self._next_ready = float("inf")
        # demand counters since the last decision
        self._arrived = 0
        self._uncached = 0
        self._queued_tokens = 0
        self._outcomes: deque[tuple[float, bool]] = deque()  # interactive (finish, met)

    # --- the gateway sees serving replicas only --------------------------------------
    def snapshots(self) -> list[EndpointState]:
        s_per_token = self.profile.a_s_per_token
        return [
            replica_snapshot(
                self.specs[i], self._stats[i],
                inflight_requests=self.inflight[i],
                inflight_prefill_tokens=self.inflight_prefill[i],
                inflight_decode_tokens=self.inflight_decode[i],
                prefill_s_per_token=s_per_token,
            )
            for i in self._serving
        ]

    # --- demand and outcome counters ---------------------------------------------
    def _arrive(self, r: SimRequest, now: float) -> None:
        self._arrived += 1
        if self.scheduler is not None:
            self._queued_tokens += r.prompt_tokens
        super()._arrive(r, now)

    def _dispatch(self, rec: RequestRecord, eid: str, now: float) -> None:
        super()._dispatch(rec, eid, now)
        self._uncached += rec.uncached_est
        if self.scheduler is not None:
            self._queued_tokens -= rec.req.prompt_tokens

    def _shed(self, rec: RequestRecord, now: float) -> None:
        super()._shed(rec, now)
        if self.scheduler is not None and rec.endpoint < 0:
            self._queued_tokens -= rec.req.prompt_tokens
        if rec.req.slo_class == self.interactive:
            self._outcomes.append((now, False))

    def _finish(self, rec: RequestRecord, fin: FinishedRequest, i: int, t: float) -> None:
        super()._finish(rec, fin, i, t)
        if rec.req.slo_class == self.interactive:
            self._outcomes.append((t, rec.met_slo()))

    # --- timers -------------------------------------------------------------------
    def _next_tick(self) -> float:
        return min(self._tick_at, self._next_ready)

    def _on_tick(self, now: float) -> None:
        self._account(now)
        self._lifecycle(now)
        if now >= self._tick_at:
            self._decide(now)
            self._tick_at = now + self.interval_s
            if self._tick_at > self.end_s:
                self._tick_at = float("inf")
        self._next_ready = min((r.ready_at for r in self.replicas if r.phase == "starting"),
                               default=float("inf"))

    def _account(self, now: float) -> None:
        now = min(now, self.end_s)  # the day's replica-seconds, not the tail's
        dt = now - self._last_account
        if dt > 0:
            for r in self.replicas:
                self.log.replica_s[r.phase] += dt
            self._last_account = now

    def _set(self, i: int, phase: str, now: float) -> None:
        r = self.replicas[i]
        r.phase = phase
        r.since = now
        self._serving = [k for k, x in enumerate(self.replicas) if x.phase == "serving"]

    def _lifecycle(self, now: float) -> None:
        for i, r in enumerate(self.replicas):
            if r.phase == "starting" and r.ready_at <= now:
                self._set(i, r.target, now)
            elif (r.phase == "draining" and self.inflight[i] == 0
                  and not self.engines[i].has_work()):
                self._set(i, r.after_drain, now)

    def finish_accounting(self, now: float) -> None:
        """Count replica-seconds up to ``now`` (the end of the day)."""
        self._account(now)

    # --- the snapshot the policy sees -----------------------------------------------
    def pool_snapshot(self, now: float) -> PoolSnapshot:
        dt = max(1e-9, now - self._last_decide)
        views: list[ReplicaView] = []
        gen_delta = 0
        for i, r in enumerate(self.replicas):
            st = self.engines[i].stats()
            self._stats[i] = st
            d_prompt = st.prompt_tokens_total - r.prompt_total
            d_gen = st.generation_tokens_total - r.gen_total
            r.prompt_total, r.gen_total = st.prompt_tokens_total, st.generation_tokens_total
            gen_delta += d_gen
            if r.phase == "off":
                continue
            phase = r.phase
            views.append(ReplicaView(
                id=self.ids[i], phase=phase,  # type: ignore[arg-type]
                since=r.since, kv_usage=st.kv_usage, waiting=st.num_waiting,
                running=st.num_running,
                target="warm" if r.target == "warm" else "serving",
                prompt_tokens_per_s=d_prompt / dt, output_tokens_per_s=d_gen / dt,
            ))
        while self._outcomes and self._outcomes[0][0] < now - self.burn_window_s:
            self._outcomes.popleft()
        burn = 0.0
        if self._outcomes:
            miss = sum(1 for _, ok in self._outcomes if not ok) / len(self._outcomes)
            burn = miss / max(1e-9, 1.0 - self.slo_target)
        queued = len(self.scheduler) if self.scheduler is not None else 0
        # pool rates over the trailing window (the last interval by default)
        self._window.append((now, dt, self._arrived, self._uncached, gen_delta))
        while self._window and self._window[0][0] <= now - self.rate_window_s + 1e-9:
            self._window.popleft()
        span = max(dt, sum(w[1] for w in self._window))
        snap = PoolSnapshot(
            pool=self.pool, now=now, replicas=tuple(views),
            prompt_tokens_per_s=sum(w[3] for w in self._window) / span,
            output_tokens_per_s=sum(w[4] for w in self._window) / span,
            output_tokens_in_flight=max(0, sum(self.inflight_decode)),
            requests_per_s=sum(w[2] for w in self._window) / span, rate_window_s=span,
            queue_requests=queued, queue_tokens=max(0, self._queued_tokens),
            slo_burn=burn,
        )
        self._arrived = 0
        self._uncached = 0
        self._last_decide = now
        return snap

    # --- the actuator --------------------------------------------------------------
    def _decide(self, now: float) -> None:
        snap = self.pool_snapshot(now)
        d = self.autoscaler.decide(snap, now)
        self.log.decisions.append(d)
        self._scale_serving(d.serving_to, now)
        self._scale_warm(d.warm_to, now)
        serving = sum(1 for r in self.replicas if r.phase in ("serving", "draining")
                      or (r.phase == "starting" and r.target == "serving"))
        warm = sum(1 for r in self.replicas if r.phase == "warm"
                   or (r.phase == "starting" and r.target == "warm"))
        self.log.minutes[int(now // 60)] = (serving, len(self._serving), warm)

    def _where(self, pred: str) -> list[int]:
        out: list[int] = []
        for i, r in enumerate(self.replicas):
            key = r.phase if r.phase != "starting" else f"starting-{r.target}"
            if r.phase == "draining":
                key = f"draining-{r.after_drain}"
            if key == pred:
                out.append(i)
        return out

    def _start(self, i: int, target: str, now: float, promote: bool) -> None:
        r = self.replicas[i]
        r.target = target
        r.cold = not promote
        r.ready_at = now + (self.promote_s if promote else self.cold_start_s)
        self._set(i, "starting", now)
        if promote:
            self.log.promotions += 1
        elif target == "serving":
            r.cold_idx = len(self.log.cold_starts)
            self.log.cold_starts.append((now, r.ready_at))
        else:
            r.cold_idx = -1

    def _scale_serving(self, want: int, now: float) -> None:
        cur = len(self._where("serving")) + len(self._where("starting-serving"))
        if want > cur:
            need = want - cur
            for i in self._where("warm")[:need]:
                self._start(i, "serving", now, promote=True)
                need -= 1
            for i in self._where("starting-warm")[:need]:
                r = self.replicas[i]
                r.target = "serving"
                if r.cold:
                    r.cold_idx = len(self.log.cold_starts)
                    self.log.cold_starts.append((now, r.ready_at))
                need -= 1
            for i in (self._where("draining-off") + self._where("draining-warm"))[:need]:
                self._set(i, "serving", now)
                need -= 1
            for i in self._where("off")[:need]:
                self._start(i, "serving", now, promote=False)
        elif want < cur:
            extra = cur - want
            for i in sorted(self._where("starting-serving"),
                            key=lambda k: -self.replicas[k].ready_at)[:extra]:
                r = self.replicas[i]
                if r.cold_idx >= 0:  # cancelled: nobody waits on it any longer
                    ordered, _ = self.log.cold_starts[r.cold_idx]
                    self.log.cold_starts[r.cold_idx] = (ordered, now)
                    r.cold_idx = -1
                self._set(i, "off", now)
                extra -= 1
            for i in sorted(self._where("serving"), key=lambda k: self.inflight[k])[:extra]:
                self.replicas[i].after_drain = "off"
                self._set(i, "draining", now)

    def _scale_warm(self, want: int, now: float) -> None:
        have = (len(self._where("warm")) + len(self._where("starting-warm"))
                + len(self._where("draining-warm")))
        if want > have:
            need = want - have
            for i in self._where("draining-off")[:need]:
                self.replicas[i].after_drain = "warm"
                need -= 1
            for i in self._where("off")[:need]:
                self._start(i, "warm", now, promote=False)
        elif want < have:
            extra = have - want
            for group in ("draining-warm", "starting-warm", "warm"):
                for i in self._where(group)[:extra]:
                    if group == "draining-warm":
                        self.replicas[i].after_drain = "off"
                    else:
                        self._set(i, "off", now)
                    extra -= 1


def run_autoscaled(sim: AutoscaledCluster, workload: Sequence[SimRequest],
                   day_end_s: float) -> None:
    """Replay ``workload`` and close the replica-second accounts at ``day_end_s``
    (the requests still running then finish, uncounted: the next day pays)."""
    sim.run(workload)
    sim.finish_accounting(day_end_s)
