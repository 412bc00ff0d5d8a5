"""One exposition for the workers of ``serve --workers N``: each worker's series, summed.

A worker's registry is read into plain families (:func:`snapshot`, encoded with
:func:`encode` for its siblings) and :func:`merge` combines the families of every
worker the way prometheus_client's multiprocess mode does:

- counters, histograms (buckets, ``_count``, ``_sum``) and summaries: summed per
  sample name and label set; ``_created`` samples are left out (one per worker);
- gauges, by what they measure: **sum** for amounts spread over the workers
  (:data:`GAUGE_SUM`: requests in flight, queue lengths, the ledger lag), **max** for
  flags and shared states (:data:`GAUGE_MAX`), and otherwise one series per worker
  with a ``worker`` label (each worker's own view: breakers, replica health, the
  learners' errors).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence

import orjson
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric

# (sample name, labels, value)
Sample = tuple[str, dict[str, str], float]
# (family name, type, help, samples)
Family = tuple[str, str, str, list[Sample]]

WORKER_LABEL = "worker"
GAUGE_SUM = frozenset({
    "tokenplane_scheduler_queue_length",
    "tokenplane_endpoint_in_flight",
    "tokenplane_ledger_lag_events",
})
GAUGE_MAX = frozenset({
    "tokenplane_admission_store_degraded",
    "tokenplane_budget_used_threshold_pct",
    "tokenplane_ledger_last_flush_timestamp_seconds",
    # SLO states: every worker evaluates the same ledger (docs/SLO.md), so the workers'
    # figures differ only by when each last read it
    "tokenplane_slo_objective_ratio",
    "tokenplane_slo_sli_ratio",
    "tokenplane_slo_error_budget_remaining_ratio",
    "tokenplane_slo_error_budget_remaining_events",
    "tokenplane_slo_burn_rate",
    "tokenplane_slo_alert_firing",
    "tokenplane_canary_rolled_back",
})
_SUMMED = frozenset({"counter", "histogram", "summary", "gaugehistogram", "unknown"})


def snapshot(registry: CollectorRegistry) -> list[Family]:
    """The registry's families as plain values (collected now, on the caller's thread)."""
    return [(m.name, m.type, m.documentation,
             [(s.name, dict(s.labels), float(s.value)) for s in m.samples])
            for m in registry.collect()]


def encode(families: list[Family]) -> bytes:
    return orjson.dumps(families)


def decode(data: bytes) -> list[Family]:
    """The families :func:`encode` wrote (a NaN travels as null and comes back)."""
    families: list[Family] = orjson.loads(data)
    for family in families:
        for i, sample in enumerate(family[3]):
            if sample[2] is None:
                family[3][i] = (sample[0], sample[1], math.nan)
    return families


def counts_only(families: Sequence[Family]) -> list[Family]:
    """The summed kinds of ``families`` (counters, histograms, summaries), without their
    ``_created`` samples: what a worker's series carry over its death."""
    return [(name, typ, doc, [s for s in samples if not s[0].endswith("_created")])
            for name, typ, doc, samples in families if typ in _SUMMED]


def add_counts(live: Sequence[Family], carried: Sequence[Family]) -> list[Family]:
    """``live`` with the counts of ``carried`` (:func:`counts_only`) added in: a worker
    that replaced a dead one of its index goes on from where that one's last scrape
    left its counters, so the gateway's sums never go down."""
    by_name = {name: (typ, doc, samples) for name, typ, doc, samples in carried}
    out: list[Family] = []
    for name, typ, doc, samples in live:
        extra = by_name.pop(name, None)
        if extra is None or typ not in _SUMMED:
            out.append((name, typ, doc, samples))
            continue
        acc = {(n, tuple(lab.items())): (n, lab, v) for n, lab, v in samples}
        for n, lab, v in extra[2]:
            key = (n, tuple(lab.items()))
            seen = acc.get(key)
            acc[key] = (n, lab, v if seen is None else seen[2] + v)
        out.append((name, typ, doc, list(acc.values())))
    out.extend((name, typ, doc, samples) for name, (typ, doc, samples) in by_name.items())
    return out


def _gauge_mode(name: str) -> str:
    if name in GAUGE_SUM:
        return "sum"
    if name in GAUGE_MAX:
        return "max"
    return "worker"


def merge(parts: Sequence[tuple[str, Sequence[Family]]]) -> list[Metric]:
    """The families of every (worker id, families) part, combined (order: first seen)."""
    kinds: dict[str, tuple[str, str]] = {}
    values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], Sample]] = {}
    for worker, families in parts:
        for name, typ, doc, samples in families:
            if name not in kinds:
                kinds[name] = (typ, doc)
                values[name] = {}
            acc = values[name]
            mode = "sum" if typ in _SUMMED else _gauge_mode(name) if typ == "gauge" else "first"
            for sample, labels, value in samples:
                if mode == "sum" and sample.endswith("_created"):
                    continue
                if mode == "worker":
                    labels = {**labels, WORKER_LABEL: worker}
                # the same code labels every worker's series in the same order
                key = (sample, tuple(labels.items()))
                seen = acc.get(key)
                if seen is None:
                    acc[key] = (sample, labels, value)
                elif mode == "sum":
                    acc[key] = (sample, seen[1], seen[2] + value)
                elif mode == "max":
                    acc[key] = (sample, seen[1], max(seen[2], value))
    out: list[Metric] = []
    for name, (typ, doc) in kinds.items():
        metric = Metric(name, doc, typ)
        for sample, labels, value in values[name].values():
            metric.add_sample(sample, labels, value)
        out.append(metric)
    return out


def workers_gauge(answered: int, expected: int) -> Metric:
    """``tokenplane_scrape_workers``: how many workers' series a scrape holds."""
    fam = GaugeMetricFamily("tokenplane_scrape_workers", "Workers whose series this scrape "
                            "sums (state answered) of the gateway's (state expected); a "
                            "worker that is restarting or slow is missing from it.",
                            labels=["state"])
    fam.add_metric(["answered"], answered)
    fam.add_metric(["expected"], expected)
    return fam


class Fixed:
    """A collector that yields metrics already made (to render them)."""

    def __init__(self, metrics: Iterable[Metric]) -> None:
        self.metrics = list(metrics)

    def collect(self) -> Iterator[Metric]:
        return iter(self.metrics)

    def describe(self) -> Iterator[Metric]:
        return iter(())
