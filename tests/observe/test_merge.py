"""Summing the workers' series: counters and histograms add up, gauges by what they
measure, ``_created`` left out; a replacement worker carries its predecessor's counts."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tokenplane.observe.merge import (
    Fixed,
    add_counts,
    counts_only,
    decode,
    encode,
    merge,
    snapshot,
)
from tokenplane.observe.metrics import GatewayMetrics


def _worker(requests: int, queue: int, degraded: int, healthy: int) -> GatewayMetrics:
    m = GatewayMetrics()
    m.requests.labels("chat", "chat", "ok", "200", "ok", "acme").inc(requests)
    for latency in (0.003, 0.2) * requests:
        m.e2e.labels("chat", "chat").observe(latency)
    m.unauthenticated.inc(requests)  # a prometheus_client Counter, with _created
    m.sched_queue.labels("interactive").set(queue)
    m.admission_store_degraded.set(degraded)
    m.budget_used_pct.labels("acme", "tenant", "cost").set(healthy * 50)
    return m


def _render(parts: list[tuple[str, GatewayMetrics]]) -> dict[str, list[tuple[dict[str, str],
                                                                          float]]]:
    families = merge([(w, decode(encode(snapshot(m.registry)))) for w, m in parts])
    reg = CollectorRegistry(auto_describe=False)
    reg.register(Fixed(families))
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(generate_latest(reg).decode()):
        for s in fam.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def test_counters_histograms_summed_gauges_by_kind() -> None:
    out = _render([("w0", _worker(3, 2, 0, 1)), ("w1", _worker(5, 4, 1, 2))])
    assert [v for _, v in out["tokenplane_requests_total"]] == [8]
    assert [v for _, v in out["tokenplane_unauthenticated_requests_total"]] == [8]
    assert [v for _, v in out["tokenplane_request_duration_seconds_count"]] == [16]
    buckets = {lab["le"]: v for lab, v in out["tokenplane_request_duration_seconds_bucket"]}
    assert buckets["0.005"] == 8 and buckets["+Inf"] == 16
    assert [v for _, v in out["tokenplane_scheduler_queue_length"]] == [6]  # summed
    assert [v for _, v in out["tokenplane_admission_store_degraded"]] == [1]  # max
    assert [v for _, v in out["tokenplane_budget_used_threshold_pct"]] == [100]  # max
    assert not any(name.endswith("_created") for name in out)


def test_per_worker_gauges_keep_a_worker_label() -> None:
    a, b = _worker(1, 0, 0, 0), _worker(1, 0, 0, 0)
    for m, err in ((a, 0.1), (b, 0.3)):
        m.track_errors("tokenplane_estimator_error_ratio", "doc", ["model"],
                       lambda e=err: [(("chat",), e, 10)])
    out = _render([("w0", a), ("w1", b)])
    assert sorted((lab["worker"], v) for lab, v in out["tokenplane_estimator_error_ratio"]) == [
        ("w0", 0.1), ("w1", 0.3)]


def test_a_replacement_adds_its_predecessors_counts() -> None:
    dead = snapshot(_worker(7, 9, 1, 1).registry)
    carried = counts_only(dead)
    assert {name for name, *_ in carried} >= {"tokenplane_requests",
                                              "tokenplane_request_duration_seconds"}
    assert not any(typ == "gauge" for _, typ, _, _ in carried)
    fresh = snapshot(_worker(2, 1, 0, 0).registry)
    total = {s[0]: s[2] for name, _, _, samples in add_counts(fresh, carried) for s in samples
             if name in ("tokenplane_requests", "tokenplane_scheduler_queue_length")}
    assert total == {"tokenplane_requests_total": 9, "tokenplane_scheduler_queue_length": 1}
