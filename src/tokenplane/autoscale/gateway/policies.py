"""The policy a pool names in ``autoscale.pools.<alias>.policy``, built from its config.

``tokenplane`` (``autoscale.policy``) gets the pool's :class:`PoolPolicySpec`, the
engine profile's token costs (or the configured ``replica_tokens_per_s``) and a
demand forecaster (``TokenplanePolicy.for_profile``; the controller teaches it the
ledger's history at start); the baselines of the simulator run as their documentation
describes them, bounded by the pool's min/max: ``static-peak`` holds
``max_replicas``, ``static-mean`` the backend's configured ``replicas``; ``hpa-kv``,
``keda-queue`` and ``aibrix-kpa`` (a target of ``target_utilisation`` of the
profile's ``max_num_seqs`` requests in flight per pod) take their default targets.
"""

from __future__ import annotations

from tokenplane.autoscale.baselines import (
    AibrixKpaPolicy,
    HpaKvPolicy,
    KedaQueuePolicy,
    StaticPolicy,
)
from tokenplane.autoscale.model import AutoscalePolicy
from tokenplane.autoscale.policy import TokenplanePolicy
from tokenplane.autoscale.spec import PoolPolicySpec
from tokenplane.config.autoscale_schema import AutoscalePoolConfig
from tokenplane.engine.profiles import EngineProfile


def pool_spec(cfg: AutoscalePoolConfig, cold_start_s: float, interval_s: float) -> PoolPolicySpec:
    """The policy's spec from the pool's config (the fields map one to one)."""
    return PoolPolicySpec(
        min_replicas=cfg.min_replicas, max_replicas=cfg.max_replicas, max_step=cfg.max_step,
        price_per_replica_hour=cfg.price_per_replica_hour,
        warm_price_per_replica_hour=cfg.warm_price_per_replica_hour,
        budget_per_hour=cfg.budget_per_hour, hysteresis=cfg.hysteresis,
        scale_up_window_s=cfg.scale_up_window, scale_down_window_s=cfg.scale_down_window,
        cooldown_s=cfg.cooldown, warm_min=cfg.warm_min, warm_max=cfg.warm_max,
        promote_s=cfg.promote, target_utilisation=cfg.target_utilisation,
        arrival_sigmas=cfg.arrival_sigmas,
        cold_start_s=cold_start_s, replica_tokens_per_s=cfg.replica_tokens_per_s,
        interval_s=interval_s, burn_threshold=cfg.burn_threshold,
        max_reversals_per_hour=cfg.max_reversals_per_hour,
    )


def make_policy(cfg: AutoscalePoolConfig, spec: PoolPolicySpec, profile: EngineProfile,
                configured_replicas: int) -> AutoscalePolicy:
    lo, hi = spec.min_replicas, spec.max_replicas
    name = cfg.policy
    if name == "tokenplane":
        return TokenplanePolicy.for_profile(spec, profile)  # history: learned at start
    if name == "static-peak":
        return StaticPolicy(name, max(1, hi))
    if name == "static-mean":
        return StaticPolicy(name, max(1, lo, min(hi, configured_replicas)))
    if name == "hpa-kv":
        return HpaKvPolicy(lo, hi)
    if name == "keda-queue":
        return KedaQueuePolicy(lo, hi)
    if name == "aibrix-kpa":
        return AibrixKpaPolicy(lo, hi, max(1.0, profile.max_num_seqs * spec.target_utilisation))
    raise ValueError(f"unknown autoscaling policy {name!r}")
