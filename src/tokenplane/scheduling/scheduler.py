"""The gateway scheduler: priority bands, fair tenants, SJF with aging, late binding."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tokenplane.routing.endpoint import BREAKER_OPEN, EndpointState, RouteRequest
from tokenplane.scheduling.gate import SaturationGate
from tokenplane.scheduling.slo import SloClass
from tokenplane.scheduling.vtc import VirtualTokenCounter


class Router(Protocol):
    """What the scheduler needs from a routing profile (RoutingProfile fits)."""

    def choose(self, req: RouteRequest, endpoints: Sequence[EndpointState]) -> str: ...

    def commit(self, req: RouteRequest, endpoint_id: str) -> None: ...

    def affinity(
        self, req: RouteRequest, endpoints: Sequence[EndpointState]
    ) -> dict[str, int]: ...


@dataclass(slots=True)
class QueuedRequest:
    """A request waiting at the gateway; ``payload`` is the caller's own object."""

    route: RouteRequest
    slo: SloClass
    arrival: float
    payload: object = None

    @property
    def est_tokens(self) -> int:
        return self.route.prompt_tokens + self.route.predicted_output


@dataclass(frozen=True, slots=True)
class Shed:
    """A request refused: answer 503 with ``retry-after``."""

    item: QueuedRequest
    retry_after_s: float
    reason: str


@dataclass(slots=True)
class ClassStats:
    queued: int = 0
    submitted: int = 0
    released: int = 0
    shed: int = 0
    wait_sum_s: float = 0.0
    wait_max_s: float = 0.0


@dataclass(frozen=True, slots=True)
class ClassRestriction:
    """Stricter admission for one class while an SLO's error budget is protected
    (``slo/protection.py``): at most ``gate_fraction`` of a replica's limits, no
    promotion with age, and shed after waiting ``max_wait_s``."""

    gate_fraction: float
    max_wait_s: float


@dataclass(slots=True)
class _Band:
    tenants: dict[str, list[tuple[float, int, QueuedRequest]]] = field(default_factory=dict)
    size: int = 0
    tokens: int = 0


