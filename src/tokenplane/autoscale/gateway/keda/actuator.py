"""The KEDA actuator: carries each decision out by publishing the desired counts of
its pools on the gateway's KEDA external scaler; KEDA's operator reads them over
gRPC and scales each pool's engine Deployment (docs/KEDA.md).

Kubernetes starts and stops the replicas, so this actuator learns of them from the
gateway's own view of the pool (its endpoints: static, or found by endpoint
discovery). Against the last decision it reports them as the controller expects:
endpoints up to the desired serving count serve, the next ones up to the warm count
are warm, the rest drain (KEDA is removing them), and so do the ones the gateway
already drains; desired replicas not up yet are ``starting`` (their cold start) since
the count last changed, so the policy does not add them a second time.

Only the process leading the autoscaling calls :meth:`scale_to`, and the listener is
bound by the first call: on a host with several gateway workers the leader serves
KEDA. When decisions stop (the lead moved, the controller stopped) the scaler
answers UNAVAILABLE after ``stale_after_s`` and the listener is released, so the new
leader can bind it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence

from tokenplane.autoscale.gateway.keda.board import Desired, DesiredBoard
from tokenplane.autoscale.gateway.keda.server import KedaScalerServer
from tokenplane.autoscale.model import ReplicaPhase, ReplicaView
from tokenplane.periodic import Periodic

log = logging.getLogger("tokenplane.autoscale")

# (pool) -> the pool's replicas in the gateway now, oldest first: (id, draining)
Endpoints = Callable[[str], Sequence[tuple[str, bool]]]


def stale_after(interval_s: float) -> float:
    """How old a decision may get before KEDA is told there is none: three rounds,
    and never under 30 s (one slow round is not a failure)."""
    return max(3 * interval_s, 30.0)


class KedaActuator:
    kind = "keda"

    def __init__(self, listen: str, pools: Iterable[str], endpoints: Endpoints, *,
                 interval_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.board = DesiredBoard(clock)
        for pool in pools:
            self.board.register(pool)
        self.stale_after_s = stale_after(interval_s)
        self.server = KedaScalerServer(self.board, listen, self.stale_after_s)
        self._endpoints = endpoints
        self._clock = clock
        self._since: dict[tuple[str, str], float] = {}  # (pool, replica id) -> first seen
        self._bind_failed = False
        self._watch = Periodic("autoscale-keda", interval_s, self.release_if_stale, log=log,
                               failure="autoscale: the KEDA scaler's check failed")

    async def start(self) -> None:
        self._watch.start()

    async def close(self) -> None:
        await self._watch.close()
        await self.server.stop()

    async def replicas(self, pool: str) -> tuple[ReplicaView, ...]:
        now = self._clock()
        found = list(self._endpoints(pool))
        ids = [i for i, draining in found if not draining]
        leaving = [i for i, draining in found if draining]
        seen = {(pool, i) for i, _ in found}
        for key in [k for k in self._since if k[0] == pool and k not in seen]:
            del self._since[key]
        desired = self.board.get(pool)
        serving = len(ids) if desired is None else desired.serving
        warm = 0 if desired is None else desired.warm
        views = []
        for n, rid in enumerate(ids):
            phase: ReplicaPhase = ("serving" if n < serving else
                                   "warm" if n < serving + warm else "draining")
            views.append(ReplicaView(rid, phase, self._since.setdefault((pool, rid), now)))
        views += [ReplicaView(rid, "draining", self._since.setdefault((pool, rid), now))
                  for rid in leaving]  # the gateway already drains them (they are going)
        changed = self.board.changed_at(pool)
        since = changed if changed is not None else now
        views += [ReplicaView(f"{pool}/requested-{n}", "starting", since)
                  for n in range(max(0, serving + warm - len(ids)))]
        return tuple(views)

    async def scale_to(self, pool: str, serving: int, warm: int) -> None:
        desired = Desired(serving=serving, warm=warm)
        if desired.serving < 0 or desired.warm < 0:
            raise ValueError(f"negative replica count for pool {pool!r}: {desired}")
        if not self.server.serving:
            await self._listen()
        self.board.set(pool, desired)  # once listening: a waiter on it can ask KEDA's way

    async def _listen(self) -> None:
        try:
            await self.server.start()
        except OSError as exc:
            if not self._bind_failed:
                log.warning("autoscale: %s; retrying every round (another process may "
                            "still serve KEDA)", exc)
            self._bind_failed = True
            return
        self._bind_failed = False
        log.info("autoscale: serving KEDA's external scaler on %s", self.server.listen)

    async def release_if_stale(self) -> None:
        """Stop listening once no pool has a fresh decision (this process stopped
        deciding): the scaler would only answer UNAVAILABLE, and the port is free for
        the process that leads now."""
        if not self.server.serving:
            return
        ages = [self.board.age(p) for p in self.board.pools()]
        if all(a is None or a > self.stale_after_s for a in ages):
            log.info("autoscale: no fresh decision for %.0f s; releasing %s for the "
                     "leading process", self.stale_after_s, self.server.listen)
            await self.server.stop()
