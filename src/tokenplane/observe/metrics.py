"""The gateway's Prometheus metrics, on a registry of its own (no global state).

Label sets are bounded: model alias, operation, status class, and the principal
levels that the operator chose to expose (tenant by default; never keys or users).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
TPOT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.25, 0.5, 1)

CONTENT_TYPE = CONTENT_TYPE_LATEST


class GatewayMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "tokenplane_requests", "Requests by model alias, operation and outcome.",
            ["model", "operation", "status", "code", "tenant"], registry=r,
        )
        self.tokens = Counter(
            "tokenplane_tokens", "Tokens by model alias and kind (input sources, cached, "
            "output, reasoning).", ["model", "kind", "tenant"], registry=r,
        )
        self.cost = Counter(
            "tokenplane_cost_micros", "Cost in micro-units of the model's currency.",
            ["model", "currency", "tenant"], registry=r,
        )
        self.ttft = Histogram(
            "tokenplane_time_to_first_token_seconds", "Time to first token "
            "(gen_ai.server.time_to_first_token).", ["model"], buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.tpot = Histogram(
            "tokenplane_time_per_output_token_seconds", "Time per output token after the "
            "first (gen_ai.server.time_per_output_token).", ["model"], buckets=TPOT_BUCKETS,
            registry=r,
        )
        self.e2e = Histogram(
            "tokenplane_request_duration_seconds", "End-to-end request latency "
            "(gen_ai.server.request.duration).", ["model", "operation"],
            buckets=LATENCY_BUCKETS, registry=r,
        )
        self.unauthenticated = Counter(
            "tokenplane_unauthenticated_requests", "Requests refused for a missing or "
            "unknown key.", registry=r,
        )

    def render(self) -> bytes:
        data: bytes = generate_latest(self.registry)
        return data
