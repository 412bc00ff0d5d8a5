"""Prometheus recording and alerting rules equivalent to the gateway's own SLO alerts,
for operators who alert with Prometheus and Alertmanager (``tokenplane slo rules``).

One recording rule per alert window turns the gateway's
``tokenplane_slo_events_total{slo, sli, verdict}`` counters into an error ratio,
``tokenplane_slo:error_ratio:rate<window>`` (summed over every worker and replica a
Prometheus scrapes); one alerting rule per SLO, SLI and burn rule fires while the
ratio is above ``burn_rate * (1 - objective)`` over both of the rule's windows, as
the gateway's evaluator decides."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tokenplane.slo.evaluator import span_name
from tokenplane.slo.spec import Slo

EVENTS = "tokenplane_slo_events_total"
ALERT = "TokenplaneSLOBurnRate"


def ratio_name(window_s: float) -> str:
    return f"tokenplane_slo:error_ratio:rate{span_name(window_s)}"


def _ratio_rule(window_s: float) -> dict[str, Any]:
    w = span_name(window_s)
    return {
        "record": ratio_name(window_s),
        "expr": (f'sum by (slo, sli) (rate({EVENTS}{{verdict="bad"}}[{w}])) '
                 f"/ sum by (slo, sli) (rate({EVENTS}[{w}]))"),
    }


def _number(x: float) -> str:
    return f"{x:.12g}"


def rule_groups(slos: Sequence[Slo]) -> dict[str, Any]:
    """The rule file, as a dict ready for YAML."""
    windows = sorted({w for slo in slos for r in slo.rules for w in (r.long_s, r.short_s)})
    alerts: list[dict[str, Any]] = []
    for slo in slos:
        for sli in slo.slis:
            sel = f'slo="{slo.name}", sli="{sli.label}"'
            for rule in slo.rules:
                limit = _number(rule.burn_rate * slo.error_budget)
                long_w, short_w = span_name(rule.long_s), span_name(rule.short_s)
                alerts.append({
                    "alert": ALERT,
                    "expr": (f"{ratio_name(rule.long_s)}{{{sel}}} > {limit} and "
                             f"{ratio_name(rule.short_s)}{{{sel}}} > {limit}"),
                    "labels": {"severity": rule.severity, "slo": slo.name,
                               "sli": sli.label, "long_window": long_w,
                               "short_window": short_w},
                    "annotations": {
                        "summary": f"SLO {slo.name} ({sli.label}) burns its error budget "
                                   f"faster than {_number(rule.burn_rate)}x",
                        "description": f"Objective {_number(slo.objective)} over "
                                       f"{span_name(slo.window_s)}: the error ratio is above "
                                       f"{limit} over {long_w} and {short_w}.",
                    },
                })
    groups: list[dict[str, Any]] = []
    if windows:
        groups.append({"name": "tokenplane-slo-ratios",
                       "rules": [_ratio_rule(w) for w in windows]})
    if alerts:
        groups.append({"name": "tokenplane-slo-alerts", "rules": alerts})
    return {"groups": groups}
