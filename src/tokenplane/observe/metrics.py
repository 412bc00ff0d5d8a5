"""The gateway's Prometheus metrics, on a registry of its own (no global state).

Label sets are bounded: model alias, operation, status class, and the principal
levels that the operator chose to expose (tenant by default; never keys or users).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from tokenplane.auth.principal import Principal
from tokenplane.observe.cells import CounterCells, HistogramCells

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
TPOT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.25, 0.5, 1)

CONTENT_TYPE = CONTENT_TYPE_LATEST


PRINCIPAL_LEVELS = ("tenant", "department", "app")  # never key ids or end users
LedgerStats = Callable[[], Mapping[str, object]]
ErrorSource = Callable[[], Iterable[tuple[Sequence[str], float, int]]]


class GatewayMetrics:
    """``principal_labels``: the principal levels (of tenant, department, app) that label
    the request, token and cost counters, in that order; tenant alone by default."""

    def __init__(
        self, registry: CollectorRegistry | None = None,
        principal_labels: Sequence[str] = ("tenant",),
    ) -> None:
        bad = [lv for lv in principal_labels if lv not in PRINCIPAL_LEVELS]
        if bad:
            raise ValueError(f"principal labels must be among {PRINCIPAL_LEVELS}, not {bad}")
        self.principal_labels = tuple(principal_labels)
        self._tenant_only = self.principal_labels == ("tenant",)
        pl = list(self.principal_labels)
        self.registry = registry or CollectorRegistry()
        r = self.registry
        # the request path's series: lock-free cells (observe/cells.py)
        self.requests = CounterCells(
            "tokenplane_requests", "Requests by model alias, operation and outcome (ok, "
            "limited: refused by a limit or budget, client_errors, failures, cancelled).",
            ["model", "operation", "status", "code", "outcome", *pl], r,
        )
        self.tokens = CounterCells(
            "tokenplane_tokens", "Tokens by model alias and kind (input sources, cached, "
            "output, reasoning).", ["model", "kind", *pl], r,
        )
        self.cost = CounterCells(
            "tokenplane_cost_micros", "Cost in micro-units of the model's currency, as "
            "priced into the ledger.", ["model", "currency", *pl], r,
        )
        self.ttft = HistogramCells(
            "tokenplane_time_to_first_token_seconds", "Time to first token "
            "(gen_ai.server.time_to_first_token).", ["model"], LATENCY_BUCKETS, r,
        )
        self.tpot = HistogramCells(
            "tokenplane_time_per_output_token_seconds", "Time per output token after the "
            "first (gen_ai.server.time_per_output_token).", ["model"], TPOT_BUCKETS, r,
        )
        self.e2e = HistogramCells(
            "tokenplane_request_duration_seconds", "End-to-end request latency "
            "(gen_ai.server.request.duration).", ["model", "operation"], LATENCY_BUCKETS, r,
        )
        self.unauthenticated = Counter(
            "tokenplane_unauthenticated_requests", "Requests refused for a missing or "
            "unknown key.", registry=r,
        )

        self.admission_denials = Counter(
            "tokenplane_admission_denials", "Requests refused by admission (429), by code "
            "(rate_limit_exceeded, budget_exceeded, concurrency_limit_exceeded) and scope "
            "kind.", ["code", "scope", "tenant"], registry=r,
        )
        self.admission_unavailable = Counter(
            "tokenplane_admission_unavailable", "Requests refused (503) because the "
            "admission store was unreachable while failing closed.", ["tenant"], registry=r,
        )
        self.budget_stream_stops = Counter(
            "tokenplane_budget_stream_stops", "Streams ended early because a limit ran out.",
            ["code", "tenant"], registry=r,
        )
        self.max_tokens_clamped = Counter(
            "tokenplane_max_tokens_clamped", "Requests whose max_tokens was lowered to what "
            "the budget allows.", ["tenant"], registry=r,
        )
        self.session_tool_output = Counter(
            "tokenplane_session_tool_output", "Requests whose tool output was flagged: "
            "tool_output_large (a result over the size), context_growth (a step added more "
            "than the rate), tool_output_truncated (the policy shrank results).",
            ["flag", "tenant"], registry=r,
        )
        self.session_tool_output_removed = Counter(
            "tokenplane_session_tool_output_removed_tokens", "Tool-result tokens the "
            "tool-output policy removed from prompts.", ["tenant"], registry=r,
        )
        self.injection_verdicts = Counter(
            "tokenplane_injection_verdicts", "Verdicts the prompt-injection screen acted "
            "on, by source (messages: a request's new turn and tool results, by their "
            "worst verdict; documents: each RAG document) and action (log, flag, drop: "
            "documents only, block).", ["source", "action", "tenant"], registry=r,
        )
        self.session_budget_denials = Counter(
            "tokenplane_session_budget_denials", "Session steps refused because the "
            "session's budget was spent.", ["tenant"], registry=r,
        )
        self.budget_alerts = Counter(
            "tokenplane_budget_alerts", "Budgets crossing 50 / 80 / 100 % of their limit "
            "(upwards).", ["tenant", "scope", "limit", "threshold"], registry=r,
        )
        self.budget_used_pct = Gauge(
            "tokenplane_budget_used_threshold_pct", "Highest alert threshold (50 / 80 / 100) "
            "a budget crossed in its current period, per scope kind.",
            ["tenant", "scope", "limit"], registry=r,
        )
        self.budget_webhook_failures = Counter(
            "tokenplane_budget_webhook_failures", "Budget alert webhook posts that failed.",
            registry=r,
        )
        self.admission_store_degraded = Gauge(
            "tokenplane_admission_store_degraded", "1 while the shared admission store is "
            "unreachable (failing open or closed).", registry=r,
        )
        self.sched_queue = Gauge(
            "tokenplane_scheduler_queue_length", "Requests waiting at the gateway, by SLO "
            "class.", ["slo_class"], registry=r,
        )
        self.sched_wait = HistogramCells(
            "tokenplane_scheduler_wait_seconds", "Time a request waited at the gateway "
            "before release to a replica, by SLO class.", ["slo_class"],
            (0.0005, *LATENCY_BUCKETS), r,
        )
        self.sched_shed = Counter(
            "tokenplane_scheduler_shed", "Requests shed (503 with retry-after), by SLO class.",
            ["slo_class"], registry=r,
        )

    def track_admission_store(self, stats: Callable[[], Mapping[str, int]]) -> None:
        """Export the admission store's failure counters (``tokenplane_admission_store_*``:
        unavailable, fallback_ops, recoveries, orphaned_settlements, unenforced_debits)."""
        self.registry.register(_StatsCollector("tokenplane_admission_store", stats))

    def principal_values(self, p: Principal | None) -> tuple[str, ...]:
        """Label values of the configured principal levels ('' where unknown)."""
        if p is None:
            return ("",) * len(self.principal_labels)
        if self._tenant_only:
            return (p.tenant or "",)
        return tuple(getattr(p, level) or "" for level in self.principal_labels)

    def track_ledger(self, stats: LedgerStats) -> None:
        """Export the meter's counters at scrape time (``tokenplane_ledger_*``): events
        journaled, committed (fsynced), flushed, inserted, recovered; fsyncs, sink
        errors; gauges for the flush lag (events) and the last flush time."""
        self.registry.register(_LedgerCollector(stats))

    def track_errors(self, name: str, doc: str, labels: Sequence[str],
                     source: ErrorSource) -> None:
        """A gauge ``<name>`` (relative error) and ``<name>_samples`` read at scrape time
        from ``source()``: (label values, error, samples) per series."""
        self.registry.register(_ErrorCollector(name, doc, list(labels), source))

    def render(self) -> bytes:
        data: bytes = generate_latest(self.registry)
        return data


class _StatsCollector:
    """Reads cumulative counters from a callable at scrape time."""

    def __init__(self, prefix: str, stats: Callable[[], Mapping[str, int]]) -> None:
        self.prefix = prefix
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        for name, value in self.stats().items():
            fam = CounterMetricFamily(f"{self.prefix}_{name}",
                                      f"Admission store: {name.replace('_', ' ')}.")
            fam.add_metric([], value)
            yield fam

    def describe(self) -> Iterator[Metric]:
        return iter(())


_LEDGER_COUNTERS = {
    "journaled": "Usage events appended to this worker's journal.",
    "committed": "Usage events fsynced to the journal.",
    "flushed": "Usage events handed to the ledger sink.",
    "inserted": "Ledger rows inserted (replays of present rows excluded).",
    "recovered": "Usage events replayed from journals at start or adopted.",
    "syncs": "Journal fsyncs (group commits).",
    "sink_errors": "Ledger sink write failures (retried from the journal).",
}


class _LedgerCollector:
    def __init__(self, stats: LedgerStats) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        s = self.stats()
        for name, doc in _LEDGER_COUNTERS.items():
            value = s.get(name)
            if isinstance(value, int | float):
                fam = CounterMetricFamily(f"tokenplane_ledger_{name}", doc)
                fam.add_metric([], value)
                yield fam
        lag = s.get("lag")
        if isinstance(lag, int | float):
            yield GaugeMetricFamily("tokenplane_ledger_lag_events", "Events committed to the "
                                    "journal but not yet flushed to the ledger.", value=lag)
        last = s.get("last_flush_ts")
        if isinstance(last, int | float):
            yield GaugeMetricFamily("tokenplane_ledger_last_flush_timestamp_seconds",
                                    "When the flusher last wrote to the ledger.", value=last)

    def describe(self) -> Iterator[Metric]:
        return iter(())


class _ErrorCollector:
    def __init__(self, name: str, doc: str, labels: list[str], source: ErrorSource) -> None:
        self.name, self.doc, self.labels, self.source = name, doc, labels, source

    def collect(self) -> Iterator[Metric]:
        err = GaugeMetricFamily(self.name, self.doc, labels=self.labels)
        n = GaugeMetricFamily(f"{self.name}_samples", f"Samples behind {self.name}.",
                              labels=self.labels)
        for values, error, samples in self.source():
            err.add_metric(list(values), error)
            n.add_metric(list(values), samples)
        yield err
        yield n

    def describe(self) -> Iterator[Metric]:
        return iter(())
