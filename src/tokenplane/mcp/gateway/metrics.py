"""The MCP gateway's Prometheus series (lock-free cells, as the request path's)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from tokenplane.observe.cells import CounterCells, HistogramCells

CALL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class McpMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.calls = CounterCells(
            "tokenplane_mcp_calls", "MCP requests by server, name (tool, prompt or "
            "resource), method and decision (allow, deny_hidden, deny_argument, "
            "deny_destructive, confirm_required, rate_limited, concurrency_limited, "
            "injection_blocked, result_refused, upstream_error, timeout).",
            ["server", "name", "method", "decision", "tenant"], registry)
        self.result_tokens = CounterCells(
            "tokenplane_mcp_result_tokens", "Tokens of tool results as forwarded to the "
            "client, in the accounting model's tokenizer.", ["server", "name", "tenant"],
            registry)
        self.truncated_tokens = CounterCells(
            "tokenplane_mcp_truncated_tokens", "Tokens of tool results cut by "
            "max_result_tokens.", ["server", "name", "tenant"], registry)
        self.result_bytes = CounterCells(
            "tokenplane_mcp_result_bytes", "Bytes of upstream answers to tools/call.",
            ["server", "name", "tenant"], registry)
        self.duration = HistogramCells(
            "tokenplane_mcp_call_duration_seconds", "Time of a tools/call through the "
            "gateway, upstream included.", ["server"], CALL_BUCKETS, registry)