class GatewayScheduler:
    """Holds requests at the gateway and releases them to replicas with room.

    Order of release: the most urgent band first (lower ``SloClass.priority``);
    inside a band the backlogged tenant with the smallest virtual token counter;
    inside a tenant the smallest ``predicted tokens + aging_tokens_per_s *
    arrival`` (shortest job first, and a request waiting ``d`` seconds gains
    ``aging_tokens_per_s * d`` tokens of priority, so none starves). A request
    that has already waited past its class's TTFT target has missed its SLO
    whatever happens next; the first time it reaches the head of its tenant's
    queue it is moved back by ``late_defer_s`` seconds of aging, so that under a
    burst the capacity goes to requests that can still meet theirs (0 turns this
    off; aging still bounds its wait). A request is
    released only to a replica the gate accepts for its class -- the class's
    ``gate_fraction`` of the limits, or all of them once the request has waited
    ``promote_after`` of its deadline, so batch work cannot starve -- and the
    router picks among those replicas at release time (late binding).

    Cache stickiness: the router first chooses among all healthy replicas; if
    its choice is saturated but holds more of the prompt's prefix than any
    replica with room, the request keeps waiting for it (that replica is then
    reserved for the rest of this release call, so nothing overtakes it there)
    and up to ``lookahead`` later requests are tried instead.
    """

    def __init__(
        self,
        router: Router,
        *,
        gate: SaturationGate | None = None,
        vtc: VirtualTokenCounter | None = None,
        aging_tokens_per_s: float = 200.0,
        decode_s_per_token: float = 0.01,
        drain_tokens_per_s: float | None = None,
        lookahead: int = 32,
        promote_after: float = 0.5,
        late_defer_s: float = 30.0,
        restrictions: Mapping[str, ClassRestriction] | None = None,
    ) -> None:
        self._router = router
        # class name -> restriction; the owner (hub, simulator) updates it in place
        self.restrictions: Mapping[str, ClassRestriction] = (
            restrictions if restrictions is not None else {})
        self.late_defer_s = late_defer_s
        self._deferred: set[int] = set()  # sequence numbers of late requests moved back
        self.lookahead = lookahead
        self.promote_after = promote_after
        self.gate = gate or SaturationGate()
        self.vtc = vtc or VirtualTokenCounter()
        self.aging_tokens_per_s = aging_tokens_per_s
        self.decode_s_per_token = decode_s_per_token
        self.drain_tokens_per_s = drain_tokens_per_s
        self._bands: dict[int, _Band] = {}
        self._seq = itertools.count()
        self.stats: dict[str, ClassStats] = {}

    def __len__(self) -> int:
        return sum(b.size for b in self._bands.values())

    def _min_service_s(self, item: QueuedRequest) -> float:
        return item.route.predicted_output * self.decode_s_per_token

    def submit(self, item: QueuedRequest, now: float) -> Shed | None:
        """Queue a request, or shed it at once if its deadline is already out of reach."""
        st = self.stats.setdefault(item.slo.name, ClassStats())
        st.submitted += 1
        slo = item.slo
        if slo.sheddable and slo.deadline_s is not None and self.drain_tokens_per_s:
            ahead = sum(b.tokens for p, b in self._bands.items() if p <= slo.priority)
            wait = ahead / self.drain_tokens_per_s
            if wait + self._min_service_s(item) > slo.deadline_s:
                st.shed += 1
                return Shed(item, max(1.0, wait - slo.deadline_s), "deadline out of reach")
        band = self._bands.setdefault(slo.priority, _Band())
        tenant = item.route.tenant
        if tenant not in band.tenants:
            backlogged = {t for b in self._bands.values() for t in b.tenants}
            self.vtc.on_backlogged(tenant, backlogged)
            band.tenants[tenant] = []
        key = item.est_tokens + self.aging_tokens_per_s * item.arrival
        heapq.heappush(band.tenants[tenant], (key, next(self._seq), item))
        band.size += 1
        band.tokens += item.est_tokens
        st.queued += 1
        return None

    def _pop(self, band: _Band, tenant: str) -> QueuedRequest:
        heap = band.tenants[tenant]
        _key, seq, item = heapq.heappop(heap)
        self._deferred.discard(seq)
        if not heap:
            del band.tenants[tenant]
        band.size -= 1
        band.tokens -= item.est_tokens
        self.stats[item.slo.name].queued -= 1
        return item

    def _push_back(self, prio: int, entries: list[tuple[float, int, QueuedRequest]]) -> None:
        band = self._bands[prio]
        for entry in entries:
            item = entry[2]
            heapq.heappush(band.tenants.setdefault(item.route.tenant, []), entry)
            band.size += 1
            band.tokens += item.est_tokens
            self.stats[item.slo.name].queued += 1

    def release(
        self, endpoints: Sequence[EndpointState], now: float
    ) -> list[tuple[QueuedRequest, str]]:
        """Requests to send now, each with the replica chosen for it.

        Stops at the first band whose next request finds no replica with room,
        so a less urgent band never overtakes a more urgent one.
        """
        out: list[tuple[QueuedRequest, str]] = []
        snap = {e.id: e for e in endpoints}
        healthy = [e.id for e in endpoints if e.healthy and e.breaker_state != BREAKER_OPEN]
        reserved: set[str] = set()
        for prio in sorted(self._bands):
            band = self._bands[prio]
            skipped: list[tuple[float, int, QueuedRequest]] = []
            blocked = False
            while band.size and len(skipped) < self.lookahead:
                tenant = self.vtc.pick(band.tenants)
                entry = band.tenants[tenant][0]
                item = entry[2]
                if self._defer_if_late(band.tenants[tenant], entry, now):
                    continue
                frac = self._fraction(item, now)
                allowed = [
                    e
                    for e in snap.values()
                    if e.id not in reserved and self.gate.accepts(e, frac)
                ]
                if not allowed:
                    blocked = True
                    break
                self._pop(band, tenant)
                eid, wait_for = self._bind(item, allowed, [snap[i] for i in healthy])
                if eid is None:
                    reserved.add(wait_for)
                    skipped.append(entry)
                    continue
                self._dispatch(item, eid, snap, now)
                out.append((item, eid))
            self._push_back(prio, skipped)
            if blocked:
                return out
        return out

    def _defer_if_late(
        self, heap: list[tuple[float, int, QueuedRequest]],
        entry: tuple[float, int, QueuedRequest], now: float,
    ) -> bool:
        """Move a request that has already missed its time-to-first-token target
        behind its tenant's requests that can still make theirs, once.

        Its key grows by ``late_defer_s`` seconds of aging, so a fresh request
        goes first unless the late one is that much older (aging still bounds
        its wait: nothing starves). Under a burst this spends capacity on
        requests that can still meet their SLO instead of on ones that cannot.
        """
        key, seq, item = entry
        ttft = item.slo.ttft_s
        if (
            self.late_defer_s <= 0
            or self.aging_tokens_per_s <= 0
            or ttft is None
            or now - item.arrival <= ttft
            or seq in self._deferred
        ):
            return False
        heapq.heapreplace(heap, (key + self.late_defer_s * self.aging_tokens_per_s, seq, item))
        self._deferred.add(seq)
        return True

    def class_fraction(self, slo: SloClass) -> float:
        """The class's gate share, lowered while it is restricted."""
        r = self.restrictions.get(slo.name)
        return slo.gate_fraction if r is None else min(slo.gate_fraction, r.gate_fraction)

    def _fraction(self, item: QueuedRequest, now: float) -> float:
        """The class's gate share, or all of it once the request has waited
        ``promote_after`` of its deadline (so batch work cannot starve), unless the
        class is restricted (then no promotion: it is to yield)."""
        slo = item.slo
        if slo.name in self.restrictions:
            return self.class_fraction(slo)
        if slo.deadline_s is not None and now - item.arrival >= self.promote_after * slo.deadline_s:
            return 1.0
        return slo.gate_fraction

    def _bind(
        self,
        item: QueuedRequest,
        allowed: list[EndpointState],
        healthy: list[EndpointState],
    ) -> tuple[str | None, str]:
        """(replica to send to now, "") or (None, the warmer replica to wait for)."""
        req = item.route
        if req.block_hashes and len(healthy) > len(allowed):
            best = self._router.choose(req, healthy)
            allowed_ids = {e.id for e in allowed}
            if best not in allowed_ids:
                aff = self._router.affinity(req, healthy)
                if aff.get(best, 0) > max(aff.get(i, 0) for i in allowed_ids):
                    return None, best
        return self._router.choose(req, allowed), ""

    def _dispatch(
        self, item: QueuedRequest, eid: str, snap: dict[str, EndpointState], now: float
    ) -> None:
        req = item.route
        self._router.commit(req, eid)
        snap[eid] = snap[eid].with_dispatch(req.prompt_tokens, req.predicted_output)
        self.vtc.charge(req.tenant, req.prompt_tokens, req.predicted_output)
        st = self.stats[item.slo.name]
        st.released += 1
        wait = now - item.arrival
        st.wait_sum_s += wait
        st.wait_max_s = max(st.wait_max_s, wait)

    def settle(self, tenant: str, predicted_output: int, actual_output: int) -> None:
        """Correct a tenant's counter once its real output length is known."""
        self.vtc.charge(tenant, 0, actual_output - predicted_output)

    def expire(self, now: float) -> list[Shed]:
        """Shed sheddable requests whose deadline can no longer be met, and requests
        of a restricted class that waited past its ``max_wait_s``.

        A band is only shed from when no less urgent band has requests waiting
        (restricted classes excepted: they are shed to make room now).
        """
        out: list[Shed] = []
        prios = sorted(self._bands)
        for i, prio in enumerate(prios):
            if any(self._bands[p].size for p in prios[i + 1 :]) and not self.restrictions:
                continue
            band = self._bands[prio]
            for tenant in list(band.tenants):
                keep: list[tuple[float, int, QueuedRequest]] = []
                for entry in band.tenants[tenant]:
                    item = entry[2]
                    slo = item.slo
                    r = self.restrictions.get(slo.name)
                    late_ok = not any(self._bands[p].size for p in prios[i + 1 :])
                    protect = r is not None and now - item.arrival > r.max_wait_s
                    if protect or (
                        late_ok
                        and slo.sheddable
                        and slo.deadline_s is not None
                        and now - item.arrival + self._min_service_s(item) > slo.deadline_s
                    ):
                        band.size -= 1
                        band.tokens -= item.est_tokens
                        st = self.stats[slo.name]
                        st.queued -= 1
                        st.shed += 1
                        self._deferred.discard(entry[1])
                        out.append(Shed(item, self._retry_after(),
                                        "protecting an SLO's error budget" if protect
                                        else "deadline passed"))
                    else:
                        keep.append(entry)
                if keep:
                    heapq.heapify(keep)
                    band.tenants[tenant] = keep
                else:
                    del band.tenants[tenant]
        return out

    def _retry_after(self) -> float:
        if not self.drain_tokens_per_s:
            return 1.0
        return max(1.0, sum(b.tokens for b in self._bands.values()) / self.drain_tokens_per_s)

    def backlog(self, now: float) -> tuple[int, int, float]:
        """(requests waiting, their predicted tokens, the oldest one's wait in s)."""
        n = tokens = 0
        oldest = now
        for band in self._bands.values():
            n += band.size
            tokens += band.tokens
            for entries in band.tenants.values():
                for _, _, item in entries:
                    oldest = min(oldest, item.arrival)
        return n, tokens, max(0.0, now - oldest)

    def queued_by_class(self) -> Mapping[str, int]:
        return {k: v.queued for k, v in self.stats.items()}
