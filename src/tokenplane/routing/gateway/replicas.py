"""The gateway's live view of its replicas, as :class:`EndpointState` snapshots.

Per replica: the gateway's own figures (requests, uncached prompt tokens and
predicted decode tokens in flight, counted on ``upstream.pool.Endpoint``), the
engine's figures (read directly from an in-process simulated engine, or the last
successful scrape of an HTTP replica's ``/metrics``), health (a failed scrape
marks it unhealthy until the next good one), a circuit breaker fed by the
upstream call's outcomes and by scrape failures, the model's price per token, and
the prefill time per token measured from the replica's times to first token. The
snapshot itself is built by ``routing.snapshot.replica_snapshot``, as in the
simulator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tokenplane.config.routing_schema import BreakerConfig
from tokenplane.engine.core import EngineStats
from tokenplane.routing.breaker import Breaker
from tokenplane.routing.endpoint import BREAKER_OPEN, EndpointState
from tokenplane.routing.engine_metrics import EngineMetrics
from tokenplane.routing.snapshot import (
    DEFAULT_MAX_SEQS,
    UNBOUNDED,
    EngineFigures,
    EngineReport,
    PrefillRate,
    replica_snapshot,
)
from tokenplane.upstream.pool import Endpoint

__all__ = ["DEFAULT_MAX_SEQS", "UNBOUNDED", "LiveEndpoint", "LiveView", "breaker_from"]


@dataclass(slots=True)
class LiveEndpoint:
    """One replica: the pool's :class:`Endpoint` plus what routing knows of it."""

    endpoint: Endpoint
    alias: str
    breaker: Breaker
    model_version: str = ""
    scrape_url: str | None = None  # HTTP engines: their /metrics
    local_stats: Callable[[], EngineStats] | None = None  # in-process simulated engines
    max_num_seqs: int = DEFAULT_MAX_SEQS
    slots_known: bool = False  # False: max_num_seqs is a guess the engine may exceed
    max_waiting: int = 8
    token_capacity: int = UNBOUNDED
    prefill_capacity: int = UNBOUNDED
    cost_per_token: float = 0.0  # the alias's prices (routing.snapshot.cost_per_token)
    prefill_rate: PrefillRate = field(default_factory=PrefillRate)  # measured from TTFT
    healthy: bool = True
    scraped: EngineMetrics | None = None
    scraped_at: float = 0.0
    scrape_failures: int = 0
    pending: int = 0  # released by the scheduler, not yet sent
    _figures: tuple[EngineMetrics | None, EngineFigures | None] = field(
        default=(None, None), init=False, repr=False)

    @property
    def id(self) -> str:
        return self.endpoint.id

    @property
    def pool(self) -> str:
        return self.alias

    def engine_figures(self) -> EngineReport | None:
        """In-process engines read now; HTTP engines as last scraped; else None."""
        if self.local_stats is not None:
            return self.local_stats()
        m = self.scraped
        if m is None:
            return None
        seen, figures = self._figures
        if seen is not m:  # a new scrape: its figures, once
            figures = EngineFigures(m.num_running or 0, m.num_waiting or 0, m.kv_usage or 0.0)
            self._figures = (m, figures)
        return figures

    def snapshot(self, now: float) -> EndpointState:
        ep = self.endpoint
        state = self.breaker.state(now)
        if not self.breaker.available(now):
            state = BREAKER_OPEN  # half-open with its probe out: not for new requests
        return replica_snapshot(  # self has every ReplicaFacts field: no spec to build
            self, self.engine_figures(),
            inflight_requests=ep.in_flight + self.pending,
            inflight_prefill_tokens=ep.prompt_tokens_in_flight,
            inflight_decode_tokens=ep.decode_tokens_in_flight,
            prefill_s_per_token=self.prefill_rate.value,
            healthy=self.healthy, breaker_state=state,
        )

    def available(self, now: float) -> bool:
        return self.healthy and not self.endpoint.draining and self.breaker.available(now)

    def idle(self) -> bool:
        """Nothing of this gateway's is bound to, waiting for or in flight on it."""
        ep = self.endpoint
        return ep.bound <= 0 and ep.in_flight <= 0 and self.pending <= 0


def breaker_from(cfg: BreakerConfig) -> Breaker:
    return Breaker(
        consecutive_failures=cfg.consecutive_failures, error_rate=cfg.error_rate,
        min_requests=cfg.min_requests, window_s=cfg.window_s, open_s=cfg.open_s,
        max_open_s=cfg.max_open_s, probe_successes=cfg.probe_successes,
    )


@dataclass(slots=True)
class LiveView:
    """Every routable replica of every alias, by id and by alias, and the replicas
    still joining (scraped, not routed to until their first healthy scrape).

    Replicas come and go while the gateway runs (``membership``): ``add`` and
    ``remove`` replace an alias's list rather than change it in place, so a list
    being iterated (by a router, a scrape, a metrics collection) stays as it was."""

    by_id: dict[str, LiveEndpoint] = field(default_factory=dict)
    by_alias: dict[str, list[LiveEndpoint]] = field(default_factory=dict)
    joining: dict[str, LiveEndpoint] = field(default_factory=dict)

    def add(self, le: LiveEndpoint) -> None:
        self.joining.pop(le.id, None)
        self.by_id[le.id] = le
        self.by_alias[le.alias] = [*self.by_alias.get(le.alias, ()), le]

    def remove(self, le: LiveEndpoint) -> None:
        self.joining.pop(le.id, None)
        if self.by_id.get(le.id) is le:
            del self.by_id[le.id]
        eps = self.by_alias.get(le.alias)
        if eps is not None and le in eps:
            self.by_alias[le.alias] = [e for e in eps if e is not le]

    def of(self, alias: str, version: str | None = None) -> list[LiveEndpoint]:
        eps = self.by_alias.get(alias, [])
        return eps if not version else [e for e in eps if e.model_version == version]

    def snapshots(self, eps: Iterable[LiveEndpoint], now: float) -> list[EndpointState]:
        return [e.snapshot(now) for e in eps]

    def scraped(self) -> list[LiveEndpoint]:
        """Replicas to scrape: the routable ones and those joining."""
        return [e for e in (*self.by_id.values(), *self.joining.values())
                if e.scrape_url is not None]

    def observe_first_token(self, ep_id: str, ttft_s: float, prefill_tokens: int) -> None:
        """A streamed request's time to first token on ``ep_id`` (from the upstream
        call's start) and the prefill tokens it waited for there."""
        le = self.by_id.get(ep_id)
        if le is not None:
            le.prefill_rate.observe(ttft_s, prefill_tokens)

    def record(self, ep_id: str, now: float, ok: bool | None) -> None:
        """An upstream outcome: True success, False failure, None no outcome (cancelled)."""
        le = self.by_id.get(ep_id)
        if le is None:
            return
        if ok is None:
            le.breaker.release_probe(now)
        elif ok:
            le.breaker.record_success(now)
        else:
            le.breaker.record_failure(now)
