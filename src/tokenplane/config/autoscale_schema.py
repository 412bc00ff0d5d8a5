"""Config section ``autoscale:``: token-based autoscaling of model pools
(docs/AUTOSCALING_GATEWAY.md). Off unless ``pools`` names at least one alias. The
schema only: ``autoscale.gateway.build`` turns it into the policy's spec and an
actuator.

    autoscale:
      interval: 10s
      pools:
        sim-llama3-8b:
          min_replicas: 1
          max_replicas: 6
          warm_min: 1
          price_per_replica_hour: 2.5
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tokenplane.config.keda_schema import KedaConfig
from tokenplane.config.kubernetes_scale_schema import KubernetesScaleConfig
from tokenplane.config.slo_schema import parse_duration

ActuatorKind = Literal["embedded", "kubernetes", "keda"]
PolicyName = Literal["tokenplane", "static-peak", "static-mean", "hpa-kv", "keda-queue",
                     "aibrix-kpa"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _duration(v: object) -> float:
    if not isinstance(v, str | int | float):
        raise ValueError("a duration is a number of seconds or a string such as '5m'")
    return parse_duration(v)


def _duration_or_zero(v: object) -> float:
    if v == 0 or v == "0":
        return 0.0
    return _duration(v)


class AutoscalePoolConfig(_Strict):
    """One pool (a model alias on its engine profile); the fields map one to one onto
    the policy's ``autoscale.spec.PoolPolicySpec`` (docs/AUTOSCALING.md).

    ``policy``: the policy's name (``tokenplane``, or one of the simulator's baselines:
    ``hpa-kv``, ``keda-queue``, ``aibrix-kpa``, ``static-peak``, ``static-mean``).
    ``min_replicas`` / ``max_replicas`` bound the serving replicas; ``max_step`` is the
    most replicas one decision adds or removes. ``price_per_replica_hour`` (serving) and
    ``warm_price_per_replica_hour`` (loaded, idle; default the serving price) cost the
    pool; ``budget_per_hour`` caps what serving and warm replicas cost (none: no cap).
    ``hysteresis``: the band below the target utilisation a scale-down must leave.
    ``scale_up_window`` / ``scale_down_window``: stabilisation windows (the lowest
    up-recommendation / highest down-recommendation over the window wins);
    ``cooldown``: a scale-down waits this long after the last scale-up (15 minutes).
    ``warm_min`` .. ``warm_max``: replicas kept loaded and idle, sized from the
    forecast; ``promote``: how long a warm replica takes to take traffic.
    ``target_utilisation`` of each replica's token capacity, for the demand
    ``arrival_sigmas`` standard deviations of the arrivals within a cold start above
    the estimate (a quiet pool keeps more room than a busy one; 0: none);
    ``replica_tokens_per_s``: that capacity (default: from the engine profile).
    ``cold_start``: a new replica's start-up time (default: from the engine profile's
    weights; the embedded actuator waits it for real). ``burn_threshold``: an SLO burn
    rate above it counts as burning. ``max_reversals_per_hour``: flap damping (a
    scale-down that would reverse a scale-up waits while it would make the last hour
    hold more reversals than this; scale-ups never wait; null: off).
    ``actuator``: ``embedded`` (simulated in-process replicas; the default for ``type:
    sim`` backends without ``base_url``), ``kubernetes`` or ``keda``."""

    policy: PolicyName = "tokenplane"
    min_replicas: int = Field(1, ge=0, le=4096)
    max_replicas: int = Field(8, ge=1, le=4096)
    max_step: int = Field(4, ge=1, le=4096)
    price_per_replica_hour: float = Field(2.0, ge=0)
    warm_price_per_replica_hour: float | None = Field(None, ge=0)
    budget_per_hour: float | None = Field(None, gt=0)
    hysteresis: float = Field(0.1, ge=0, lt=1)
    scale_up_window: float = 60.0
    scale_down_window: float = 300.0
    cooldown: float = 900.0
    warm_min: int = Field(0, ge=0, le=4096)
    warm_max: int = Field(2, ge=0, le=4096)
    promote: float = 5.0
    target_utilisation: float = Field(0.8, gt=0, le=1)
    arrival_sigmas: float = Field(3.0, ge=0, le=10)
    replica_tokens_per_s: float = Field(0.0, ge=0)
    cold_start: float | None = None
    burn_threshold: float = Field(1.0, gt=0)
    max_reversals_per_hour: int | None = Field(2, ge=1, le=3600)
    actuator: ActuatorKind | None = None  # None: embedded for in-process sim backends
    # actuator kubernetes: the workload scaled (and its warm twin)
    kubernetes: KubernetesScaleConfig | None = None

    @field_validator("scale_up_window", "scale_down_window", "cooldown", "promote",
                     mode="before")
    @classmethod
    def _windows(cls, v: object) -> float:
        return _duration_or_zero(v)

    @field_validator("cold_start", mode="before")
    @classmethod
    def _cold(cls, v: object) -> float | None:
        return None if v is None else _duration_or_zero(v)

    @model_validator(mode="after")
    def _bounds(self) -> AutoscalePoolConfig:
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas ({self.min_replicas}) must not exceed "
                             f"max_replicas ({self.max_replicas})")
        if self.warm_min > self.warm_max:
            raise ValueError(f"warm_min ({self.warm_min}) must not exceed "
                             f"warm_max ({self.warm_max})")
        if (self.actuator == "kubernetes") != (self.kubernetes is not None):
            raise ValueError("actuator: kubernetes needs the kubernetes section (the "
                             "workload to scale), and only it reads that section")
        if self.budget_per_hour is not None and self.price_per_replica_hour <= 0:
            raise ValueError("budget_per_hour needs price_per_replica_hour (the budget "
                             "caps the pool at budget / price replicas)")
        return self


class AutoscaleConfig(_Strict):
    """``interval``: how often the controller decides (every pool). ``history``: how far
    back the ledger is read at start to teach the forecaster its times of day (0: not
    at all). ``decisions_kept``:
    decisions kept in memory for ``GET /admin/v1/autoscale``; every decision is also
    appended to ``<data_dir>/autoscale/decisions.jsonl``. ``pools``: by model alias.
    ``keda``: the KEDA external scaler that pools with ``actuator: keda`` publish their
    decisions on (docs/KEDA.md)."""

    interval: float = 10.0
    history: float = 7 * 86400.0
    decisions_kept: int = Field(500, ge=1, le=100_000)
    pools: dict[str, AutoscalePoolConfig] = Field(default_factory=dict)
    keda: KedaConfig = Field(default_factory=lambda: KedaConfig())

    @field_validator("interval", mode="before")
    @classmethod
    def _interval(cls, v: object) -> float:
        return _duration(v)

    @field_validator("history", mode="before")
    @classmethod
    def _history(cls, v: object) -> float:
        return _duration_or_zero(v)

    @property
    def enabled(self) -> bool:
        return bool(self.pools)
