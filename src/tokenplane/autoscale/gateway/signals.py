"""What the gateway knows of one pool's demand, as the policy's :class:`PoolSnapshot`.

- token demand: the pool's cumulative tallies (``upstream.pool.Pool``: requests bound
  to a replica, their uncached prompt tokens, output tokens delivered), turned into
  rates over the time since the previous snapshot; the predicted decode tokens in
  flight on its replicas (``Endpoint.decode_tokens_in_flight``);
- the gateway's scheduler queues of the alias (requests, predicted tokens, the oldest
  wait) when scheduling is on;
- each replica's engine figures (KV use, waiting, running) from the live view, read
  from an in-process engine or the last scrape of an HTTP one;
- the SLO state of the SLOs that select the alias (or every model): the highest burn
  rate over their shortest alert window and the lowest budget left.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tokenplane.autoscale.model import PoolSnapshot, ReplicaView
from tokenplane.routing.gateway.replicas import LiveEndpoint, LiveView
from tokenplane.scheduling.gateway.hub import SchedulerHub
from tokenplane.slo.evaluator import SliStatus
from tokenplane.upstream.pool import Pool

SloStatus = Callable[[], Sequence[SliStatus]]


@dataclass(slots=True)
class _Tally:
    at: float
    requests: int
    prompt: int
    output: int


class PoolSignals:
    """Builds the snapshots of one pool (one per controller round)."""

    def __init__(self, alias: str, pool: Pool, live: LiveView, hub: SchedulerHub | None,
                 slo_status: SloStatus | None, slo_names: Sequence[str],
                 queue_clock: Callable[[], float]) -> None:
        self.alias = alias
        self.pool = pool
        self.live = live
        self.hub = hub
        self.slo_status = slo_status
        self.slo_names = frozenset(slo_names)
        self.queue_clock = queue_clock  # the scheduler's clock (arrivals are on it)
        self._last: _Tally | None = None
        # replica id -> (when, prompt tokens, generation tokens) its engine had counted
        self._tokens: dict[str, tuple[float, float, float]] = {}

    def snapshot(self, replicas: Sequence[ReplicaView], now: float) -> PoolSnapshot:
        p = self.pool
        tally = _Tally(now, p.admitted_requests, p.admitted_prompt_tokens,
                       p.delivered_output_tokens)
        last, self._last = self._last, tally
        rps = prompt_ps = output_ps = dt = 0.0
        if last is not None and now > last.at:
            dt = now - last.at
            rps = (tally.requests - last.requests) / dt
            prompt_ps = (tally.prompt - last.prompt) / dt
            output_ps = (tally.output - last.output) / dt
        present = {r.id for r in replicas}
        for gone in [k for k in self._tokens if k not in present]:
            del self._tokens[gone]
        in_flight = sum(max(0, e.decode_tokens_in_flight) for e in p.endpoints)
        q_requests, q_tokens, q_wait = self._queue()
        burn, left = self._slo()
        return PoolSnapshot(
            pool=self.alias, now=now, replicas=tuple(self._engine(r, now) for r in replicas),
            prompt_tokens_per_s=prompt_ps, output_tokens_per_s=output_ps,
            output_tokens_in_flight=in_flight, requests_per_s=rps, rate_window_s=dt,
            queue_requests=q_requests, queue_tokens=q_tokens, queue_wait_s=q_wait,
            slo_burn=burn, slo_budget_left=left,
        )

    def _engine(self, r: ReplicaView, now: float) -> ReplicaView:
        """The replica with the engine's figures the actuator left at 0, and the token
        rates it delivered since the last snapshot (its engine's token counters)."""
        le = self.live.by_id.get(r.id)
        if le is None:
            return r
        figures = le.engine_figures()
        if figures is not None and not (r.kv_usage or r.waiting or r.running):
            r = dataclasses.replace(r, kv_usage=float(figures.kv_usage),
                                    waiting=int(figures.num_waiting),
                                    running=int(figures.num_running))
        totals = _token_totals(le)
        if totals is None:
            return r
        last = self._tokens.get(r.id)
        self._tokens[r.id] = (now, *totals)
        if last is None or now <= last[0] or r.prompt_tokens_per_s or r.output_tokens_per_s:
            return r
        dt = now - last[0]
        return dataclasses.replace(r, prompt_tokens_per_s=max(0.0, totals[0] - last[1]) / dt,
                                   output_tokens_per_s=max(0.0, totals[1] - last[2]) / dt)

    def _queue(self) -> tuple[int, int, float]:
        hub = self.hub
        if hub is None:
            return 0, 0, 0.0
        now = self.queue_clock()
        n = tokens = 0
        wait = 0.0
        for (alias, _), sched in hub.queues.items():
            if alias == self.alias:
                qn, qt, qw = sched.backlog(now)
                n, tokens, wait = n + qn, tokens + qt, max(wait, qw)
        return n, tokens, wait

    def _slo(self) -> tuple[float, float]:
        if self.slo_status is None or not self.slo_names:
            return 0.0, 1.0
        burn, left = 0.0, 1.0
        for s in self.slo_status():
            if s.slo not in self.slo_names:
                continue
            if s.burn:
                burn = max(burn, s.burn[min(s.burn)])
            left = min(left, s.budget.remaining)
        return burn, left


def _token_totals(le: LiveEndpoint) -> tuple[float, float] | None:
    """(prompt, generation) tokens the replica's engine counted since it started."""
    if le.local_stats is not None:
        st = le.local_stats()
        return float(st.prompt_tokens_total), float(st.generation_tokens_total)
    m = le.scraped
    if m is None or m.prompt_tokens_total is None or m.generation_tokens_total is None:
        return None
    return m.prompt_tokens_total, m.generation_tokens_total
