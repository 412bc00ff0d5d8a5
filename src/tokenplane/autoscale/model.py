"""The autoscaler's inputs and outputs: what a policy sees of one pool and what it
decides. Pure data; the gateway shell (autoscale/gateway) and the simulator
(sim/) fill :class:`PoolSnapshot` and act on :class:`ScaleDecision`.

A pool is one model alias served on one engine profile. Replicas move through
``starting`` (cold start: weights loading) -> ``warm`` (loaded, not taking traffic)
or ``serving`` -> ``draining`` (no new requests, in-flight ones finish) -> gone. A
warm replica is promoted to serving in seconds; a starting one takes the profile's
cold-start time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

ReplicaPhase = Literal["starting", "warm", "serving", "draining"]


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One replica of the pool as the actuator sees it now."""

    id: str
    phase: ReplicaPhase
    since: float  # when it entered this phase (seconds, the caller's clock)
    kv_usage: float = 0.0  # 0..1, from the engine's metrics
    waiting: int = 0  # requests queued inside the engine
    running: int = 0  # requests the engine is running
    # where a ``starting`` replica is headed once loaded: taking traffic, or the warm pool
    target: Literal["serving", "warm"] = "serving"
    # tokens per second it delivered over the last interval (from the engine's
    # prompt/generation token counters): the capacity estimator's online correction
    prompt_tokens_per_s: float = 0.0
    output_tokens_per_s: float = 0.0


@dataclass(frozen=True, slots=True)
class PoolSnapshot:
    """What one pool looks like at ``now``: demand in tokens, the gateway queue, the
    replicas, and the SLO state of the SLOs that select the pool's alias.

    ``prompt_tokens_per_s``: uncached prompt tokens arriving per second over the
    last ``rate_window_s`` (the counts the gateway has before a request runs; the
    gateway measures over the time since its last snapshot, 0 = that time).
    ``output_tokens_per_s``: output tokens delivered per second, and
    ``requests_per_s`` requests, over the same window (how many requests stand behind
    the rates: their noise). ``output_tokens_in_flight``: predicted decode tokens of
    requests in flight. ``slo_burn``: the highest short-window burn rate of the SLOs selecting
    the pool (0 when none); ``slo_budget_left``: the lowest budget fraction left.
    """

    pool: str
    now: float
    replicas: tuple[ReplicaView, ...]
    prompt_tokens_per_s: float = 0.0
    output_tokens_per_s: float = 0.0
    output_tokens_in_flight: int = 0
    requests_per_s: float = 0.0
    rate_window_s: float = 0.0
    queue_requests: int = 0
    queue_tokens: int = 0
    queue_wait_s: float = 0.0  # the oldest queued request's wait
    slo_burn: float = 0.0
    slo_budget_left: float = 1.0

    def count(self, *phases: ReplicaPhase) -> int:
        return sum(1 for r in self.replicas if r.phase in phases)

    @property
    def serving_count(self) -> int:
        """Replicas serving or starting towards serving (what ``serving_from`` is)."""
        return sum(1 for r in self.replicas if r.phase == "serving"
                   or (r.phase == "starting" and r.target == "serving"))

    @property
    def warm_count(self) -> int:
        """Replicas warm or starting towards the warm pool (what ``warm_from`` is)."""
        return sum(1 for r in self.replicas if r.phase == "warm"
                   or (r.phase == "starting" and r.target == "warm"))


@dataclass(frozen=True, slots=True)
class ScaleDecision:
    """The desired pool: ``serving`` replicas taking traffic (including ones still
    starting towards it) and ``warm`` replicas loaded but idle. ``reasons`` are
    short stable words (``token_demand``, ``queue``, ``kv``, ``forecast``, ``slo_burn``,
    ``budget_cap``, ``min``, ``max``, ``max_step``, ``cooldown``, ``stabilising``,
    ``hysteresis``, ``warm_promotion``...), the first one the deciding reason;
    ``inputs`` the figures the decision read."""

    pool: str
    at: float
    serving_from: int
    serving_to: int
    warm_from: int
    warm_to: int
    reasons: tuple[str, ...]
    inputs: Mapping[str, float] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return self.serving_to != self.serving_from or self.warm_to != self.warm_from

    @property
    def direction(self) -> int:
        """+1 scale up, -1 scale down, 0 serving count unchanged."""
        return (self.serving_to > self.serving_from) - (self.serving_to < self.serving_from)


class AutoscalePolicy(Protocol):
    """A pure autoscaling policy: no I/O, no clock of its own. It may keep state
    between calls (stabilisation windows, the forecaster's history), fed only
    through its methods."""

    name: str

    def decide(self, snap: PoolSnapshot, now: float) -> ScaleDecision: ...
