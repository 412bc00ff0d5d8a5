"""Prometheus view of the replicas, read at scrape time from the live view."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from tokenplane.routing.endpoint import BREAKER_CLOSED, BREAKER_HALF_OPEN, BREAKER_OPEN
from tokenplane.routing.gateway.replicas import LiveView

_STATE_VALUE = {BREAKER_CLOSED: 0.0, BREAKER_HALF_OPEN: 1.0, BREAKER_OPEN: 2.0}


class EndpointCollector:
    """``tokenplane_endpoint_*`` gauges per replica (model alias, endpoint id): healthy
    (last health check), breaker state (0 closed, 1 half-open, 2 open), requests in
    flight from this gateway, engine-reported running / waiting requests and KV-cache
    use (when known); its membership (``state``: 1 for the one it is in: ``joining``,
    waiting for its first healthy scrape; ``serving``; ``draining``)."""

    def __init__(self, live: LiveView, clock: Callable[[], float] = time.monotonic) -> None:
        self.live = live
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        labels = ["model", "endpoint"]
        fams = {
            "healthy": GaugeMetricFamily("tokenplane_endpoint_healthy",
                                         "1 when the replica passed its last health check.",
                                         labels=labels),
            "breaker": GaugeMetricFamily("tokenplane_endpoint_breaker_state",
                                         "Circuit breaker: 0 closed, 1 half-open, 2 open.",
                                         labels=labels),
            "in_flight": GaugeMetricFamily("tokenplane_endpoint_in_flight",
                                           "Requests in flight from this gateway.",
                                           labels=labels),
            "running": GaugeMetricFamily("tokenplane_endpoint_engine_running",
                                         "Requests the engine reports running.", labels=labels),
            "waiting": GaugeMetricFamily("tokenplane_endpoint_engine_waiting",
                                         "Requests the engine reports waiting.", labels=labels),
            "kv": GaugeMetricFamily("tokenplane_endpoint_engine_kv_usage",
                                    "KV-cache use the engine reports (0..1).", labels=labels),
            "member": GaugeMetricFamily(
                "tokenplane_endpoint_membership",
                "1 for the replica's place in its pool: joining (until its first "
                "healthy scrape), serving, or draining (no new requests).",
                labels=[*labels, "state"]),
        }
        now = self.clock()
        for le in list(self.live.joining.values()):
            fams["member"].add_metric([le.alias, le.id, "joining"], 1.0)
        for le in list(self.live.by_id.values()):
            lv = [le.alias, le.id]
            fams["member"].add_metric(
                [*lv, "draining" if le.endpoint.draining else "serving"], 1.0)
            fams["healthy"].add_metric(lv, 1.0 if le.healthy else 0.0)
            fams["breaker"].add_metric(lv, _STATE_VALUE.get(le.breaker.state(now), 0.0))
            fams["in_flight"].add_metric(lv, float(le.endpoint.in_flight))
            if le.local_stats is not None or le.scraped is not None:
                s = le.snapshot(now)
                fams["running"].add_metric(lv, float(s.num_running))
                fams["waiting"].add_metric(lv, float(s.num_waiting))
                fams["kv"].add_metric(lv, s.kv_usage)
        yield from fams.values()

    def describe(self) -> Iterator[Metric]:
        return iter(())
