"""Prometheus series of the SLOs (collected at scrape time, nothing on the request path).

From the live counters of this process:
- ``tokenplane_slo_events_total{slo, sli, verdict="good|bad"}``: valid events judged
  since start (rate them: ``tokenplane slo rules`` does).
From the ledger-fed evaluation (the whole gateway, every worker alike):
- ``tokenplane_slo_objective_ratio{slo, sli}``;
- ``tokenplane_slo_sli_ratio{slo, sli}``: good / valid over the SLO's window;
- ``tokenplane_slo_error_budget_remaining_ratio{slo, sli}`` and
  ``tokenplane_slo_error_budget_remaining_events{slo, sli}`` (bad events left);
- ``tokenplane_slo_burn_rate{slo, sli, window}`` for each alert window;
- ``tokenplane_slo_alert_firing{slo, sli, severity, long_window, short_window}``: 1;
- ``tokenplane_canary_rolled_back{alias, canary, stable}``: 1 once a guard tripped.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from tokenplane.slo.gateway.service import SloService
from tokenplane.slo.live import SloCounters

_SLI = ["slo", "sli"]


class SloCollector:
    def __init__(self, counters: SloCounters, service: SloService) -> None:
        self.counters = counters
        self.service = service

    def collect(self) -> Iterator[Metric]:
        events = CounterMetricFamily(
            "tokenplane_slo_events", "Valid SLI events judged by this process, by verdict.",
            labels=[*_SLI, "verdict"])
        for (slo, sli, verdict), n in self.counters.counts.items():
            events.add_metric([slo, sli, verdict], n)
        yield events
        rows = self.service.status()
        objective = GaugeMetricFamily("tokenplane_slo_objective_ratio",
                                      "The SLO's objective.", labels=_SLI)
        ratio = GaugeMetricFamily("tokenplane_slo_sli_ratio",
                                  "Good / valid events over the SLO's window.", labels=_SLI)
        left = GaugeMetricFamily(
            "tokenplane_slo_error_budget_remaining_ratio",
            "Share of the window's error budget left (negative once overspent).",
            labels=_SLI)
        left_n = GaugeMetricFamily(
            "tokenplane_slo_error_budget_remaining_events",
            "Bad events the window's error budget still allows.", labels=_SLI)
        burn = GaugeMetricFamily("tokenplane_slo_burn_rate",
                                 "Error-budget burn rate over an alert window.",
                                 labels=[*_SLI, "window"])
        firing = GaugeMetricFamily(
            "tokenplane_slo_alert_firing", "1 while a burn-rate alert fires.",
            labels=[*_SLI, "severity", "long_window", "short_window"])
        for row in rows:
            d = row.as_dict()
            key = [row.slo, row.sli]
            objective.add_metric(key, row.objective)
            ratio.add_metric(key, row.budget.sli)
            left.add_metric(key, row.budget.remaining)
            left_n.add_metric(key, row.budget.bad_left)
            rates = d["burn_rates"]
            assert isinstance(rates, dict)
            for window, rate in rates.items():
                burn.add_metric([*key, window], rate)
            alerts = d["alerts"]
            assert isinstance(alerts, list)
            for a in alerts:
                firing.add_metric([*key, a["severity"], a["long_window"], a["short_window"]], 1)
        yield from (objective, ratio, left, left_n, burn, firing)
        guards = self.service.guards
        if guards is not None:
            rolled = GaugeMetricFamily(
                "tokenplane_canary_rolled_back",
                "1 once a canary guard moved its split back to the stable version.",
                labels=["alias", "canary", "stable"])
            for spec, _ in guards.guards:
                rolled.add_metric([spec.alias, spec.canary, spec.stable],
                                  1 if spec.alias in guards.tripped else 0)
            yield rolled

    def describe(self) -> Iterator[Metric]:
        return iter(())
