"""The embedded actuator: simulated replicas of ``serve`` started and stopped for real.

For a pool whose backend is ``type: sim`` without ``base_url`` (in-process engines),
each replica is an :class:`EngineService` behind an ``InProcessTransport``, as
``serve`` builds them at start. A new replica is *starting* for the pool's cold-start
time (the weights loading), then runs its engine and becomes *serving* (it enters
routing: the pool, the live view, the scheduler's candidates) or *warm* (running,
not routed). A warm replica is promoted to serving at once. Scale-down drains the
newest serving replica (no new requests, in-flight ones finish) and then stops its
engine, or keeps it warm when the warm pool is short. The replicas ``serve``
started from the config are the pool's first serving replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from tokenplane.autoscale.model import ReplicaPhase, ReplicaView
from tokenplane.engine.serving.service import EngineService
from tokenplane.routing.gateway.membership import Membership
from tokenplane.upstream.inprocess import InProcessTransport
from tokenplane.upstream.pool import Endpoint

log = logging.getLogger("tokenplane.autoscale")

Destination = Literal["serving", "warm", "gone"]
# (replica index) -> a new replica's engine service and its endpoint, not yet started
MakeReplica = Callable[[int], tuple[EngineService, Endpoint]]


@dataclass(slots=True)
class _Replica:
    endpoint: Endpoint
    service: EngineService
    phase: ReplicaPhase
    since: float
    dest: Destination
    task: asyncio.Task[None] | None = None

    @property
    def id(self) -> str:
        return self.endpoint.id

    def view(self) -> ReplicaView:
        target: Literal["serving", "warm"] = "warm" if self.dest == "warm" else "serving"
        return ReplicaView(self.id, self.phase, self.since, target=target)


class EmbeddedPool:
    """The replicas of one pool and their transitions."""

    def __init__(self, alias: str, make: MakeReplica, cold_start_s: float,
                 membership: Membership, initial: Iterable[Endpoint] = (),
                 clock: Callable[[], float] = time.monotonic, promote_s: float = 0.0) -> None:
        self.alias = alias
        self.make = make
        self.cold_start_s = cold_start_s
        self.promote_s = promote_s
        self.membership = membership
        self.clock = clock
        self.replicas: dict[str, _Replica] = {}
        self.started = 0  # replicas this pool started (cold starts)
        self.stopped = 0
        self._next = 0
        self._changed = asyncio.Event()  # set and replaced at each change
        self._closing: set[asyncio.Task[None]] = set()  # engines of stopped replicas
        now = clock()
        for ep in initial:
            assert isinstance(ep.transport, InProcessTransport)
            self.replicas[ep.id] = _Replica(ep, ep.transport.service, "serving", now, "serving")
            self._next += 1

    def views(self) -> tuple[ReplicaView, ...]:
        return tuple(r.view() for r in self.replicas.values())

    def count(self, *phases: ReplicaPhase) -> int:
        return sum(1 for r in self.replicas.values() if r.phase in phases)

    # -- the plan ------------------------------------------------------------------

    def scale_to(self, serving: int, warm: int) -> None:
        reps = list(self.replicas.values())  # insertion order: oldest first
        s_set = [r for r in reps if r.dest == "serving" and r.phase != "draining"]
        w_set = [r for r in reps if r.dest == "warm"]
        while len(s_set) < serving:
            # a replica still draining serves again at once, then a warm one, then one
            # loading for the warm pool, else a new one
            draining = [r for r in reps if r.phase == "draining" and r not in s_set]
            cand = (draining[-1] if draining else None) \
                or next((r for r in w_set if r.phase == "warm"), None) \
                or next((r for r in w_set if r.phase == "starting"), None)
            if cand is None:
                cand = self._start("serving")
            else:
                if cand in w_set:
                    w_set.remove(cand)
                if cand.phase == "draining":
                    self._revive(cand)
                else:
                    self._promote(cand)
            s_set.append(cand)
        while len(s_set) > serving:
            # the newest not yet taking traffic (starting, or warm being promoted) first
            pending = [r for r in s_set if r.phase in ("starting", "warm")]
            cand = pending[-1] if pending else s_set[-1]
            s_set.remove(cand)
            keep = len(w_set) < warm
            if keep:
                w_set.append(cand)
            self._retire(cand, "warm" if keep else "gone")
        while len(w_set) < warm:
            w_set.append(self._start("warm"))
        while len(w_set) > warm:
            # the newest not yet loaded first, then one still draining, then a warm one
            order = [r for phase in ("warm", "draining", "starting")
                     for r in w_set if r.phase == phase]
            cand = order[-1]
            w_set.remove(cand)
            self._retire(cand, "gone")

    def _start(self, dest: Destination) -> _Replica:
        svc, ep = self.make(self._next)
        self._next += 1
        r = _Replica(ep, svc, "starting", self.clock(), dest)
        self.replicas[r.id] = r
        self.started += 1
        r.task = asyncio.get_running_loop().create_task(self._cold_start(r),
                                                        name=f"autoscale-start-{r.id}")
        log.info("autoscale %s: starting replica %s (%s, cold start %.1fs)",
                 self.alias, r.id, dest, self.cold_start_s)
        self._notify()
        return r

    def _admit(self, r: _Replica) -> None:
        r.endpoint.draining = False  # a replica drained to the warm pool serves again
        self.membership.add(self.alias, r.endpoint)  # in-process: routed at once
        self._enter(r, "serving")

    def _promote(self, r: _Replica) -> None:
        """A warm replica takes traffic after ``promote_s`` (one still starting does
        once loaded)."""
        r.dest = "serving"
        if r.phase == "warm" and r.task is None:
            r.task = asyncio.get_running_loop().create_task(self._promoting(r),
                                                            name=f"autoscale-promote-{r.id}")

    async def _promoting(self, r: _Replica) -> None:
        if self.promote_s > 0:
            await asyncio.sleep(self.promote_s)
        r.task = None
        if r.dest == "serving" and r.phase == "warm":
            self._admit(r)
            log.info("autoscale %s: promoted warm replica %s", self.alias, r.id)

    def _revive(self, r: _Replica) -> None:
        """A draining replica takes requests again (membership takes it back)."""
        task, r.task = r.task, None
        if task is not None:
            task.cancel()
        r.dest = "serving"
        self._admit(r)
        log.info("autoscale %s: replica %s serves again before its drain ended",
                 self.alias, r.id)

    def _retire(self, r: _Replica, dest: Destination) -> None:
        """Out of serving (``dest`` warm) or out of the pool (``gone``)."""
        r.dest = dest
        if r.phase == "starting":
            if dest == "gone":
                self._stop(r)
        elif r.phase == "serving":
            self._enter(r, "draining")
            r.task = asyncio.get_running_loop().create_task(self._drain(r),
                                                            name=f"autoscale-drain-{r.id}")
            log.info("autoscale %s: draining replica %s (then %s)", self.alias, r.id, dest)
        elif r.phase == "warm":  # maybe promoting: that stops here
            if dest == "gone":
                self._stop(r)
            elif r.task is not None:
                r.task.cancel()
                r.task = None
        # draining: the drain ends in r.dest

    # -- transitions ---------------------------------------------------------------

    async def _cold_start(self, r: _Replica) -> None:
        await asyncio.sleep(self.cold_start_s)  # the weights loading
        await r.service.start()
        r.task = None
        if r.dest == "serving":
            self._admit(r)
        else:
            self._enter(r, "warm")
        log.info("autoscale %s: replica %s is %s", self.alias, r.id, r.phase)

    async def _drain(self, r: _Replica) -> None:
        try:
            left = self.membership.drain(r.id)  # out of routing once nothing is on it
        except KeyError:  # not in routing (any more)
            pass
        else:
            await left
        r.task = None
        if r.dest == "warm":
            self._enter(r, "warm")
        else:
            await self._close(r)

    def _stop(self, r: _Replica) -> None:
        task, r.task = r.task, None
        if task is not None:
            task.cancel()
        r.dest = "gone"
        self.replicas.pop(r.id, None)
        self.stopped += 1
        task = asyncio.get_running_loop().create_task(r.service.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)
        log.info("autoscale %s: stopped replica %s", self.alias, r.id)
        self._notify()

    async def _close(self, r: _Replica) -> None:
        self.replicas.pop(r.id, None)
        self.stopped += 1
        await r.service.close()
        log.info("autoscale %s: stopped replica %s", self.alias, r.id)
        self._notify()

    def _enter(self, r: _Replica, phase: ReplicaPhase) -> None:
        r.phase, r.since = phase, self.clock()
        self._notify()

    # -- waiting (tests, status) ---------------------------------------------------

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for(self, predicate: Callable[[EmbeddedPool], bool]) -> None:
        """Returns once ``predicate(self)`` holds (checked at each change)."""
        while not predicate(self):
            await self._changed.wait()

    async def close(self) -> None:
        await asyncio.gather(*self._closing, return_exceptions=True)
        for r in list(self.replicas.values()):
            task, r.task = r.task, None
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await r.service.close()


class EmbeddedActuator:
    """The :class:`~tokenplane.autoscale.gateway.actuator.Actuator` of in-process
    simulated pools."""

    kind = "embedded"

    def __init__(self, pools: dict[str, EmbeddedPool]) -> None:
        self.pools = pools

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        for p in self.pools.values():
            await p.close()

    async def replicas(self, pool: str) -> tuple[ReplicaView, ...]:
        return self.pools[pool].views()

    async def scale_to(self, pool: str, serving: int, warm: int) -> None:
        self.pools[pool].scale_to(serving, warm)
