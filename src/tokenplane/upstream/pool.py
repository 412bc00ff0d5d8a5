"""Endpoints (one per upstream replica) grouped by model alias."""

from __future__ import annotations

from dataclasses import dataclass, field

from tokenplane.config.schema import BackendConfig, ModelConfig
from tokenplane.errors import GatewayError
from tokenplane.upstream.types import Transport


@dataclass(slots=True)
class Endpoint:
    """One replica that can serve an alias, with the gateway's live view of it."""

    id: str
    backend: BackendConfig
    transport: Transport
    upstream_model: str
    in_flight: int = 0
    prompt_tokens_in_flight: int = 0
    decode_tokens_in_flight: int = 0
    served: int = 0
    failures: int = 0
    # requests bound here by routing (from the route or scheduler stage to the
    # request's finish): a draining replica is removed once none is left
    bound: int = 0
    draining: bool = False  # leaving its pool: no new requests (routing/gateway/membership)
    base_url: str | None = None  # HTTP replicas: where they answer (scrape and probe)


@dataclass(slots=True)
class Pool:
    """An alias's replicas, and the demand it has seen since start (cumulative, read
    by the autoscaler as rates): requests bound to a replica (first attempts),
    their uncached prompt tokens, and the output tokens delivered."""

    model: ModelConfig
    endpoints: list[Endpoint] = field(default_factory=list)
    _rr: int = 0
    admitted_requests: int = 0
    admitted_prompt_tokens: int = 0
    delivered_output_tokens: int = 0

    def next_rr(self) -> int:
        self._rr += 1
        return self._rr


def pick_least_loaded(pool: Pool, exclude: tuple[str, ...]) -> Endpoint:
    cands = [e for e in pool.endpoints if e.id not in exclude and not e.draining]
    if not cands:
        raise GatewayError(503, f"No upstream is available for '{pool.model.alias}'.",
                           code="no_upstream_available")
    start = pool.next_rr() % len(cands)
    order = cands[start:] + cands[:start]
    return min(order, key=lambda e: e.in_flight)
