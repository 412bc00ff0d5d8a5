"""Writes deploy/grafana/tokenplane.json, the Grafana dashboard over tokenplane's
Prometheus series (run it after changing the panels here; a test checks the file is
what this script writes, that every series it queries exists in a live gateway's
/metrics, and that every expression parses with promtool).

    python deploy/grafana/build_dashboard.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RATE = "$__rate_interval"
SEL = 'tenant=~"$tenant", model=~"$model"'

# (row title, [(panel title, unit, kind, [(expr, legend)])])
ROWS: list[tuple[str, list[tuple[str, str, str, list[tuple[str, str]]]]]] = [
    ("Tokens and cost", [
        ("Tokens per second by source", "short", "timeseries", [
            (f"sum by (kind) (rate(tokenplane_tokens_total{{{SEL}}}[{RATE}]))", "{{kind}}")]),
        ("Tokens per second by tenant", "short", "timeseries", [
            (f"sum by (tenant) (rate(tokenplane_tokens_total{{{SEL}}}[{RATE}]))",
             "{{tenant}}")]),
        ("Cost per hour by tenant", "currencyUSD", "timeseries", [
            (f"sum by (tenant) (rate(tokenplane_cost_micros_total{{{SEL}}}[{RATE}])) "
             "* 3600 / 1e6", "{{tenant}}")]),
        ("Cost today by model", "currencyUSD", "bargauge", [
            (f"sum by (model) (increase(tokenplane_cost_micros_total{{{SEL}}}[1d])) / 1e6",
             "{{model}}")]),
    ]),
    ("Requests and latency", [
        ("Requests per second by outcome", "reqps", "timeseries", [
            (f"sum by (outcome) (rate(tokenplane_requests_total{{{SEL}}}[{RATE}]))",
             "{{outcome}}")]),
        ("Requests per second by status", "reqps", "timeseries", [
            (f"sum by (code) (rate(tokenplane_requests_total{{{SEL}}}[{RATE}]))",
             "{{code}}")]),
        ("Refused by a limit or budget, by tenant", "reqps", "timeseries", [
            (f'sum by (tenant) (rate(tokenplane_requests_total{{{SEL}, outcome="limited"}}'
             f"[{RATE}]))", "{{tenant}}")]),
        ("Request duration by model", "s", "timeseries", [
            (f"histogram_quantile({q}, sum by (le, model) (rate("
             f'tokenplane_request_duration_seconds_bucket{{model=~"$model"}}[{RATE}])))',
             f"p{int(q * 100)} {{{{model}}}}") for q in (0.5, 0.95, 0.99)]),
        ("Waiting at the gateway by SLO class (p95)", "s", "timeseries", [
            ("histogram_quantile(0.95, sum by (le, slo_class) (rate("
             f"tokenplane_scheduler_wait_seconds_bucket[{RATE}])))", "{{slo_class}}")]),
    ]),
    ("SLOs", [
        ("SLI", "percentunit", "timeseries", [
            ("tokenplane_slo_sli_ratio", "{{slo}} {{sli}}"),
            ("tokenplane_slo_objective_ratio", "objective {{slo}} {{sli}}")]),
        ("Error budget remaining", "percentunit", "bargauge", [
            ("tokenplane_slo_error_budget_remaining_ratio", "{{slo}} {{sli}}")]),
        ("Burn rate (1 h and 5 min)", "short", "timeseries", [
            ('tokenplane_slo_burn_rate{window=~"1h|5m"}', "{{slo}} {{sli}} {{window}}")]),
    ]),
    ("Routing and engines", [
        ("In flight per replica", "short", "timeseries", [
            ('tokenplane_endpoint_in_flight{model=~"$model"}', "{{endpoint}}")]),
        ("Engine KV cache use", "percentunit", "timeseries", [
            ('tokenplane_endpoint_engine_kv_usage{model=~"$model"}', "{{endpoint}}")]),
        ("Engine queue (waiting requests)", "short", "timeseries", [
            ('tokenplane_endpoint_engine_waiting{model=~"$model"}', "{{endpoint}}")]),
        ("Breakers open and replicas unhealthy", "short", "timeseries", [
            ('sum by (model) (tokenplane_endpoint_breaker_state{model=~"$model"} == 2)',
             "open {{model}}"),
            ('sum by (model) (1 - tokenplane_endpoint_healthy{model=~"$model"})',
             "unhealthy {{model}}")]),
    ]),
    ("Ledger", [
        ("Usage events not yet in the ledger", "short", "timeseries", [
            ("tokenplane_ledger_lag_events", "lag")]),
        ("Ledger sink errors", "short", "timeseries", [
            (f"rate(tokenplane_ledger_sink_errors_total[{RATE}])", "errors")]),
    ]),
]


def _panel(pid: int, title: str, unit: str, kind: str, targets: list[tuple[str, str]],
           x: int, y: int) -> dict[str, Any]:
    return {
        "id": pid, "type": kind, "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}}
        if kind == "timeseries" else {},
        "targets": [{"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend,
                     "datasource": {"type": "prometheus", "uid": "${datasource}"}}
                    for i, (expr, legend) in enumerate(targets)],
    }


def _variable(name: str, metric: str) -> dict[str, Any]:
    return {"name": name, "type": "query", "label": name,
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "query": {"query": f"label_values({metric}, {name})", "refId": name},
            "definition": f"label_values({metric}, {name})",
            "includeAll": True, "multi": True, "allValue": ".*", "refresh": 2,
            "current": {"text": "All", "value": "$__all"}}


def dashboard() -> dict[str, Any]:
    panels: list[dict[str, Any]] = []
    pid, y = 1, 0
    for row_title, row_panels in ROWS:
        panels.append({"id": pid, "type": "row", "title": row_title, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        pid, y = pid + 1, y + 1
        for i, (title, unit, kind, targets) in enumerate(row_panels):
            panels.append(_panel(pid, title, unit, kind, targets, 12 * (i % 2), y + 8 * (i // 2)))
            pid += 1
        y += 8 * ((len(row_panels) + 1) // 2)
    return {
        "uid": "tokenplane", "title": "tokenplane", "tags": ["tokenplane", "llm"],
        "schemaVersion": 39, "version": 1, "editable": True, "timezone": "utc",
        "time": {"from": "now-6h", "to": "now"}, "refresh": "30s",
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus",
             "label": "Prometheus", "current": {}},
            _variable("tenant", "tokenplane_tokens_total"),
            _variable("model", "tokenplane_tokens_total"),
        ]},
        "panels": panels,
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


if __name__ == "__main__":
    out = Path(__file__).with_name("tokenplane.json")
    out.write_text(render())
    print(f"wrote {out}")
