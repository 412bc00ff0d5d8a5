"""The reservations of this worker whose concurrency units are leases to renew.

A store that leases gauge units (``lease_s > 0``) notes each grant that holds a gauge
here when it is made and forgets it when its settlement is sent; the worker's
heartbeat renews whatever is noted, one store call per tenant.
"""

from __future__ import annotations

from collections.abc import Sequence

from tokenplane.admission.binding import BoundLimit


def holds_gauge(limits: Sequence[BoundLimit]) -> bool:
    return any(b.rule.kind == "gauge" for b in limits)


class Leases:
    """Reservation ids by tenant, in the order they were made."""

    def __init__(self) -> None:
        self._by_tenant: dict[str, dict[str, None]] = {}

    def add(self, tenant: str, rid: str) -> None:
        self._by_tenant.setdefault(tenant, {})[rid] = None

    def discard(self, tenant: str, rid: str) -> None:
        rids = self._by_tenant.get(tenant)
        if rids is None:
            return
        rids.pop(rid, None)
        if not rids:
            del self._by_tenant[tenant]

    def by_tenant(self) -> list[tuple[str, list[str]]]:
        """A copy: ``(tenant, [rid, ...])`` for every tenant with a lease."""
        return [(t, list(rids)) for t, rids in self._by_tenant.items()]

    def __len__(self) -> int:
        return sum(len(r) for r in self._by_tenant.values())
