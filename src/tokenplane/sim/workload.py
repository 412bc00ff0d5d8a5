"""Assign tenants, SLO classes and output predictions to trace requests, by rule."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from tokenplane.sim.traces import TraceRequest


@dataclass(frozen=True, slots=True)
class WorkloadRules:
    """``batch_fraction`` of requests go to ``batch_class``, the rest to
    ``interactive_class``; tenants ``t0..t{n-1}`` are drawn with Zipf weights
    ``1 / k**zipf_s``. Seeded: same rules and seed, same assignment."""

    batch_fraction: float = 0.2
    tenants: int = 5
    zipf_s: float = 1.0
    seed: int = 0
    interactive_class: str = "interactive"
    batch_class: str = "batch"

    def __post_init__(self) -> None:
        if not 0.0 <= self.batch_fraction <= 1.0:
            raise ValueError("batch_fraction must be in [0, 1]")
        if self.tenants < 1:
            raise ValueError("tenants must be >= 1")


@dataclass(frozen=True, slots=True)
class SimRequest:
    request_id: str
    arrival: float
    prompt_tokens: int
    output_tokens: int
    block_hashes: tuple[int, ...]
    tenant: str
    slo_class: str


def zipf_weights(n: int, s: float) -> list[float]:
    raw = [1.0 / (k**s) for k in range(1, n + 1)]
    total = sum(raw)
    return [w / total for w in raw]


def assign(trace: Sequence[TraceRequest], rules: WorkloadRules) -> list[SimRequest]:
    """Label each trace request with a tenant and an SLO class."""
    rng = random.Random(rules.seed)
    names = [f"t{k}" for k in range(rules.tenants)]
    weights = zipf_weights(rules.tenants, rules.zipf_s)
    out: list[SimRequest] = []
    for i, r in enumerate(trace):
        tenant = rng.choices(names, weights)[0]
        cls = rules.batch_class if rng.random() < rules.batch_fraction else rules.interactive_class
        out.append(
            SimRequest(
                request_id=f"r{i}",
                arrival=r.arrival,
                prompt_tokens=r.prompt_tokens,
                output_tokens=r.output_tokens,
                block_hashes=r.block_hashes,
                tenant=tenant,
                slo_class=cls,
            )
        )
    return out
