"""What the advisor looked at and what it still lacks (pure): so an answer of no
findings on a young ledger says what was checked, which groups are still too small
for a rule to judge them, and when, at their pace, they will have enough."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tokenplane.advice.model import Aggregate, FeedbackAggregate, Thresholds, Window
from tokenplane.advice.rows import alias_key, group
from tokenplane.timefmt import DAY, duration, utc_minute


def needs(th: Thresholds) -> str:
    """The rules' data needs, in words."""
    return (f"each rule compares groups (template, version, model, app) of at least "
            f"{th.min_requests:,} requests and reports a saving only from "
            f"{th.min_tokens_per_month:,} tokens a month; right-sizing also needs "
            f"{th.min_feedback:,} feedback scores per model")


def coverage(rows: Sequence[Aggregate], feedback: Iterable[FeedbackAggregate],
             window: Window, th: Thresholds, now: float) -> dict[str, Any]:
    """The groups (tenant, app, model) the window holds, those with enough requests for
    the rules, and for the busiest one short of it the day it should get there at its
    pace so far (None: no group is short, or none has any pace yet)."""
    groups = group(rows, alias_key)
    ready = [a for a in groups.values() if a.requests >= th.min_requests]
    short = sorted((a for a in groups.values() if a.requests < th.min_requests),
                   key=lambda a: (-a.requests, a.tenant, a.app, a.model))
    scores = sum(f.count for f in feedback)
    out: dict[str, Any] = {
        "requests": sum(a.requests for a in groups.values()),
        "groups": len(groups), "groups_with_enough": len(ready),
        "min_requests": th.min_requests, "min_tokens_per_month": th.min_tokens_per_month,
        "min_feedback": th.min_feedback, "feedback_scores": scores,
        "needs": needs(th), "short": None,
    }
    if short:
        busiest = short[0]
        days = max(1.0, (min(now, window.until) - window.since) / DAY)
        pace = busiest.requests / days  # requests a day so far
        entry: dict[str, Any] = {"tenant": busiest.tenant, "app": busiest.app,
                                 "model": busiest.model, "requests": busiest.requests,
                                 "enough_at": None, "enough_in": None}
        if pace > 0:
            wait = (th.min_requests - busiest.requests) / pace * DAY
            entry["enough_at"] = now + wait
            entry["enough_in"] = duration(wait)
        out["short"] = entry
    return out


def explain(cov: dict[str, Any]) -> list[str]:
    """The coverage as lines a person reads under the findings."""
    lines = [f"checked {cov['requests']:,} requests in {cov['groups']:,} groups "
             f"(tenant/app/model); {cov['groups_with_enough']:,} have enough data",
             f"needs: {cov['needs']}"]
    short = cov.get("short")
    if short is not None:
        who = f"{short['tenant']}/{short['app']} on {short['model']}"
        line = (f"lacking data: {cov['groups'] - cov['groups_with_enough']:,} groups have "
                f"fewer than {cov['min_requests']:,} requests; the busiest, {who}, has "
                f"{short['requests']:,}")
        if short["enough_at"] is not None:
            line += (f"; at its pace it has enough around {utc_minute(short['enough_at'])}"
                     f" (in {short['enough_in']})")
        lines.append(line)
    if cov["feedback_scores"] < cov["min_feedback"]:
        lines.append(f"right-sizing: {cov['feedback_scores']:,} feedback scores so far "
                     f"(POST /v1/feedback), {cov['min_feedback']:,} per model needed")
    return lines
