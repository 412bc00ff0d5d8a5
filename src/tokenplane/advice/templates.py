"""Template waste: two prompt templates (system prompt fingerprints) of one app and
alias whose average prompts differ widely; the app's task is taken to be the same."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from tokenplane.advice.model import Aggregate, Finding, Rates, Thresholds, Window, micros
from tokenplane.advice.rows import alias_key, evidence_query, group, per_request_input


def template_waste(rows: Iterable[Aggregate], rates: Callable[[str], Rates],
                   window: Window, th: Thresholds) -> list[Finding]:
    by_template = group((r for r in rows if r.template),
                        lambda r: (*alias_key(r), r.template))
    by_alias: dict[tuple[str, str, str], list[Aggregate]] = {}
    for (tenant, app, model, _), row in by_template.items():
        if row.requests >= th.min_requests:
            by_alias.setdefault((tenant, app, model), []).append(row)
    out: list[Finding] = []
    for templates in by_alias.values():
        if len(templates) < 2:
            continue
        lean = min(templates, key=lambda r: (per_request_input(r), r.template))
        base = per_request_input(lean)
        for row in templates:
            avg = per_request_input(row)
            if row is lean or base <= 0 or avg < th.template_ratio * base:
                continue
            ratio = avg / base
            tokens = int(window.per_month((avg - base) * row.requests))
            if tokens < th.min_tokens_per_month:
                continue
            out.append(Finding(
                kind="template_waste", tenant=row.tenant, app=row.app, model=row.model,
                title=(f"template {row.template[:12]} averages {ratio:.1f}x the input tokens "
                       f"of template {lean.template[:12]}"),
                evidence={
                    "query": evidence_query("advice_rollups", row, "template"),
                    "figures": {
                        "template": row.template, "requests": row.requests,
                        "avg_input_tokens": round(avg, 1),
                        "avg_system_tokens": round(row.input_system / row.requests, 1),
                        "lean_template": lean.template, "lean_requests": lean.requests,
                        "lean_avg_input_tokens": round(base, 1), "ratio": round(ratio, 2),
                    }},
                tokens_per_month=tokens,
                cost_micros_per_month=micros(tokens, rates(row.model).input),
                currency=row.currency,
                action=(f"Compare the two prompt templates of app '{row.app}': move its "
                        f"traffic to template {lean.template[:12]} or trim template "
                        f"{row.template[:12]} (system prompt, examples, tool schemas) "
                        "toward its size."),
            ))
    return out
