"""Prometheus series of the autoscaler (collected at scrape time from the controller):

- ``tokenplane_autoscale_desired_replicas{pool}``: serving replicas the last decision
  wants (the acting process only);
- ``tokenplane_autoscale_desired_warm_replicas{pool}``: warm replicas it wants;
- ``tokenplane_autoscale_actual_replicas{pool}``: replicas serving now;
- ``tokenplane_autoscale_starting_replicas{pool}``: replicas in their cold start;
- ``tokenplane_autoscale_warm_replicas{pool}``: replicas loaded and not routed;
- ``tokenplane_autoscale_decisions_total{pool, direction, reason}``: decisions that
  changed the pool, by direction (up, down, none: the warm pool only) and deciding
  reason.

With ``serve --workers N`` the series are summed over the workers: a shared actuator
(Kubernetes, KEDA) acts from one of them, so the sums are its figures; embedded
replicas are each worker's own, so the sums are the gateway's totals.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from tokenplane.autoscale.gateway.controller import AutoscaleController


class AutoscaleCollector:
    def __init__(self, controller: AutoscaleController) -> None:
        self.controller = controller

    def collect(self) -> Iterator[Metric]:
        lab = ["pool"]
        desired = GaugeMetricFamily("tokenplane_autoscale_desired_replicas",
                                    "Serving replicas the last decision wants.", labels=lab)
        desired_warm = GaugeMetricFamily("tokenplane_autoscale_desired_warm_replicas",
                                         "Warm replicas the last decision wants.", labels=lab)
        actual = GaugeMetricFamily("tokenplane_autoscale_actual_replicas",
                                   "Replicas serving now.", labels=lab)
        starting = GaugeMetricFamily("tokenplane_autoscale_starting_replicas",
                                     "Replicas in their cold start.", labels=lab)
        warm = GaugeMetricFamily("tokenplane_autoscale_warm_replicas",
                                 "Replicas loaded and not taking traffic.", labels=lab)
        decisions = CounterMetricFamily(
            "tokenplane_autoscale_decisions", "Decisions that changed the pool, by "
            "direction and deciding reason.", labels=["pool", "direction", "reason"])
        for pc in self.controller.pools.values():
            d = pc.decision
            phases = pc.phases()
            if phases:
                actual.add_metric([pc.alias], phases["serving"])
                starting.add_metric([pc.alias], phases["starting"])
                warm.add_metric([pc.alias], phases["warm"])
            if d is not None and self.controller.leading:
                desired.add_metric([pc.alias], d.serving_to)
                desired_warm.add_metric([pc.alias], d.warm_to)
            for key, n in pc.decisions.items():
                direction, reason = key.split("/", 1)
                decisions.add_metric([pc.alias, direction, reason], n)
        yield from (desired, desired_warm, actual, starting, warm, decisions)

    def describe(self) -> Iterator[Metric]:
        return iter(())
