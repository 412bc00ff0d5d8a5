"""The counter store interface shared by the in-process and the Redis stores."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tokenplane.admission.amounts import Amounts
from tokenplane.admission.binding import BoundLimit
from tokenplane.admission.outcomes import DebitResult, Denial, Grant, LimitStatus, Settlement


class StoreUnavailable(Exception):
    """The shared counter store cannot be reached; the gateway answers 503."""


class CounterStore(Protocol):
    """Atomic, all-or-nothing counters for every limit of a request at once.

    ``limits`` of debit / reconcile / release are the grant's limits rebound at
    ``now`` (same order as at reserve). ``now`` is epoch seconds from the caller's
    clock; every store uses it (never its own clock) and never lets a tenant's
    time run backwards.
    """

    async def reserve(self, tenant: str, rid: str, limits: Sequence[BoundLimit],
                      amounts: Amounts, now: float, ttl_s: float) -> Grant | Denial: ...

    async def debit(self, tenant: str, rid: str, limits: Sequence[BoundLimit],
                    amounts: Amounts, now: float) -> DebitResult: ...

    async def reconcile(self, tenant: str, rid: str, limits: Sequence[BoundLimit],
                        actual: Amounts, now: float) -> Settlement: ...

    async def status(self, tenant: str, limits: Sequence[BoundLimit],
                     now: float) -> list[LimitStatus]: ...

    async def heartbeat(self, now: float) -> None:
        """Renew this worker's concurrency leases (and retry what waits to be settled);
        the worker calls it every ``heartbeat_s``. A no-op for stores without leases."""
        ...

    async def close(self) -> None: ...
