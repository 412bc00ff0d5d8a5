"""One pool's autoscaling limits and targets: a plain frozen dataclass with defaults.

The config schema (``autoscale:`` section, written by the gateway shell) maps onto
:class:`PoolPolicySpec`; the simulator builds one directly.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PoolPolicySpec:
    """Limits and targets of one pool (a model alias on one engine profile).

    Replicas: ``min_replicas`` .. ``max_replicas`` serving, at most ``max_step``
    added or removed per decision. Money: ``price_per_replica_hour`` for a serving
    (or starting, or draining) replica, ``warm_price_per_replica_hour`` for a warm
    one (loaded, idle: the same GPU unless the provider discounts it; None = the
    serving price); ``budget_per_hour`` caps serving + warm cost (None = no cap).
    Stability: ``hysteresis`` is the band below the target utilisation a scale-down
    must leave (0.1: scale down only while the smaller pool would run under 90% of
    the target); ``scale_up_window_s`` / ``scale_down_window_s`` are the
    stabilisation windows (the lowest up-recommendation / highest down-recommendation
    over the window wins, as HPA's behaviour does); ``cooldown_s`` is how long a
    scale-down waits after the last scale-up. Warm pool: ``warm_min`` .. ``warm_max``
    replicas, sized from the forecast's headroom; ``promote_s`` is how long a warm
    replica takes to take traffic. Demand: ``target_utilisation`` of each replica's
    token capacity, for the demand ``arrival_sigmas`` standard deviations of the
    arrivals within a cold start above the estimate (a quiet pool keeps more room
    than a busy one); ``cold_start_s`` the profile's cold start (also the forecast
    horizon); ``replica_tokens_per_s`` the per-replica capacity in tokens per second
    of the prompt/output mix at the profile's step-time model (0 = derive it from
    the profile). ``interval_s``: how often the actuator asks for a decision.
    ``max_reversals_per_hour``: flap damping -- a scale-down that would reverse the
    last scale-up waits while it would make the last hour hold more direction
    reversals than this (a scale-up is never held: an hour can go one over, by the
    scale-up answering the last scale-down allowed; None: off).
    """

    min_replicas: int = 1
    max_replicas: int = 8
    max_step: int = 4
    price_per_replica_hour: float = 2.0
    warm_price_per_replica_hour: float | None = None
    budget_per_hour: float | None = None
    hysteresis: float = 0.1
    scale_up_window_s: float = 60.0
    scale_down_window_s: float = 300.0
    cooldown_s: float = 900.0
    warm_min: int = 0
    warm_max: int = 2
    promote_s: float = 5.0
    target_utilisation: float = 0.8
    arrival_sigmas: float = 3.0
    cold_start_s: float = 120.0
    replica_tokens_per_s: float = 0.0
    interval_s: float = 10.0
    # SLO burn above this rate counts as burning (1.0: spending the budget exactly
    # at the rate that empties it at the end of the window)
    burn_threshold: float = 1.0
    max_reversals_per_hour: int | None = 2

    def __post_init__(self) -> None:
        if self.min_replicas < 0 or self.max_replicas < max(1, self.min_replicas):
            raise ValueError("need 0 <= min_replicas <= max_replicas and max_replicas >= 1")
        if self.max_step < 1:
            raise ValueError("max_step must be >= 1")
        if self.price_per_replica_hour < 0 or (
                self.warm_price_per_replica_hour is not None
                and self.warm_price_per_replica_hour < 0):
            raise ValueError("prices must be >= 0")
        if self.budget_per_hour is not None and self.budget_per_hour < 0:
            raise ValueError("budget_per_hour must be >= 0")
        if not 0.0 <= self.hysteresis < 1.0:
            raise ValueError("hysteresis must be in [0, 1)")
        if min(self.scale_up_window_s, self.scale_down_window_s, self.cooldown_s,
               self.promote_s, self.cold_start_s) < 0:
            raise ValueError("windows, cooldown, promote_s and cold_start_s must be >= 0")
        if self.warm_min < 0 or self.warm_max < self.warm_min:
            raise ValueError("need 0 <= warm_min <= warm_max")
        if not 0.0 < self.target_utilisation <= 1.0:
            raise ValueError("target_utilisation must be in (0, 1]")
        if self.arrival_sigmas < 0:
            raise ValueError("arrival_sigmas must be >= 0")
        if self.max_reversals_per_hour is not None and self.max_reversals_per_hour < 1:
            raise ValueError("max_reversals_per_hour must be >= 1 or None")
        if self.replica_tokens_per_s < 0 or self.interval_s <= 0:
            raise ValueError("replica_tokens_per_s must be >= 0 and interval_s > 0")

    @property
    def warm_price(self) -> float:
        if self.warm_price_per_replica_hour is None:
            return self.price_per_replica_hour
        return self.warm_price_per_replica_hour

    def affordable(self, serving: int, warm: int) -> bool:
        """Whether ``serving`` + ``warm`` replicas fit the money budget per hour."""
        if self.budget_per_hour is None:
            return True
        cost = serving * self.price_per_replica_hour + warm * self.warm_price
        return cost <= self.budget_per_hour + 1e-9
