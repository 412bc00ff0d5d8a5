"""The autoscaling controller: every ``autoscale.interval``, off the request path, per
pool: the actuator's replicas -> the pool's snapshot (``signals``) -> the policy's
decision -> recorded (``decision_log``) -> ``actuator.scale_to``.

Only one gateway process acts: the SLO leader election (``slo.gateway.leader``: a
PostgreSQL advisory lock, a Redis lease, or a file lock among one host's workers),
under a name of its own. The others keep their view of the pools and act on
nothing (they run the policy on the same snapshots, so one that gains the lead
has its stabilisation windows and forecast current).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from tokenplane.autoscale.gateway.actuator import Actuator
from tokenplane.autoscale.gateway.decision_log import DecisionLog
from tokenplane.autoscale.gateway.signals import PoolSignals
from tokenplane.autoscale.gateway.status_file import write_status
from tokenplane.autoscale.model import AutoscalePolicy, PoolSnapshot, ReplicaView, ScaleDecision
from tokenplane.periodic import Periodic
from tokenplane.slo.gateway.leader import Leadership

log = logging.getLogger("tokenplane.autoscale")


@dataclass
class PoolControl:
    """One pool: its policy, its signals and its actuator."""

    alias: str
    policy: AutoscalePolicy
    signals: PoolSignals
    actuator: Actuator
    snapshot: PoolSnapshot | None = None
    decision: ScaleDecision | None = None
    current: tuple[ReplicaView, ...] | None = None  # the replicas after the last action
    decisions: dict[str, int] = field(default_factory=dict)  # "direction/reason" -> count

    def phases(self) -> dict[str, int]:
        """Replicas by phase, as the actuator reported them after the last round."""
        if self.current is None:
            return {}
        out = {p: 0 for p in ("starting", "warm", "serving", "draining")}
        for r in self.current:
            out[r.phase] += 1
        return out

    def status(self) -> dict[str, Any]:
        snap, d = self.snapshot, self.decision
        phases = self.phases()
        return {
            "pool": self.alias, "policy": self.policy.name, "actuator": self.actuator.kind,
            "replicas": phases,
            "desired_serving": d.serving_to if d is not None else None,
            "desired_warm": d.warm_to if d is not None else None,
            "reasons": list(d.reasons) if d is not None else [],
            "inputs": dict(d.inputs) if d is not None else {},
            "demand": {
                "prompt_tokens_per_s": snap.prompt_tokens_per_s,
                "output_tokens_per_s": snap.output_tokens_per_s,
                "output_tokens_in_flight": snap.output_tokens_in_flight,
                "requests_per_s": snap.requests_per_s,
                "queue_requests": snap.queue_requests, "queue_tokens": snap.queue_tokens,
                "queue_wait_s": snap.queue_wait_s, "slo_burn": snap.slo_burn,
                "slo_budget_left": snap.slo_budget_left,
            } if snap is not None else None,
        }


class AutoscaleController:
    def __init__(
        self, pools: list[PoolControl], decisions: DecisionLog, interval_s: float, *,
        leader: Leadership | None = None, clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        history: Callable[[float], Awaitable[object]] | None = None,
    ) -> None:
        self.pools = {p.alias: p for p in pools}
        self.decisions = decisions
        self.interval_s = interval_s
        self.leader = leader
        self.clock = clock
        self.wall = wall
        self.leading = leader is None
        self.history = history  # run once before the first round (the forecaster's past)
        self.rounds = 0
        self._round_done = asyncio.Event()  # set and replaced after each round
        self.decided_at: float | None = None  # wall time of the last round that decided
        self._periodic = Periodic("autoscale", interval_s, self.step, log=log,
                                  failure="autoscaling round failed", first_now=True)
        self._actuators = list({id(p.actuator): p.actuator for p in pools}.values())

    async def start(self) -> None:
        for a in self._actuators:
            await a.start()
        self._periodic.start()

    async def close(self) -> None:
        await self._periodic.close()
        if self.leader is not None:
            await self.leader.release()
        for a in self._actuators:
            await a.close()

    async def step(self) -> None:
        """One round over every pool."""
        learn, self.history = self.history, None
        if learn is not None:
            try:
                await learn(self.clock())
            except Exception:
                log.exception("autoscale: reading the ledger's history failed; the "
                              "forecaster starts without it")
        if self.leader is not None:
            try:
                leading = await self.leader.acquire()
            except Exception:
                log.exception("autoscale: the leader election failed; not acting this round")
                leading = False
            if leading and not self.leading:
                log.info("autoscale: this process leads the autoscaling now")
            self.leading = leading
        now = self.clock()
        for pc in self.pools.values():
            try:
                await self._round(pc, now)
            except Exception:  # one pool's failure leaves the others their round
                log.exception("autoscale %s: the round failed", pc.alias)
        self.rounds += 1
        self._round_done.set()
        self._round_done = asyncio.Event()
        if self.leading:
            self.decided_at = self.wall()
        if self.decisions.home is not None:
            write_status(self.decisions.home, {**self.status(decisions=False),
                                               "written_at": self.wall()})

    async def wait_rounds(self, n: int) -> None:
        """Returns once ``n`` rounds have completed since start."""
        while self.rounds < n:
            await self._round_done.wait()

    async def _round(self, pc: PoolControl, now: float) -> None:
        views = await pc.actuator.replicas(pc.alias)
        snap = pc.signals.snapshot(views, now)
        pc.snapshot, pc.current = snap, views
        d = pc.policy.decide(snap, now)  # a follower too: its windows stay current
        pc.decision = d
        if not self.leading:
            return
        self.decisions.record(d, self.wall(), pc.policy.name)
        if d.changed:
            key = f"{('down', 'none', 'up')[d.direction + 1]}/" \
                  f"{d.reasons[0] if d.reasons else 'none'}"
            pc.decisions[key] = pc.decisions.get(key, 0) + 1
            log.info("autoscale %s: serving %d -> %d, warm %d -> %d (%s)", pc.alias,
                     d.serving_from, d.serving_to, d.warm_from, d.warm_to,
                     ", ".join(d.reasons))
        await pc.actuator.scale_to(pc.alias, d.serving_to, d.warm_to)
        pc.current = await pc.actuator.replicas(pc.alias)

    def status(self, decisions: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "enabled": True, "leading": self.leading, "interval_s": self.interval_s,
            "rounds": self.rounds, "decided_at": self.decided_at,
            "pools": [p.status() for p in self.pools.values()],
        }
        if decisions:
            out["decisions"] = list(self.decisions.recent)
        return out
