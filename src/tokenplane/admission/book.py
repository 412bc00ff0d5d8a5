"""The functional core of admission: counters, reservations and their settlement.

A :class:`CounterBook` holds every counter in plain Python objects. Each operation
takes the bound limits and ``now`` (ms) as arguments and answers in the *raw*
integer form that the Redis script (``counters.lua``) answers too, so both stores
share one decoder and one set of semantics:

* reserve / debit -> ``[0, index, remaining, retry_ms]`` (refused; ``index`` is
  1-based, ``retry_ms`` -1 when waiting cannot help) or
  ``[1, remaining_1 .. remaining_n, (index, threshold_pct, used)*]``;
* reconcile / release -> ``[found, (index, threshold_pct, used)*]``;
* status -> ``[used_1, held_1, .., used_n, held_n]``;
* renew -> ``[renewed, reacquired]``.

Concurrency units (gauges) are *leases*: a reservation made with ``lease_ms > 0``
that holds a gauge keeps its units only while its lease is renewed (by the
worker's heartbeat, :meth:`CounterBook.renew`). A lease not renewed by its
deadline *lapses* at the next operation of its tenant: its gauge units are
given back at once, while the reservation itself (tokens, money) lives on until it
is settled or expires at its ``ttl``. Renewing a lapsed lease takes its units again.

Amount vectors are ``[requests, input, output, cost]``; units are numbered
1..5 (requests, input, output, total, cost).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

ALERT_PCTS = (50, 80, 100)
# One bound limit on the wire: key, kind ("w" | "c" | "g"), unit (1..5), limit,
# param (window length in ms, or calendar window id), calendar window end in ms.
Wire = tuple[str, str, int, int, int, int]


def amount(vec: Sequence[int], unit: int) -> int:
    if unit == 4:
        return vec[1] + vec[2]
    if unit == 5:
        return vec[3]
    return vec[unit - 1]


@dataclass(slots=True)
class _Sliding:
    log: deque[tuple[int, str]] = field(default_factory=deque)
    amounts: dict[str, int] = field(default_factory=dict)
    total: int = 0

    def prune(self, now_ms: int, window_ms: int) -> None:
        edge = now_ms - window_ms
        log = self.log
        while log and log[0][0] <= edge:
            _, member = log.popleft()
            self.total -= self.amounts.pop(member, 0)

    def add(self, member: str, n: int, now_ms: int) -> None:
        if n <= 0:
            return
        if member in self.amounts:
            self.amounts[member] += n
        else:
            self.log.append((now_ms, member))
            self.amounts[member] = n
        self.total += n

    def retry_ms(self, n: int, limit: int, now_ms: int, window_ms: int) -> int:
        if n > limit:
            return -1
        excess = self.total + n - limit
        freed = 0
        for t, member in self.log:
            freed += self.amounts.get(member, 0)
            if freed >= excess:
                return t + window_ms - now_ms
        return window_ms


@dataclass(slots=True)
class _Calendar:
    win: int = -1
    used: int = 0
    held: int = 0

    def roll(self, win: int) -> None:
        if win > self.win:
            self.win, self.used, self.held = win, 0, 0


@dataclass(slots=True)
class _Gauge:
    used: int = 0


@dataclass(slots=True)
class _Entry:
    key: str
    kind: str
    unit: int
    granted: int
    win: int


@dataclass(slots=True)
class _Record:
    rid: str
    tenant: str
    deadline_ms: int
    ttl_ms: int
    entries: list[_Entry]
    reserved: list[int]
    debited: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    ndebits: int = 0
    leased: bool = False


State = _Sliding | _Calendar | _Gauge


class CounterBook:
    """All counters of one process, for any number of tenants."""

    def __init__(self) -> None:
        self._state: dict[str, State] = {}
        self._records: dict[str, _Record] = {}
        self._deadlines: list[tuple[int, str]] = []
        self._clock: dict[str, int] = {}
        # per tenant: reservation id -> lease deadline, and a heap of the deadlines
        self._leases: dict[str, dict[str, int]] = {}
        self._lease_heap: dict[str, list[tuple[int, str]]] = {}
        self.expired = 0
        self.lapsed = 0

    # -- helpers -----------------------------------------------------------------
    def _now(self, tenant: str, now_ms: int) -> int:
        last = self._clock.get(tenant, now_ms)
        if now_ms < last:
            return last
        self._clock[tenant] = now_ms
        return now_ms

    def _get(self, tenant: str, key: str, kind: str) -> State:
        full = f"{tenant}\x00{key}"
        state = self._state.get(full)
        if state is None:
            state = _Sliding() if kind == "w" else _Calendar() if kind == "c" else _Gauge()
            self._state[full] = state
        return state

    def _check(self, st: State, w: Wire, n: int, now_ms: int) -> tuple[int, int] | None:
        """``None`` if ``n`` more units fit, else ``(remaining, retry_ms)``."""
        limit = w[3]
        if isinstance(st, _Sliding):
            st.prune(now_ms, w[4])
            if n > 0 and st.total + n > limit:
                return max(0, limit - st.total), st.retry_ms(n, limit, now_ms, w[4])
            return None
        if isinstance(st, _Calendar):
            st.roll(w[4])
            if n > 0 and st.used + n > limit:
                return max(0, limit - st.used), (-1 if n > limit else max(0, w[5] - now_ms))
            return None
        if n > 0 and st.used + n > limit:
            return max(0, limit - st.used), -1
        return None

    @staticmethod
    def _used(st: State) -> int:
        return st.total if isinstance(st, _Sliding) else st.used

    @staticmethod
    def _alerts(out: list[int], idx: int, before: int, after: int, limit: int) -> None:
        if limit <= 0:
            return
        for pct in ALERT_PCTS:
            if before * 100 < pct * limit <= after * 100:
                out.extend((idx, pct, after))

    def sweep(self, now_ms: int) -> int:
        """Settle every reservation whose deadline passed, as if fully used."""
        count = 0
        heap = self._deadlines
        while heap and heap[0][0] <= now_ms:
            deadline, rid = heapq.heappop(heap)
            rec = self._records.get(rid)
            if rec is None or rec.deadline_ms != deadline:
                continue
            del self._records[rid]
            self._leases.get(rec.tenant, {}).pop(rid, None)
            for e in rec.entries:
                st = self._get(rec.tenant, e.key, e.kind)
                if isinstance(st, _Gauge):
                    st.used = max(0, st.used - e.granted)
                elif isinstance(st, _Calendar) and st.win == e.win:
                    st.held = max(0, st.held - e.granted)
            count += 1
        self.expired += count
        return count

    def _release_gauges(self, rec: _Record) -> None:
        for e in rec.entries:
            if e.kind == "g" and e.granted > 0:
                st = self._get(rec.tenant, e.key, e.kind)
                assert isinstance(st, _Gauge)
                st.used = max(0, st.used - e.granted)
                e.granted = 0

    def lapse(self, tenant: str, now_ms: int) -> int:
        """Give back the gauge units of the tenant's leases past their deadline (at
        most 64 per call, like the Redis script)."""
        leases = self._leases.get(tenant)
        if not leases:
            return 0
        heap = self._lease_heap[tenant]
        count = 0
        while heap and heap[0][0] <= now_ms and count < 64:
            deadline, rid = heapq.heappop(heap)
            if leases.get(rid) != deadline:
                continue
            del leases[rid]
            rec = self._records.get(rid)
            if rec is not None:
                self._release_gauges(rec)
                self.lapsed += 1
            count += 1
        return count

    def _lease(self, tenant: str, rid: str, deadline: int) -> None:
        self._leases.setdefault(tenant, {})[rid] = deadline
        heapq.heappush(self._lease_heap.setdefault(tenant, []), (deadline, rid))

    def renew(self, tenant: str, rids: Sequence[str], now_ms: int, lease_ms: int) -> list[int]:
        """Extend the leases of ``rids`` to ``now + lease_ms``; a lapsed lease whose
        reservation is still open takes its gauge units again."""
        now_ms = self._now(tenant, now_ms)
        leases = self._leases.get(tenant, {})
        deadline = now_ms + lease_ms
        renewed = back = 0
        for rid in rids:
            if rid in leases:
                self._lease(tenant, rid, deadline)
                renewed += 1
                continue
            rec = self._records.get(rid)
            if rec is None or not rec.leased or rec.tenant != tenant:
                continue
            granted = [rec.reserved[j] + rec.debited[j] for j in range(4)]
            for e in rec.entries:
                if e.kind != "g":
                    continue
                full = amount(granted, e.unit)
                if full > e.granted:
                    st = self._get(tenant, e.key, e.kind)
                    assert isinstance(st, _Gauge)
                    st.used += full - e.granted
                    e.granted = full
            self._lease(tenant, rid, deadline)
            back += 1
        return [renewed, back]

    # -- operations --------------------------------------------------------------
    def reserve(self, tenant: str, rid: str, wires: Sequence[Wire], vec: Sequence[int],
                now_ms: int, ttl_ms: int, lease_ms: int = 0) -> list[int]:
        now_ms = self._now(tenant, now_ms)
        self.sweep(now_ms)
        self.lapse(tenant, now_ms)
        if rid in self._records:
            raise ValueError(f"reservation id {rid!r} is already in use")
        states = [self._get(tenant, w[0], w[1]) for w in wires]
        worst = self._worst(states, wires, vec, now_ms)
        if worst is not None:
            return worst
        out = [1]
        alerts: list[int] = []
        entries: list[_Entry] = []
        for i, (st, w) in enumerate(zip(states, wires, strict=True)):
            n = amount(vec, w[2])
            before = self._used(st)
            if isinstance(st, _Sliding):
                st.add(rid, n, now_ms)
            else:
                st.used += n
                if isinstance(st, _Calendar):
                    st.held += n
                    self._alerts(alerts, i + 1, before, st.used, w[3])
            win = st.win if isinstance(st, _Calendar) else 0
            entries.append(_Entry(w[0], w[1], w[2], n, win))
            out.append(w[3] - self._used(st))
        rec = _Record(rid, tenant, now_ms + ttl_ms, ttl_ms, entries, list(vec))
        if lease_ms > 0 and any(w[1] == "g" for w in wires):
            rec.leased = True
            self._lease(tenant, rid, now_ms + lease_ms)
        self._records[rid] = rec
        heapq.heappush(self._deadlines, (rec.deadline_ms, rid))
        return out + alerts

    def _worst(self, states: Sequence[State], wires: Sequence[Wire], vec: Sequence[int],
               now_ms: int) -> list[int] | None:
        worst: list[int] | None = None
        for i, (st, w) in enumerate(zip(states, wires, strict=True)):
            refused = self._check(st, w, amount(vec, w[2]), now_ms)
            if refused is None:
                continue
            remaining, retry = refused
            if worst is None or (worst[3] != -1 and (retry == -1 or retry > worst[3])):
                worst = [0, i + 1, remaining, retry]
        return worst

    def debit(self, rid: str, wires: Sequence[Wire], vec: Sequence[int],
              now_ms: int) -> list[int]:
        rec = self._records.get(rid)
        if rec is None:
            return [-1]
        now_ms = self._now(rec.tenant, now_ms)
        self.lapse(rec.tenant, now_ms)
        states = [self._get(rec.tenant, w[0], w[1]) for w in wires]
        worst = self._worst(states, wires, vec, now_ms)
        if worst is not None:
            return worst
        rec.ndebits += 1
        member = f"{rid}#{rec.ndebits}"
        out = [1]
        alerts: list[int] = []
        for i, (st, w, e) in enumerate(zip(states, wires, rec.entries, strict=True)):
            n = amount(vec, w[2])
            before = self._used(st)
            if isinstance(st, _Sliding):
                st.add(member, n, now_ms)
            elif isinstance(st, _Calendar):
                st.used += n
                st.held += n
                if e.win == st.win:
                    e.granted += n
                else:
                    e.win, e.granted = st.win, n
                self._alerts(alerts, i + 1, before, st.used, w[3])
            else:
                st.used += n
                e.granted += n
            out.append(w[3] - self._used(st))
        for j in range(4):
            rec.debited[j] += vec[j]
        rec.deadline_ms = now_ms + rec.ttl_ms
        heapq.heappush(self._deadlines, (rec.deadline_ms, rid))
        return out + alerts

    def reconcile(self, rid: str, wires: Sequence[Wire], actual: Sequence[int],
                  now_ms: int) -> list[int]:
        rec = self._records.pop(rid, None)
        if rec is None:
            return [0]
        self._leases.get(rec.tenant, {}).pop(rid, None)
        now_ms = self._now(rec.tenant, now_ms)
        granted_vec = [rec.reserved[j] + rec.debited[j] for j in range(4)]
        out = [1]
        for i, (w, e) in enumerate(zip(wires, rec.entries, strict=True)):
            st = self._get(rec.tenant, w[0], w[1])
            a = amount(actual, w[2])
            total = amount(granted_vec, w[2])
            if isinstance(st, _Sliding):
                st.prune(now_ms, w[4])
                if a < total:
                    main = st.amounts.get(rid, 0)
                    back = min(total - a, main)
                    if back > 0:
                        st.amounts[rid] = main - back
                        st.total -= back
                elif a > total:
                    st.add(f"{rid}#x", a - total, now_ms)
            elif isinstance(st, _Calendar):
                st.roll(w[4])
                before = st.used
                if e.win == st.win:
                    share = max(0, a - (total - e.granted))
                    st.used += share - e.granted
                    st.held = max(0, st.held - e.granted)
                else:
                    st.used += max(0, a - total)
                self._alerts(out, i + 1, before, st.used, w[3])
            else:
                st.used = max(0, st.used - e.granted)
        return out

    def status(self, tenant: str, wires: Sequence[Wire], now_ms: int) -> list[int]:
        now_ms = self._now(tenant, now_ms)
        self.lapse(tenant, now_ms)
        out: list[int] = []
        for w in wires:
            st = self._get(tenant, w[0], w[1])
            if isinstance(st, _Sliding):
                st.prune(now_ms, w[4])
                out.extend((st.total, 0))
            elif isinstance(st, _Calendar):
                st.roll(w[4])
                out.extend((st.used, st.held))
            else:
                out.extend((st.used, st.used))
        return out

    def outstanding(self) -> int:
        return len(self._records)

    def holds(self, rid: str) -> bool:
        return rid in self._records
