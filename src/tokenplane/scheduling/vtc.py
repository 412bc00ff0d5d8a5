"""Virtual token counters for per-tenant fairness in tokens.

After "Fairness in Serving Large Language Models" (Sheng et al., OSDI 2024): each
tenant's counter grows by the weighted tokens it was served divided by its
weight; the backlogged tenant with the smallest counter goes next; a tenant that
becomes backlogged is lifted to the smallest counter among those already
backlogged, so idle time does not bank credit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


class VirtualTokenCounter:
    """Counters per tenant with weights; input and output tokens weighted apart."""

    def __init__(
        self,
        weights: Mapping[str, float] | None = None,
        *,
        default_weight: float = 1.0,
        input_weight: float = 1.0,
        output_weight: float = 2.0,
    ) -> None:
        if default_weight <= 0 or input_weight < 0 or output_weight < 0:
            raise ValueError("weights must be positive")
        self._weights = dict(weights or {})
        if any(w <= 0 for w in self._weights.values()):
            raise ValueError("tenant weights must be positive")
        self.default_weight = default_weight
        self.input_weight = input_weight
        self.output_weight = output_weight
        self._counters: dict[str, float] = {}
        self._last_served = 0.0

    def weight(self, tenant: str) -> float:
        return self._weights.get(tenant, self.default_weight)

    def counter(self, tenant: str) -> float:
        return self._counters.get(tenant, 0.0)

    def on_backlogged(self, tenant: str, backlogged: Iterable[str]) -> None:
        """``tenant`` just got its first queued request; lift its counter."""
        others = [self.counter(t) for t in backlogged if t != tenant]
        floor = min(others) if others else self._last_served
        self._counters[tenant] = max(self.counter(tenant), floor)

    def charge(self, tenant: str, input_tokens: float, output_tokens: float) -> None:
        """Add served tokens (negative amounts correct an earlier prediction)."""
        cost = self.input_weight * input_tokens + self.output_weight * output_tokens
        c = self.counter(tenant) + cost / self.weight(tenant)
        self._counters[tenant] = c
        self._last_served = c

    def pick(self, backlogged: Iterable[str]) -> str:
        """The backlogged tenant with the smallest counter (ties: by name)."""
        return min(backlogged, key=lambda t: (self.counter(t), t))
