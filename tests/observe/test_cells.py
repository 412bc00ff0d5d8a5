"""The lock-free metric cells expose exactly what prometheus_client's own counters and
histograms expose for the same observations (minus the ``_created`` samples)."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from tokenplane.observe.cells import CounterCells, HistogramCells

BUCKETS = (0.0005, 0.005, 0.01, 0.25, 1, 2.5, 120)


def _exposition(reg: CollectorRegistry) -> list[str]:
    text = generate_latest(reg).decode()
    return [ln for ln in text.splitlines() if "_created" not in ln]


def test_counter_and_histogram_expose_like_prometheus_client() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    c1 = CounterCells("x_requests", "Requests.", ["model", "code"], ours)
    c2 = Counter("x_requests", "Requests.", ["model", "code"], registry=theirs)
    h1 = HistogramCells("x_latency_seconds", "Latency.", ["model"], BUCKETS, ours)
    h2 = Histogram("x_latency_seconds", "Latency.", ["model"], buckets=BUCKETS, registry=theirs)
    for model, code, n in (("a", "200", 3), ("b", "500", 1), ("a", "200", 2.5)):
        c1.labels(model, code).inc(n)
        c2.labels(model, code).inc(n)
    # on a bound, between bounds, below the first, above the last
    for model, v in (("a", 0.005), ("a", 0.007), ("a", 0.0), ("b", 500.0), ("b", 1.0),
                     ("a", 0.0005), ("a", 120.0)):
        h1.labels(model).observe(v)
        h2.labels(model).observe(v)
    assert _exposition(ours) == _exposition(theirs)


def test_series_appear_when_first_used_and_labels_are_checked() -> None:
    reg = CollectorRegistry()
    c = CounterCells("y", "Y.", ["model"], reg)
    assert "y_total{" not in generate_latest(reg).decode()
    c.labels("m").inc()
    assert 'y_total{model="m"} 1.0' in generate_latest(reg).decode()
    with pytest.raises(ValueError):
        c.labels("m", "extra")
    with pytest.raises(ValueError):
        c.labels("m").inc(-1)
    with pytest.raises(ValueError):
        HistogramCells("z", "Z.", [], (1, 0.5), reg)
