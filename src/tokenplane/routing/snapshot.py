"""The one builder of replica snapshots (:class:`EndpointState`).

The gateway's live view (``routing/gateway/replicas.py``) and the cluster simulator
(``sim/cluster.py``) both describe a replica with the same three parts and build
its snapshot with :func:`replica_snapshot`, so every field is filled the same way
on both sides:

* :class:`ReplicaSpec`, what is known before the replica serves: its pool,
  version, slots, queue and token limits, and ``cost_per_token`` from the model's
  prices (:func:`cost_per_token`);
* :class:`EngineFigures`, what the engine says (running, waiting, KV use): read
  in process, or the last scrape of its ``/metrics``; None when unknown;
* the gateway's own live figures (requests, uncached prefill tokens and predicted
  decode tokens in flight), the prefill time per token (the engine profile's when
  it is known, else :class:`PrefillRate`, measured from time to first token),
  health and breaker state.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol

from tokenplane.routing.endpoint import BREAKER_CLOSED, EndpointState

UNBOUNDED = 1 << 40  # a limit the gateway does not know
DEFAULT_MAX_SEQS = 256
DEFAULT_PREFILL_S_PER_TOKEN = 7e-5  # ~ an 8B model on one A100 (llama3-8b-a100: 67 us)
_PER_MTOK = Decimal(1_000_000)


def cost_per_token(input_per_mtok: Decimal | float | str, output_per_mtok: Decimal | float | str
                   ) -> float:
    """One token's price: the mean of the input and output prices (per 1M tokens in
    config) per token, in the prices' currency. The routing ``cost`` scorer only
    compares it between replicas, so any blend that grows with both prices would do."""
    total = Decimal(str(input_per_mtok)) + Decimal(str(output_per_mtok))
    return float(total / 2 / _PER_MTOK)


@dataclass(frozen=True, slots=True)
class ReplicaSpec:
    """What is known of a replica before it serves (config, engine profile, prices).

    ``slots_known`` False: ``max_num_seqs`` is a guess the engine may exceed (an
    HTTP engine without ``scheduling.max_num_seqs``), raised to what it reports
    running while it reports nothing waiting.
    """

    id: str
    pool: str = "default"
    model_version: str = ""
    max_num_seqs: int = DEFAULT_MAX_SEQS
    slots_known: bool = True
    max_waiting: int = 8
    token_capacity: int = UNBOUNDED
    prefill_capacity: int = UNBOUNDED
    cost_per_token: float = 0.0


@dataclass(frozen=True, slots=True)
class EngineFigures:
    """What the engine reports: requests running and waiting, KV-cache use (0..1)."""

    num_running: int = 0
    num_waiting: int = 0
    kv_usage: float = 0.0


class ReplicaFacts(Protocol):
    """Anything with the fields of a :class:`ReplicaSpec` (the spec itself, or the
    gateway's live endpoint, which holds them as it is: no copy per snapshot)."""

    @property
    def id(self) -> str: ...
    @property
    def pool(self) -> str: ...
    @property
    def model_version(self) -> str: ...
    @property
    def max_num_seqs(self) -> int: ...
    @property
    def slots_known(self) -> bool: ...
    @property
    def max_waiting(self) -> int: ...
    @property
    def token_capacity(self) -> int: ...
    @property
    def prefill_capacity(self) -> int: ...
    @property
    def cost_per_token(self) -> float: ...


class EngineReport(Protocol):
    """Anything with the engine's three figures (:class:`EngineFigures`, the
    simulated engine's ``EngineStats``)."""

    @property
    def num_running(self) -> int: ...
    @property
    def num_waiting(self) -> int: ...
    @property
    def kv_usage(self) -> float: ...


def replica_snapshot(
    spec: ReplicaFacts,
    engine: EngineReport | None,
    *,
    inflight_requests: int,
    inflight_prefill_tokens: int,
    inflight_decode_tokens: int,
    prefill_s_per_token: float,
    healthy: bool = True,
    breaker_state: str = BREAKER_CLOSED,
) -> EndpointState:
    """The snapshot routing and the gateway queue read.

    Engine figures may be stale (scraped on an interval): what the gateway has in
    flight there is assumed running up to the replica's slots.
    """
    running, waiting, kv = (
        (engine.num_running, engine.num_waiting, engine.kv_usage) if engine else (0, 0, 0.0)
    )
    seqs = spec.max_num_seqs
    if not spec.slots_known and not waiting:
        seqs = max(seqs, running + 1)  # running more than the guess with none waiting
    running = max(running, min(inflight_requests, seqs))
    return EndpointState(
        id=spec.id,
        pool=spec.pool,
        healthy=healthy,
        num_running=running,
        num_waiting=waiting,
        kv_usage=kv,
        inflight_requests=inflight_requests,
        inflight_prefill_tokens=inflight_prefill_tokens,
        inflight_decode_tokens=inflight_decode_tokens,
        max_num_seqs=seqs,
        max_waiting=spec.max_waiting,
        token_capacity=spec.token_capacity,
        prefill_capacity=spec.prefill_capacity,
        prefill_s_per_token=prefill_s_per_token,
        cost_per_token=spec.cost_per_token,
        model_version=spec.model_version,
        breaker_state=breaker_state,
    )


@dataclass(slots=True)
class PrefillRate:
    """Seconds of prefill per token of one replica, measured from time to first token.

    Each observation is a request's time to first token (from the upstream call's
    start) over the prefill tokens it waited for: its own uncached prompt plus the
    uncached prefill already in flight on the replica when it was sent there --
    exactly the count the sticky-until-saturated scorer multiplies by this rate, so
    the scorer's estimate is fitted to what the replica measurably does. Starts at
    ``prior`` (counted as one sample); a plain mean while there are fewer than
    ``1 / alpha`` samples, an exponentially weighted one after. Requests with fewer
    than ``min_tokens`` such tokens are not counted (their TTFT is mostly overhead).
    """

    prior: float = DEFAULT_PREFILL_S_PER_TOKEN
    alpha: float = 0.05
    min_tokens: int = 256
    samples: int = 0
    _value: float = -1.0

    @property
    def value(self) -> float:
        return self.prior if self._value < 0 else self._value

    def observe(self, ttft_s: float, prefill_tokens: int) -> None:
        if prefill_tokens < self.min_tokens or not 0.0 < ttft_s < float("inf"):
            return
        x = ttft_s / prefill_tokens
        a = max(self.alpha, 1.0 / (self.samples + 2))
        self._value = self.value + a * (x - self.value)
        self.samples += 1
