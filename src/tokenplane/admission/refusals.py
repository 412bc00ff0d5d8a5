"""Callers refused by a request-rate limit, remembered until that limit has room
again, and the pace of bytes a key may spend on requests refused for their size.

* :class:`RefusalMemo`: a ``requests`` limit of every model (an ``rpm``) that refused
  a scope refuses that scope's next calls until its ``retry_after_s`` has passed, so
  a caller past its rate is answered 429 at once, before its body is parsed, counted
  or packed. The store told that wait; a refund in between (a request released
  before it ran) could make room earlier, so the memo may refuse for at most that
  wait what the store would have let through: it never lets through what the store
  would refuse. A change of the limits (a rate raised or removed) clears it.
* :class:`BytePace`: a token bucket of body bytes per key. Only bodies refused for
  their size (``context_length_exceeded``) are debited; a key that runs it dry is
  refused (429 ``rate_limit_exceeded``) until it has refilled to zero.

Pure: ``now`` comes from the caller; both are bounded (the oldest entries go first).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace

from tokenplane.admission.outcomes import Denial
from tokenplane.admission.scopes import Scope


class RefusalMemo:
    def __init__(self, capacity: int = 10_000) -> None:
        if capacity < 1:
            raise ValueError("capacity must be positive")
        self.capacity = capacity
        self._until: OrderedDict[Scope, tuple[float, Denial]] = OrderedDict()

    def note(self, denial: Denial, now: float) -> None:
        """Remembers a refusal that any call of the scope would meet (a sliding
        window of requests over every model, with a known wait; a concurrency slot
        may free at any time, so gauges are not remembered)."""
        if denial.unit != "requests" or denial.scope.model is not None or denial.never \
                or denial.rule is None or denial.rule.kind != "window" \
                or denial.retry_after_s is None or denial.retry_after_s <= 0:
            return
        self._until[denial.scope] = (now + denial.retry_after_s, denial)
        self._until.move_to_end(denial.scope)
        while len(self._until) > self.capacity:
            self._until.popitem(last=False)

    def refused(self, scopes: list[Scope], now: float) -> Denial | None:
        """The remembered refusal of any of ``scopes`` still in force, with the wait
        left; ``None`` when none is."""
        for scope in scopes:
            held = self._until.get(scope)
            if held is None:
                continue
            until, denial = held
            if until <= now:
                del self._until[scope]
                continue
            return replace(denial, retry_after_s=until - now, remaining=0)
        return None

    def clear(self) -> None:
        """Forgets every refusal (the limits changed: a rate raised or removed)."""
        self._until.clear()

    def __len__(self) -> int:
        return len(self._until)


@dataclass(slots=True)
class _Bucket:
    level: float
    at: float


class BytePace:
    """``rate`` bytes a second per key, at most ``burst`` saved up."""

    def __init__(self, rate: int, burst: int, capacity: int = 10_000) -> None:
        if rate < 1 or burst < 1 or capacity < 1:
            raise ValueError("rate, burst and capacity must be positive")
        self.rate = rate
        self.burst = burst
        self.capacity = capacity
        self._keys: OrderedDict[str, _Bucket] = OrderedDict()

    def _level(self, key: str, now: float) -> _Bucket:
        b = self._keys.get(key)
        if b is None:
            b = _Bucket(float(self.burst), now)
            self._keys[key] = b
            while len(self._keys) > self.capacity:
                self._keys.popitem(last=False)
        else:
            b.level = min(float(self.burst), b.level + (now - b.at) * self.rate)
            b.at = now
            self._keys.move_to_end(key)
        return b

    def spend(self, key: str, n: int, now: float) -> float:
        """Debits ``n`` bytes; the seconds until the key may send again (0: now)."""
        b = self._level(key, now)
        b.level -= n
        return 0.0 if b.level >= 0 else -b.level / self.rate

    def wait(self, key: str, now: float) -> float:
        """Seconds until the key's bucket is back to zero (0: it may send)."""
        if key not in self._keys:
            return 0.0
        b = self._level(key, now)
        return 0.0 if b.level >= 0 else -b.level / self.rate
