"""The saturation gate: may a replica take one more request of a given class?"""

from __future__ import annotations

from dataclasses import dataclass

from tokenplane.routing.endpoint import BREAKER_OPEN, EndpointState


@dataclass(frozen=True, slots=True)
class SaturationGate:
    """A replica is saturated for a class when any of its figures reaches the
    class's share (``fraction``) of the limit: KV-cache use, queued requests,
    uncached prefill tokens in flight, total tokens in flight, or running slots.
    """

    kv_limit: float = 0.92
    use_queue: bool = True
    use_prefill: bool = True
    use_tokens: bool = True

    def accepts(self, e: EndpointState, fraction: float = 1.0) -> bool:
        if not e.healthy or e.breaker_state == BREAKER_OPEN:
            return False
        if e.kv_usage >= self.kv_limit * fraction:
            return False
        if e.num_running + e.queue_depth >= e.max_num_seqs:
            return False
        if self.use_queue and e.queue_depth >= max(1, int(e.max_waiting * fraction)):
            return False
        if self.use_prefill and e.inflight_prefill_tokens >= e.prefill_capacity * fraction:
            return False
        return not (self.use_tokens and e.token_load >= e.token_capacity * fraction)
