"""The actuator interface: what the autoscaling controller drives.

An actuator owns the replicas of the pools it scales and knows their state. The
controller (``autoscale.gateway.controller``) calls it once per pool per interval,
on one gateway replica only (the leader):

1. ``await actuator.replicas(pool)``: the pool's replicas now, as
   :class:`~tokenplane.autoscale.model.ReplicaView` (phase ``starting`` while a
   replica loads, ``warm`` when loaded and not routed, ``serving``, ``draining``).
   The controller adds the engines' KV use and waiting requests it scraped itself
   when the actuator leaves them at 0, so an actuator may report phases only.
2. the policy decides from the snapshot;
3. ``await actuator.scale_to(pool, serving, warm)``: make the pool converge on
   ``serving`` replicas taking traffic (counting the ones still starting towards it)
   and ``warm`` replicas loaded but idle. It is called every interval, with the
   same figures when nothing changed, and must be idempotent; it should return once
   the change is *requested* (a replica's cold start or a drain continues in the
   background, and ``replicas`` shows its progress). Preferred order: promote warm
   replicas before starting new ones, drain the newest serving replicas first.

``start`` runs once before the first call and ``close`` once at shutdown (an
actuator that holds nothing makes them no-ops). ``kind`` names it in status and
logs (``embedded``, ``kubernetes``, ``keda``).

Implementations: :class:`~tokenplane.autoscale.gateway.embedded.EmbeddedActuator`
(simulated in-process replicas of ``serve``); Kubernetes (the scale subresource) and
KEDA (the external scaler: ``scale_to`` publishes the desired count, KEDA acts) plug
in the same way.
"""

from __future__ import annotations

from typing import Protocol

from tokenplane.autoscale.model import ReplicaView


class Actuator(Protocol):
    kind: str

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def replicas(self, pool: str) -> tuple[ReplicaView, ...]:
        """The pool's replicas now (every phase)."""
        ...

    async def scale_to(self, pool: str, serving: int, warm: int) -> None:
        """Converge ``pool`` on ``serving`` routed and ``warm`` idle replicas
        (idempotent; returns once requested)."""
        ...
