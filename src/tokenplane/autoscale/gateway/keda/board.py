"""The desired replica counts of every pool the KEDA scaler answers for, and a way to
wait until they change (what ``StreamIsActive`` pushes)."""

from __future__ import annotations

import asyncio
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
    """No actuator registered this pool (a ScaledObject naming a pool the gateway
    does not autoscale)."""


class DesiredBoard:
    """Pool -> :class:`Desired`, written by the KEDA actuators and read by the gRPC
    servicer, on one event loop. Every change bumps :attr:`version` and wakes the
    waiters of :meth:`wait_changed`."""

    def __init__(self) -> None:
        self._desired: dict[str, Desired] = {}
        self._version = 0
        self._changed: asyncio.Event | None = None

    @property
    def version(self) -> int:
        return self._version

    def pools(self) -> tuple[str, ...]:
        return tuple(sorted(self._desired))

    def register(self, pool: str, initial: Desired) -> None:
        if pool in self._desired:
            raise ValueError(f"pool {pool!r} already has a KEDA actuator")
        self.set(pool, initial)

    def get(self, pool: str) -> Desired:
        try:
            return self._desired[pool]
        except KeyError:
            raise UnknownPool(pool) from None

    def set(self, pool: str, desired: Desired) -> None:
        if desired.serving < 0 or desired.warm < 0:
            raise ValueError(f"negative replica count for pool {pool!r}: {desired}")
        if self._desired.get(pool) == desired:
            return
        self._desired[pool] = desired
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
