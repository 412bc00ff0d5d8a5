"""The ``keda`` actuator factory ``autoscale.gateway.build`` takes (none unless
``autoscale.keda.listen`` is set)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tokenplane.autoscale.gateway.actuator import Actuator
from tokenplane.autoscale.gateway.keda.actuator import KedaActuator
from tokenplane.config.schema import GatewayConfig
from tokenplane.upstream.pool import Pool


def keda_actuators(
    config: GatewayConfig, pools: Mapping[str, Pool]
) -> dict[str, Callable[[list[str]], Actuator]]:
    """``{"keda": factory}`` when the KEDA scaler is configured: the factory builds one
    actuator for the pools with ``actuator: keda``, reading their replicas from the
    gateway's pools (the endpoints it routes to)."""
    listen = config.autoscale.keda.listen
    if listen is None:
        return {}

    def endpoints(alias: str) -> list[tuple[str, bool]]:
        return [(e.id, e.draining) for e in pools[alias].endpoints]

    def make(aliases: list[str]) -> Actuator:
        return KedaActuator(listen, aliases, endpoints, interval_s=config.autoscale.interval)

    return {"keda": make}
