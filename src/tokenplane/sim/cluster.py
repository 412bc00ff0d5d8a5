"""A discrete-event, virtual-time cluster: N engine replicas behind one gateway.

The gateway runs the real routing profile (and, for policies with a gateway
queue, the real :class:`GatewayScheduler`). Engines are the simulated
vLLM-like :class:`tokenplane.engine.core.Engine`. Time jumps from event to event
(arrival, end of an engine step); nothing sleeps.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tokenplane.engine.core import (
    Engine,
    EngineRequest,
    EngineStats,
    FinishedRequest,
    StepResult,
)
from tokenplane.engine.profiles import EngineProfile
from tokenplane.routing.endpoint import EndpointState, RouteRequest
from tokenplane.routing.plugins import RoutingContext
from tokenplane.routing.profiles import PROFILES, build_profile
from tokenplane.routing.snapshot import ReplicaSpec, cost_per_token, replica_snapshot
from tokenplane.scheduling.scheduler import ClassRestriction, GatewayScheduler, QueuedRequest
from tokenplane.scheduling.slo import SloClass
from tokenplane.sim.workload import SimRequest
from tokenplane.slo.evaluator import SloEvaluator
from tokenplane.slo.protection import BudgetProtection
from tokenplane.slo.verdict import RequestFacts
from tokenplane.tokens.predictor import LengthKey, LengthPredictor

MODEL = "sim"  # the model alias every simulated replica serves (the length predictor's key)


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """A policy under test: a routing profile (a name of the profile table, or a
    config's profile dict), with or without the gateway queue."""

    name: str
    profile: str | Mapping[str, Any]
    gateway_queue: bool


def builtin_policies() -> dict[str, PolicySpec]:
    """Every routing profile of the table (routing/profiles.py) under its own name --
    baselines without the gateway queue, the gateway's profiles with it, as a gateway
    runs them by default -- plus ``vllm-fcfs``: seeded random choice, no queue."""
    out = {name: PolicySpec(name, name, not p.baseline) for name, p in PROFILES.items()}
    out["vllm-fcfs"] = PolicySpec("vllm-fcfs", "random", False)
    return out


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """Knobs of the simulated cluster and of the gateway's view of it.

    The gate's per-replica limits are given in seconds of engine work at the
    profile's per-token cost: ``prefill_budget_s`` for uncached prefill tokens
    in flight, ``token_budget_s`` for prefill plus predicted decode tokens in
    flight. ``max_waiting`` bounds requests queued inside each engine.
    ``prefix_index_blocks`` bounds the gateway's per-replica prefix index; 0
    derives it from the profile: max(100,000, HBM blocks + host-tier blocks), so a
    replica with a host KV tier is remembered for everything it still holds.
    ``price_input_per_mtok`` / ``price_output_per_mtok``: the model's prices per 1M
    tokens (decimal strings, as in config ``prices``), the snapshots'
    ``cost_per_token``. ``default_output_tokens``: the length predictor's
    prediction before it has history (config ``admission.default_output_tokens``).
    """

    replicas: int = 8
    scrape_interval_s: float = 0.05
    max_waiting: int = 4
    prefill_budget_s: float = 0.6
    token_budget_s: float = 0.4
    aging_tokens_per_s: float = 200.0
    promote_after: float = 0.5
    expire_interval_s: float = 1.0
    jitter: float = 0.0
    seed: int = 0
    prefix_index_blocks: int = 0
    price_input_per_mtok: str = "0.10"  # the embedded default model's prices
    price_output_per_mtok: str = "0.40"
    default_output_tokens: int = 256
    # run an engine's decode-only steps back to back up to the next outside event
    # (Engine.decode_until): the same steps, far fewer events; off: one event per step
    fast_decode: bool = False
    # expiry ticks every expire_interval_s even while the gateway queue is empty; off:
    # they pause then (without budget protection nothing happens on such a tick), so a
    # quiet stretch has no events at all (replay turns this off and fast_decode on)
    idle_ticks: bool = True


@dataclass(slots=True)
class RequestRecord:
    """What happened to one request."""

    req: SimRequest
    slo: SloClass
    predicted: int
    endpoint: int = -1
    dispatched: float = -1.0
    first_token: float = -1.0
    finish: float = -1.0
    output_tokens: int = 0
    cached_tokens: int = 0
    host_cached_tokens: int = 0
    preemptions: int = 0
    shed: bool = False
    shed_at: float = -1.0
    uncached_est: int = 0
    emitted: int = 0

    @property
    def done(self) -> bool:
        return self.finish >= 0.0

    @property
    def ttft(self) -> float:
        return self.first_token - self.req.arrival

    @property
    def e2e(self) -> float:
        return self.finish - self.req.arrival

    @property
    def tpot(self) -> float:
        if self.output_tokens <= 1:
            return 0.0
        return (self.finish - self.first_token) / (self.output_tokens - 1)

    def facts(self, alias: str) -> RequestFacts:
        """What an SLI needs of this request, as the gateway would record it: a stream
        of ``alias``; finished is a 200, shed is a 503."""
        done = self.done and not self.shed
        return RequestFacts(
            ts=self.finish if self.finish >= 0 else max(self.shed_at, self.req.arrival),
            model=alias,
            tenant=self.req.tenant, department="", app="", slo_class=self.req.slo_class,
            status="ok" if done else "error", http_status=200 if done else 503,
            error_code=None if done else "overloaded", stream=True,
            ttft_s=self.ttft if done and self.first_token >= 0 else None,
            tpot_s=self.tpot if done and self.output_tokens >= 2 else None,
            latency_s=self.e2e if done else None,
        )

    def met_slo(self) -> bool:
        if not self.done or self.shed:
            return False
        return self.slo.met(ttft_s=self.ttft, tpot_s=self.tpot, e2e_s=self.e2e)


@dataclass(frozen=True, slots=True)
class Slowdown:
    """A fault to inject: replica ``replica``'s steps take ``factor`` times as long
    between ``start_s`` and ``end_s`` of virtual time (a degraded GPU)."""

    replica: int
    start_s: float
    end_s: float
    factor: float


class ClusterSim:
    """Runs one policy over one workload."""

    def __init__(
        self,
        policy: PolicySpec,
        engine_profile: EngineProfile,
        classes: Mapping[str, SloClass],
        cfg: ClusterConfig,
        protection: BudgetProtection | None = None,
        alias: str = MODEL,
        slowdowns: Sequence[Slowdown] = (),
    ) -> None:
        self.policy = policy
        self.slowdowns = tuple(slowdowns)
        # budget-protecting admission: the gateway's policy on the simulated clock,
        # fed every finished or shed request, deciding at each expiry tick
        self.protection = protection
        self.alias = alias
        self.restrictions: dict[str, ClassRestriction] = {}
        self.slo_eval = (SloEvaluator([s for _, s in protection.specs])
                         if protection is not None else None)
        self.restricted_s = 0.0  # virtual seconds spent with a restriction in force
        self.profile = engine_profile
        self.classes = classes
        self.cfg = cfg
        index_blocks = cfg.prefix_index_blocks or max(
            100_000, engine_profile.kv_capacity_blocks + engine_profile.host_kv_blocks
        )
        self.ctx = RoutingContext(
            block_size=engine_profile.block_size,
            prefix_capacity_blocks=index_blocks,
            seed=cfg.seed,
        )
        self.router = build_profile(policy.profile, self.ctx)
        self.engines = [
            Engine(engine_profile, seed=cfg.seed * 1009 + i, jitter=cfg.jitter)
            for i in range(cfg.replicas)
        ]
        self.ids = [f"e{i}" for i in range(cfg.replicas)]
        self._index = {eid: i for i, eid in enumerate(self.ids)}
        n = cfg.replicas
        self.inflight = [0] * n
        self.inflight_prefill = [0] * n
        self.inflight_decode = [0] * n
        self._stats: list[EngineStats] = [e.stats() for e in self.engines]
        self._scraped_at = 0.0
        # the gateway's own predictor (pipeline/route_stage.py), keyed (tenant, app, model)
        self.predictor = LengthPredictor(default=cfg.default_output_tokens)
        self.scheduler: GatewayScheduler | None = None
        if policy.gateway_queue:
            self.scheduler = GatewayScheduler(
                self.router,
                aging_tokens_per_s=cfg.aging_tokens_per_s,
                promote_after=cfg.promote_after,
                restrictions=self.restrictions,
            )
        per_token = max(1e-9, engine_profile.a_s_per_token)
        self.prefill_capacity = max(
            engine_profile.block_size, int(cfg.prefill_budget_s / per_token)
        )
        self.token_capacity = max(engine_profile.block_size, int(cfg.token_budget_s / per_token))
        cost = cost_per_token(cfg.price_input_per_mtok, cfg.price_output_per_mtok)
        self.specs = [
            ReplicaSpec(
                id=eid, max_num_seqs=engine_profile.max_num_seqs, slots_known=True,
                max_waiting=cfg.max_waiting, token_capacity=self.token_capacity,
                prefill_capacity=self.prefill_capacity, cost_per_token=cost,
            )
            for eid in self.ids
        ]
        self.records: dict[str, RequestRecord] = {}
        self._last_now = 0.0
        self._horizon = float("inf")  # the next event outside the engines (run())

    # --- the gateway's view ----------------------------------------------------------
    def _scrape(self, now: float, force: bool = False) -> None:
        if force or now - self._scraped_at >= self.cfg.scrape_interval_s:
            self._stats = [e.stats() for e in self.engines]
            self._scraped_at = now

    def snapshots(self) -> list[EndpointState]:
        s_per_token = self.profile.a_s_per_token
        return [
            replica_snapshot(
                spec, self._stats[i],
                inflight_requests=self.inflight[i],
                inflight_prefill_tokens=self.inflight_prefill[i],
                inflight_decode_tokens=self.inflight_decode[i],
                prefill_s_per_token=s_per_token,
            )
            for i, spec in enumerate(self.specs)
        ]

    @staticmethod
    def length_key(r: SimRequest) -> LengthKey:
        return LengthKey(r.tenant, "", MODEL)

    def _route_request(self, rec: RequestRecord) -> RouteRequest:
        r = rec.req
        return RouteRequest(
            request_id=r.request_id,
            tenant=r.tenant,
            prompt_tokens=r.prompt_tokens,
            predicted_output=rec.predicted,
            block_hashes=r.block_hashes,
        )

    def _dispatch(self, rec: RequestRecord, eid: str, now: float) -> None:
        i = self._index[eid]
        r = rec.req
        cached = min(r.prompt_tokens - 1, self.ctx.last_matched_blocks * self.profile.block_size)
        rec.uncached_est = max(0, r.prompt_tokens - max(0, cached))
        rec.endpoint = i
        rec.dispatched = now
        self.inflight[i] += 1
        self.inflight_prefill[i] += rec.uncached_est
        self.inflight_decode[i] += rec.predicted
        self.engines[i].add(
            EngineRequest(r.request_id, r.prompt_tokens, r.output_tokens, r.block_hashes, now),
            now,
        )

    # --- events ----------------------------------------------------------------------
    def _arrive(self, r: SimRequest, now: float) -> None:
        slo = self.classes[r.slo_class]
        rec = RequestRecord(
            req=r, slo=slo, predicted=self.predictor.predict(self.length_key(r), r.prompt_tokens)
        )
        self.records[r.request_id] = rec
        route = self._route_request(rec)
        if self.scheduler is None:
            self._scrape(now)
            eid = self.router.route(route, self.snapshots())
            self._dispatch(rec, eid, now)
            return
        shed = self.scheduler.submit(QueuedRequest(route, slo, r.arrival, rec), now)
        if shed is not None:
            self._shed(rec, now)

    def _shed(self, rec: RequestRecord, now: float) -> None:
        rec.shed = True
        if self.slo_eval is not None:
            rec.shed_at = now
            self.slo_eval.observe(rec.facts(self.alias))

    def _release(self, now: float) -> int:
        sched = self.scheduler
        if sched is None or not len(sched):
            return 0
        self._scrape(now)
        released = sched.release(self.snapshots(), now)
        for item, eid in released:
            assert isinstance(item.payload, RequestRecord)
            self._dispatch(item.payload, eid, now)
        return len(released)

    def _apply(self, res: StepResult, i: int, t: float) -> None:
        recs = self.records
        for rid in res.emitted:
            rec = recs[rid]
            if rec.first_token < 0:
                rec.first_token = t
                self.inflight_prefill[i] -= rec.uncached_est
            if rec.emitted < rec.predicted:
                self.inflight_decode[i] -= 1
            rec.emitted += 1
        for fin in res.finished:
            self._finish(recs[fin.request_id], fin, i, t)

    def _finish(self, rec: RequestRecord, fin: FinishedRequest, i: int, t: float) -> None:
        rec.finish = t
        rec.output_tokens = fin.output_tokens
        rec.cached_tokens = fin.cached_tokens
        rec.host_cached_tokens = fin.host_cached_tokens
        rec.preemptions = fin.preemptions
        self.inflight[i] -= 1
        if rec.emitted < rec.predicted:
            self.inflight_decode[i] -= rec.predicted - rec.emitted
        self.predictor.observe(self.length_key(rec.req), rec.req.prompt_tokens,
                               fin.output_tokens)
        if self.scheduler is not None:
            self.scheduler.settle(rec.req.tenant, rec.predicted, fin.output_tokens)
        if self.slo_eval is not None:
            self.slo_eval.observe(rec.facts(self.alias))

    def run(self, workload: Sequence[SimRequest], max_events: int = 50_000_000) -> None:
        """Replay the workload to the end (every request finished or shed)."""
        reqs = sorted(workload, key=lambda r: r.arrival)
        busy: list[tuple[float, int]] = []
        pending: list[StepResult | None] = [None] * len(self.engines)
        idx = 0
        now = 0.0
        next_expire = 0.0
        events = 0
        sched = self.scheduler
        while True:
            events += 1
            if events > max_events:
                raise RuntimeError("simulation exceeded max_events")
            t_arr = reqs[idx].arrival if idx < len(reqs) else float("inf")
            t_busy = busy[0][0] if busy else float("inf")
            t_tick = self._next_tick()
            now = min(t_arr, t_busy, t_tick)
            if now == float("inf"):
                if sched is not None and len(sched):
                    now = self._last_now
                    self._scrape(now, force=True)
                    if self._release(now) == 0:
                        raise RuntimeError("gateway queue blocked with an idle cluster")
                    self._horizon = next_expire
                    self._start_idle(busy, pending, now)
                    continue
                break
            self._last_now = now
            while busy and busy[0][0] <= now:
                t_end, i = heapq.heappop(busy)
                res = pending[i]
                pending[i] = None
                if res is not None:
                    self._apply(res, i, t_end)
            if now >= t_tick:
                self._on_tick(now)
            while idx < len(reqs) and reqs[idx].arrival <= now:
                self._arrive(reqs[idx], now)
                idx += 1
            if sched is not None:
                if now >= next_expire:
                    self._protect(now)
                    for shed in sched.expire(now):
                        assert isinstance(shed.item.payload, RequestRecord)
                        self._shed(shed.item.payload, now)
                    if self.cfg.idle_ticks or self.protection is not None or len(sched):
                        next_expire = now + self.cfg.expire_interval_s
                self._release(now)
            # engines may run ahead (decode only) to the next arrival or expiry tick:
            # the events at which anything outside an engine happens
            nxt = min(reqs[idx].arrival if idx < len(reqs) else float("inf"),
                      self._next_tick())
            self._horizon = (min(nxt, next_expire) if sched is not None and next_expire > now
                             else nxt)
            self._start_idle(busy, pending, now)

    # --- timers of a subclass (an autoscaler's ticks, replicas becoming ready) ------
    def _next_tick(self) -> float:
        """When :meth:`_on_tick` next wants to run (never, here)."""
        return float("inf")

    def _on_tick(self, now: float) -> None:
        """Runs at :meth:`_next_tick`'s time, before that instant's arrivals."""

    def _protect(self, now: float) -> None:
        if self.protection is None or self.slo_eval is None:
            return
        if self.restrictions:
            self.restricted_s += self.cfg.expire_interval_s
        new = self.protection.decide(self.slo_eval, now)
        if new != self.restrictions:
            self.restrictions.clear()
            self.restrictions.update(new)

    def _fast_ok(self) -> bool:
        """Whether an engine's decode steps may run ahead to the next arrival: nothing
        but an arrival can then touch it (no gateway queue to release from, no budget
        protection deciding on the expiry ticks)."""
        return (self.cfg.fast_decode and self.protection is None
                and (self.scheduler is None or not len(self.scheduler)))

    def _start_idle(
        self, busy: list[tuple[float, int]], pending: list[StepResult | None], now: float
    ) -> None:
        fast = self._fast_ok()
        for s in self.slowdowns:
            self.engines[s.replica].slowdown = (
                s.factor if s.start_s <= now < s.end_s else 1.0)
        for i, eng in enumerate(self.engines):
            if pending[i] is None and eng.has_work():
                t = now
                if fast:
                    t, emitted, finished = eng.decode_until(now, self._horizon)
                    if emitted:
                        self._apply_fast(i, emitted, finished)
                    if not eng.has_work():
                        continue
                res = (eng.decode_step(t) if fast else None) or eng.step(t)
                pending[i] = res
                # a step that did nothing (blocked admission) still advances a floor
                dur = res.duration if res.duration > 0 else max(1e-4, self.profile.t_floor_s)
                heapq.heappush(busy, (t + dur, i))

    def _apply_fast(self, i: int, emitted: dict[str, int],
                    finished: list[tuple[FinishedRequest, float]]) -> None:
        """:meth:`_apply` for a run of decode steps (tokens, then each finish at the
        end of its own step)."""
        recs = self.records
        for rid, n in emitted.items():
            rec = recs[rid]
            self.inflight_decode[i] -= min(n, max(0, rec.predicted - rec.emitted))
            rec.emitted += n
        for fin, t in finished:
            self._finish(recs[fin.request_id], fin, i, t)
