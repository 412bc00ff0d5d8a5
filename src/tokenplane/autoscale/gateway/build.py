"""Builds the autoscaler of a gateway from ``autoscale:`` (None when no pool is set):
per pool its policy, its signals and its actuator, and the controller that runs them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from tokenplane.autoscale.gateway.actuator import Actuator
from tokenplane.autoscale.gateway.controller import AutoscaleController, PoolControl
from tokenplane.autoscale.gateway.decision_log import DecisionLog
from tokenplane.autoscale.gateway.embedded import EmbeddedActuator, EmbeddedPool, MakeReplica
from tokenplane.autoscale.gateway.history import learn_history
from tokenplane.autoscale.gateway.kubernetes import KubernetesActuator
from tokenplane.autoscale.gateway.policies import make_policy, pool_spec
from tokenplane.autoscale.gateway.signals import PoolSignals
from tokenplane.compose.endpoints import backend_id, sim_replica
from tokenplane.compose.routing import Routing
from tokenplane.config.autoscale_schema import AutoscalePoolConfig
from tokenplane.config.schema import GatewayConfig
from tokenplane.engine.profiles import EngineProfile, get_profile
from tokenplane.engine.serving.service import EngineService
from tokenplane.metering.request_history import demand_by_minute
from tokenplane.metering.stores.base import LedgerSink
from tokenplane.slo.gateway.leader import Leadership, open_leadership
from tokenplane.slo.gateway.service import SloService
from tokenplane.tokens.model_counters import ModelCounters
from tokenplane.upstream.pool import Endpoint, Pool


def cold_start_s(pool: AutoscalePoolConfig, profile: EngineProfile) -> float:
    """The pool's cold start: configured, else the engine profile's."""
    return pool.cold_start if pool.cold_start is not None else profile.cold_start_s


def actuator_kind(config: GatewayConfig, alias: str) -> str:
    """The pool's actuator (the schema made sure an unset one means embedded)."""
    return config.autoscale.pools[alias].actuator or "embedded"


def replica_maker(config: GatewayConfig, alias: str, counters: ModelCounters) -> MakeReplica:
    """New in-process replicas of ``alias``'s simulated backend, as ``serve`` builds its
    first ones (``compose.endpoints``), numbered on from them."""
    model = config.model(alias)
    assert model is not None
    backend = model.backends[0]
    bid = backend_id(model, backend, 0)

    def make(index: int) -> tuple[EngineService, Endpoint]:
        ep, svc = sim_replica(model, backend, f"{bid}/{index}", counters, seed=index)
        return svc, ep

    return make


def build_autoscaler(
    config: GatewayConfig, home: Path, pools: dict[str, Pool], routing: Routing,
    counters: ModelCounters, slo: SloService | None,
    sink: Callable[[], LedgerSink] | None = None,
    actuators: dict[str, Callable[[list[str]], Actuator]] | None = None,
) -> AutoscaleController | None:
    """The controller, or None when ``autoscale.pools`` is empty. ``actuators``: the
    factories of the other actuator kinds (``kubernetes``, ``keda``) by kind, each
    given the aliases it scales."""
    ac = config.autoscale
    if not ac.enabled:
        return None
    by_kind: dict[str, list[str]] = {}
    for alias in ac.pools:
        by_kind.setdefault(actuator_kind(config, alias), []).append(alias)
    made: dict[str, Actuator] = {}
    for kind, aliases in by_kind.items():
        if kind == "embedded":
            membership = routing.membership
            made[kind] = EmbeddedActuator({
                a: EmbeddedPool(a, replica_maker(config, a, counters),
                                cold_start_s(ac.pools[a], _profile(config, a)), membership,
                                initial=list(pools[a].endpoints), clock=time.time,
                                promote_s=ac.pools[a].promote)
                for a in aliases})
        elif kind == "kubernetes" and (actuators is None or kind not in actuators):
            made[kind] = kubernetes_actuator(config, aliases)
        elif actuators is not None and kind in actuators:
            made[kind] = actuators[kind](aliases)
        else:
            raise ValueError(f"autoscale: the {kind} actuator is not available in this "
                             f"build (pools {', '.join(aliases)})")
    slo_status = slo.status if slo is not None else None
    controls = []
    for alias, pc in ac.pools.items():
        names = [s.name for s in config.slos
                 if s.selector.model in (None, alias)]
        signals = PoolSignals(alias, pools[alias], routing.live, routing.hub, slo_status,
                              names, routing.hub.clock if routing.hub else time.monotonic)
        profile = _profile(config, alias)
        spec = pool_spec(pc, cold_start_s(pc, profile), ac.interval)
        model = config.model(alias)
        assert model is not None
        policy = make_policy(pc, spec, profile, sum(b.replicas for b in model.backends))
        controls.append(PoolControl(alias, policy, signals, made[actuator_kind(config, alias)]))
    # embedded replicas are each process's own: every process scales its own; a shared
    # actuator acts from one leader
    leader: Leadership | None = None
    if set(by_kind) != {"embedded"}:
        leader = open_leadership(home, config.database_url, config.redis_url,
                                 config.admission.key_prefix, ac.interval, name="autoscale")
    history = None
    if sink is not None and ac.history > 0:
        read_sink = sink
        policies = {c.alias: c.policy for c in controls}

        async def history(now: float) -> object:
            return await learn_history(
                policies, lambda a, b: demand_by_minute(read_sink(), a, b), now, ac.history)

    # the policies' clock is the wall clock: the forecaster learns times of day
    return AutoscaleController(controls, DecisionLog(home, ac.decisions_kept), ac.interval,
                               leader=leader, clock=time.time, history=history)


def kubernetes_actuator(config: GatewayConfig, aliases: list[str]) -> Actuator:
    """The /scale subresource of each pool's workload (``pools.<alias>.kubernetes``)."""
    targets = {}
    for a in aliases:
        k = config.autoscale.pools[a].kubernetes
        assert k is not None  # the schema wants it with actuator: kubernetes
        targets[a] = k
    return KubernetesActuator(targets)


def _profile(config: GatewayConfig, alias: str) -> EngineProfile:
    model = config.model(alias)
    assert model is not None
    b = model.backends[0]
    return get_profile(b.profile)
