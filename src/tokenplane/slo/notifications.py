"""The bodies of SLO alert notifications (pure: a transition in, JSON-ready dicts out).

``alertmanager_body``: the JSON Alertmanager posts to its webhook receivers (version
4), so whatever consumes those (incident tools, bridges to chat) takes ours as is;
one notification per transition, its one alert fingerprinted by its labels.
``text_body``: ``{"text": ...}`` with the alert's fields beside it, which the incoming
webhooks of chat tools accept."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from tokenplane.slo.alerts import Transition
from tokenplane.slo.canary_guards import GuardDecision
from tokenplane.slo.evaluator import span_name
from tokenplane.slo.rules import ALERT

ZERO_TIME = "0001-01-01T00:00:00Z"
ROLLBACK_ALERT = "TokenplaneCanaryRolledBack"


def _rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def alert_labels(t: Transition) -> dict[str, str]:
    k = t.firing.key
    return {"alertname": ALERT, "severity": k.severity, "slo": k.slo, "sli": k.sli,
            "long_window": span_name(k.long_s), "short_window": span_name(k.short_s)}


def summary(t: Transition) -> str:
    f = t.firing
    k = f.key
    return (f"SLO {k.slo} ({k.sli}) burns its error budget at {f.long_burn:.1f}x over "
            f"{span_name(k.long_s)} and {f.short_burn:.1f}x over {span_name(k.short_s)} "
            f"(threshold {f.threshold:g}x)")


def fingerprint(labels: dict[str, str]) -> str:
    text = "\x00".join(f"{k}\x00{v}" for k, v in sorted(labels.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def alertmanager_body(t: Transition, external_url: str = "") -> dict[str, Any]:
    labels = alert_labels(t)
    annotations = {"summary": summary(t)}
    group = {"alertname": ALERT, "slo": t.firing.key.slo}
    return {
        "version": "4",
        "groupKey": "{}:{" + ", ".join(f'{k}="{v}"' for k, v in group.items()) + "}",
        "truncatedAlerts": 0,
        "status": t.state,
        "receiver": "tokenplane",
        "groupLabels": group,
        "commonLabels": labels,
        "commonAnnotations": annotations,
        "externalURL": external_url,
        "alerts": [{
            "status": t.state,
            "labels": labels,
            "annotations": annotations,
            "startsAt": _rfc3339(t.since),
            "endsAt": _rfc3339(t.at) if t.state == "resolved" else ZERO_TIME,
            "generatorURL": external_url,
            "fingerprint": fingerprint(labels),
        }],
    }


def text_body(t: Transition) -> dict[str, Any]:
    k = t.firing.key
    head = "FIRING" if t.state == "firing" else "RESOLVED"
    return {
        "text": f"[{head}] [{k.severity}] {summary(t)}",
        "status": t.state,
        "severity": k.severity,
        "slo": k.slo,
        "sli": k.sli,
        "long_window": span_name(k.long_s),
        "short_window": span_name(k.short_s),
        "long_burn": t.firing.long_burn,
        "short_burn": t.firing.short_burn,
        "threshold": t.firing.threshold,
        "since": t.since,
        "at": t.at,
    }


def rollback_summary(d: GuardDecision) -> str:
    s = d.spec
    return (f"Canary {s.canary} of {s.alias} rolled back to {s.stable} "
            f"(SLO {s.slo}, {d.verdict.sli}): {d.verdict.reason}")


def rollback_alertmanager_body(d: GuardDecision, external_url: str = "") -> dict[str, Any]:
    s = d.spec
    labels = {"alertname": ROLLBACK_ALERT, "severity": "page", "alias": s.alias,
              "slo": s.slo, "canary": s.canary, "stable": s.stable}
    annotations = {"summary": rollback_summary(d)}
    group = {"alertname": ROLLBACK_ALERT, "alias": s.alias}
    return {
        "version": "4",
        "groupKey": "{}:{" + ", ".join(f'{k}="{v}"' for k, v in group.items()) + "}",
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "tokenplane",
        "groupLabels": group,
        "commonLabels": labels,
        "commonAnnotations": annotations,
        "externalURL": external_url,
        "alerts": [{"status": "firing", "labels": labels, "annotations": annotations,
                    "startsAt": _rfc3339(d.at), "endsAt": ZERO_TIME,
                    "generatorURL": external_url, "fingerprint": fingerprint(labels)}],
        "evidence": d.verdict.evidence(),
    }


def rollback_text_body(d: GuardDecision) -> dict[str, Any]:
    return {"text": f"[ROLLED BACK] {rollback_summary(d)}", "status": "rolled_back",
            **d.as_dict()}
