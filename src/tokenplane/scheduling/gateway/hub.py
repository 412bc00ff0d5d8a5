"""The gateway's scheduler queues on the request path.

One :class:`GatewayScheduler` per (alias, model version). A request is submitted
and released at once when a replica has room for its class (the common path: one
submit and one release, no waiting); otherwise it waits on a future until a
release binds it to a replica (late binding). Releases are pumped when a request
finishes, after each metrics scrape, and on a short timer, which also sheds
sheddable requests whose deadline passed (503 with ``retry-after``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from tokenplane.config.routing_schema import SchedulingConfig
from tokenplane.errors import GatewayError
from tokenplane.observe.metrics import GatewayMetrics
from tokenplane.periodic import Periodic
from tokenplane.routing.gateway.replicas import LiveEndpoint
from tokenplane.routing.gateway.router import GatewayRouter
from tokenplane.scheduling.gate import SaturationGate
from tokenplane.scheduling.scheduler import (
    ClassRestriction,
    ClassStats,
    GatewayScheduler,
    QueuedRequest,
    Shed,
)
from tokenplane.scheduling.slo import SloClass, slo_classes_from_config
from tokenplane.scheduling.vtc import VirtualTokenCounter

log = logging.getLogger("tokenplane.scheduling")
Queue = tuple[str, str]  # (alias, model version or "")
Target = tuple[Queue, list[LiveEndpoint]]  # a queue and its replicas that are up


def shed_error(shed: Shed) -> GatewayError:
    return GatewayError(
        503, f"The gateway is saturated and the '{shed.item.slo.name}' request was shed "
        f"({shed.reason}); retry later.", code="overloaded",
        headers={"retry-after": str(max(1, math.ceil(shed.retry_after_s)))},
    )


class SchedulerHub:
    def __init__(
        self, cfg: SchedulingConfig, router: GatewayRouter, metrics: GatewayMetrics,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cfg = cfg
        self.router = router
        self.metrics = metrics
        self.clock = clock
        self.classes: dict[str, SloClass] = (
            slo_classes_from_config(cfg.class_specs()))
        self.gate = SaturationGate(kv_limit=cfg.kv_limit)
        self.queues: dict[Queue, GatewayScheduler] = {}
        # classes admitted more strictly while an SLO's budget is protected; shared
        # with every queue's scheduler, replaced in place by ``restrict``
        self.restrictions: dict[str, ClassRestriction] = {}
        self._timer = Periodic("tokenplane-scheduler", cfg.tick_s, self._tick_if_waiting,
                               log=log, failure="scheduler tick failed")
        self._wait_children: dict[str, Any] = {}

    # -- class choice --------------------------------------------------------------

    def class_of(self, header: str | None, key_id: str | None, app: str | None,
                 tenant: str | None) -> SloClass:
        cfg = self.cfg
        if header is not None:
            slo = self.classes.get(header.strip())
            if slo is None:
                raise GatewayError(400, f"Unknown SLO class {header!r} in '{cfg.header}'; known: "
                                   f"{', '.join(sorted(self.classes))}.", code="invalid_slo_class",
                               param=cfg.header)
            return slo
        for table, k in ((cfg.by_key, key_id), (cfg.by_app, app), (cfg.by_tenant, tenant)):
            if k is not None and k in table:
                return self.classes[table[k]]
        return self.classes[cfg.default_class]

    # -- queues --------------------------------------------------------------------

    def scheduler(self, q: Queue) -> GatewayScheduler:
        s = self.queues.get(q)
        if s is None:
            vtc = VirtualTokenCounter(self.cfg.tenant_weights)
            s = GatewayScheduler(self.router.profiles[q[0]], gate=self.gate, vtc=vtc,
                                 late_defer_s=self.cfg.late_defer_s,
                                 restrictions=self.restrictions)
            self.queues[q] = s
        return s

    def _cands(self, q: Queue) -> list[LiveEndpoint]:
        return self.router.candidates(q[0], q[1] or None)

    def restrict(self, restrictions: dict[str, ClassRestriction]) -> None:
        """Admit these classes more strictly from now on (an empty dict lifts it)."""
        if restrictions != self.restrictions:
            log.warning("SLO budget protection: %s", ", ".join(
                f"{k} at {v.gate_fraction:g} of the gate" for k, v in restrictions.items())
                or "lifted")
            self.restrictions.clear()
            self.restrictions.update(restrictions)

    def fraction(self, slo: SloClass) -> float:
        r = self.restrictions.get(slo.name)
        return slo.gate_fraction if r is None else min(slo.gate_fraction, r.gate_fraction)

    def has_room(self, cands: list[LiveEndpoint], slo: SloClass) -> bool:
        """Whether one of ``cands`` (a queue's replicas that are up) has room for ``slo``."""
        now = self.clock()
        frac = self.fraction(slo)
        return any(self.gate.accepts(e.snapshot(now), frac) for e in cands)

    def target(self, alias: str, version: str | None, slo: SloClass) -> Target | None:
        """The queue to join and its replicas that are up: the alias's own when it has
        room for this class or the class may wait; else the first fallback alias with
        room (non-sheddable classes spill rather than wait). None when no replica is
        up at all (the request then bypasses the queues: routing tries what it can,
        or says 503)."""
        own: Queue = (alias, version or "")
        fallbacks = self.router.fallbacks.get(alias)
        if not fallbacks:  # the common case: one candidates pass, reused by acquire
            cands = self._cands(own)
            return (own, cands) if cands else None
        up = [(q, c) for q in (own, *((fb, "") for fb in fallbacks)) if (c := self._cands(q))]
        if not up:
            return None
        if up[0][0] == own and (slo.sheddable or self.has_room(up[0][1], slo)):
            return up[0]
        for t in up:
            if self.has_room(t[1], slo):
                return t
        return up[0]

    def _fast(self, q: Queue, sched: GatewayScheduler, item: QueuedRequest,
              cands: list[LiveEndpoint]) -> str | None:
        """The common path: nothing waits and a replica has room for the class, so
        the request is bound at once (what submit + release would do, minus the
        queue). None sends it through the queue (also when the profile's choice
        is a saturated replica holding more of the prompt's prefix: the
        scheduler then decides whether to wait for it)."""
        if len(sched):
            return None
        now = self.clock()
        snaps = self.router.live.snapshots(cands, now)
        frac = self.fraction(item.slo)
        allowed = [e for e in snaps if self.gate.accepts(e, frac)]
        if not allowed or (item.route.block_hashes and len(allowed) < len(snaps)):
            return None
        req = item.route
        try:
            eid = self.router.route_snapshots(q[0], req, allowed)
        except LookupError:  # the profile's filters left nothing: let the queue decide
            return None
        sched.vtc.charge(req.tenant, req.prompt_tokens, req.predicted_output)
        st = sched.stats.setdefault(item.slo.name, ClassStats())
        st.submitted += 1
        st.released += 1
        self._wait(item.slo.name).observe(0.0)
        return eid

    def _wait(self, name: str) -> Any:
        child = self._wait_children.get(name)
        if child is None:
            child = self._wait_children[name] = self.metrics.sched_wait.labels(name)
        return child

    async def acquire(self, target: Target, item: QueuedRequest) -> LiveEndpoint:
        """Submit and wait until released to a replica (at once when one has room)."""
        q, cands = target
        sched = self.queues.get(q) or self.scheduler(q)
        fast = self._fast(q, sched, item, cands)
        if fast is not None:
            le = self.router.live.by_id[fast]
            self.router.take(le)
            return le
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[str] = loop.create_future()
        item.payload = fut
        now = self.clock()
        shed = sched.submit(item, now)
        if shed is not None:
            self.metrics.sched_shed.labels(item.slo.name).inc()
            raise shed_error(shed)
        self.pump(q)
        if not fut.done():
            self._gauge()
        try:
            eid = await fut  # cancelled with the request when the client goes away
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self.router.live.by_id[fut.result()].pending -= 1
            raise
        le = self.router.live.by_id[eid]
        le.pending -= 1  # from here to the upstream call nothing waits: in_flight takes over
        self.router.take(le)
        return le

    def pump(self, q: Queue) -> None:
        sched = self.queues.get(q)
        if sched is None or not len(sched):
            return
        now = self.clock()
        released = sched.release(self.router.live.snapshots(self._cands(q), now), now)
        for item, eid in released:
            self._wait(item.slo.name).observe(now - item.arrival)
            fut = item.payload
            if isinstance(fut, asyncio.Future) and not fut.done():
                fut.set_result(eid)
                self.router.live.by_id[eid].pending += 1
        if released:
            self._gauge()

    def pump_all(self) -> None:
        for q in list(self.queues):
            self.pump(q)

    def tick(self) -> None:
        """Shed what expired, then release what fits."""
        now = self.clock()
        for sched in self.queues.values():
            if not len(sched):
                continue
            for shed in sched.expire(now):
                self.metrics.sched_shed.labels(shed.item.slo.name).inc()
                fut: Any = shed.item.payload
                if isinstance(fut, asyncio.Future) and not fut.done():
                    fut.set_exception(shed_error(shed))
        self.pump_all()
        self._gauge()

    def _gauge(self) -> None:
        totals = {name: 0 for name in self.classes}
        for sched in self.queues.values():
            for name, n in sched.queued_by_class().items():
                totals[name] = totals.get(name, 0) + n
        for name, n in totals.items():
            self.metrics.sched_queue.labels(name).set(n)

    def settle(self, q: Queue, tenant: str, predicted: int, actual: int) -> None:
        sched = self.queues.get(q)
        if sched is not None:
            sched.settle(tenant, predicted, actual)

    # -- timer ---------------------------------------------------------------------

    async def start(self) -> None:
        self._timer.start()

    async def close(self) -> None:
        await self._timer.close()

    async def _tick_if_waiting(self) -> None:
        if any(len(s) for s in self.queues.values()):
            self.tick()
