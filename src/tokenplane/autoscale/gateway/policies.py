"""The policies a pool may name in ``autoscale.pools.<alias>.policy``."""

from __future__ import annotations

from tokenplane.autoscale.model import AutoscalePolicy
from tokenplane.config.autoscale_schema import AutoscalePoolConfig
from tokenplane.engine.profiles import EngineProfile


def make_policy(alias: str, cfg: AutoscalePoolConfig, profile: EngineProfile,
                cold_start_s: float) -> AutoscalePolicy:
    raise ValueError(f"autoscale.pools.{alias}.policy: unknown policy {cfg.policy!r}")
