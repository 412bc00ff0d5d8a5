"""The desired replica counts of every pool the KEDA scaler answers for, when each
was last decided, and a way to wait until they change (what ``StreamIsActive``
pushes)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

CountKind = Literal["serving", "warm", "total"]
COUNT_KINDS: tuple[CountKind, ...] = ("serving", "warm", "total")


@dataclass(frozen=True, slots=True)
class Desired:
    """What the autoscaler last decided for one pool: replicas taking traffic and
    replicas loaded but idle (the warm pool)."""

    serving: int
    warm: int

    def of(self, kind: CountKind) -> int:
        """The count a ScaledObject asks for: ``serving``, ``warm`` or their ``total``."""
        if kind == "serving":
            return self.serving
        if kind == "warm":
            return self.warm
        return self.serving + self.warm


class UnknownPool(KeyError):
    """No KEDA actuator scales this pool (a ScaledObject naming a pool the gateway
    does not autoscale through KEDA)."""


class DesiredBoard:
    """Pool -> the last :class:`Desired` and when it was decided, written by the KEDA
    actuator and read by the gRPC servicer, on one event loop. A pool is known from
    :meth:`register` on, with no decision until the first :meth:`set`. Every change
    bumps :attr:`version` and wakes the waiters of :meth:`wait_changed`; a repeated
    decision only renews its time."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._known: set[str] = set()
        self._desired: dict[str, Desired] = {}
        self._decided_at: dict[str, float] = {}
        self._changed_at: dict[str, float] = {}
        self._version = 0
        self._changed: asyncio.Event | None = None

    @property
    def version(self) -> int:
        return self._version

    def pools(self) -> tuple[str, ...]:
        return tuple(sorted(self._known))

    def register(self, pool: str) -> None:
        if pool in self._known:
            raise ValueError(f"pool {pool!r} is already scaled through KEDA")
        self._known.add(pool)

    def get(self, pool: str) -> Desired | None:
        """The pool's last decision (None before the first one)."""
        if pool not in self._known:
            raise UnknownPool(pool)
        return self._desired.get(pool)

    def age(self, pool: str) -> float | None:
        """Seconds since the pool was last decided (None before the first time)."""
        at = self._decided_at.get(pool)
        return None if at is None else self._clock() - at

    def changed_at(self, pool: str) -> float | None:
        """When the pool's desired counts last changed (the clock's time; None before
        the first decision)."""
        return self._changed_at.get(pool)

    def set(self, pool: str, desired: Desired) -> None:
        if pool not in self._known:
            raise UnknownPool(pool)
        if desired.serving < 0 or desired.warm < 0:
            raise ValueError(f"negative replica count for pool {pool!r}: {desired}")
        now = self._clock()
        self._decided_at[pool] = now
        if self._desired.get(pool) == desired:
            return
        self._desired[pool] = desired
        self._changed_at[pool] = now
        self._version += 1
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def wait_changed(self, seen: int) -> int:
        """Return the version once it differs from ``seen`` (at once if it already
        does)."""
        while self._version == seen:
            if self._changed is None:
                self._changed = asyncio.Event()
            await self._changed.wait()
        return self._version
