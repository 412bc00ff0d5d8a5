"""Snapshots the routing plugins read: one per replica, one per request."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

BREAKER_CLOSED = "closed"
BREAKER_OPEN = "open"
BREAKER_HALF_OPEN = "half_open"


@dataclass(frozen=True, slots=True)
class EndpointState:
    """What the gateway knows about one engine replica at one instant.

    Engine-reported figures (``num_running``, ``num_waiting``, ``kv_usage``) come
    from scraping; the ``inflight_*`` figures are the gateway's own live view.
    """

    id: str
    pool: str = "default"
    healthy: bool = True
    num_running: int = 0
    num_waiting: int = 0
    kv_usage: float = 0.0
    inflight_requests: int = 0
    inflight_prefill_tokens: int = 0
    inflight_decode_tokens: int = 0
    max_num_seqs: int = 256
    max_waiting: int = 8
    token_capacity: int = 200_000
    prefill_capacity: int = 16_384
    prefill_s_per_token: float = 7e-5
    cost_per_token: float = 0.0
    model_version: str = ""
    breaker_state: str = BREAKER_CLOSED

    @property
    def token_load(self) -> int:
        """Uncached prefill tokens plus predicted decode tokens in flight."""
        return self.inflight_prefill_tokens + self.inflight_decode_tokens

    @property
    def queue_depth(self) -> int:
        """Requests queued at the engine or known in flight but not yet running."""
        return max(self.num_waiting, self.inflight_requests - self.num_running)

    def with_dispatch(self, prefill_tokens: int, decode_tokens: int) -> EndpointState:
        """The snapshot after the gateway sends one more request here."""
        return EndpointState(
            id=self.id,
            pool=self.pool,
            healthy=self.healthy,
            num_running=self.num_running,
            num_waiting=self.num_waiting + 1,
            kv_usage=self.kv_usage,
            inflight_requests=self.inflight_requests + 1,
            inflight_prefill_tokens=self.inflight_prefill_tokens + prefill_tokens,
            inflight_decode_tokens=self.inflight_decode_tokens + decode_tokens,
            max_num_seqs=self.max_num_seqs,
            max_waiting=self.max_waiting,
            token_capacity=self.token_capacity,
            prefill_capacity=self.prefill_capacity,
            prefill_s_per_token=self.prefill_s_per_token,
            cost_per_token=self.cost_per_token,
            model_version=self.model_version,
            breaker_state=self.breaker_state,
        )


@dataclass(frozen=True, slots=True)
class RouteRequest:
    """What routing needs to know about one request."""

    request_id: str
    tenant: str = "default"
    session_id: str | None = None
    prompt_tokens: int = 0
    predicted_output: int = 0
    block_hashes: Sequence[int] = ()
    model_version: str | None = None
    pool: str | None = None
    keys: Mapping[str, str] = field(default_factory=dict)
