"""Version efficiency: one model version spending clearly more output per answer
than another version of the same alias on the same app (A/B or canary splits)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from tokenplane.advice.model import Aggregate, Finding, Rates, Thresholds, Window, micros
from tokenplane.advice.rows import alias_key, evidence_query, group, per_answer


def version_efficiency(rows: Iterable[Aggregate], rates: Callable[[str], Rates],
                       window: Window, th: Thresholds) -> list[Finding]:
    versions = group((r for r in rows if r.version), lambda r: (*alias_key(r), r.version))
    by_alias: dict[tuple[str, str, str], list[Aggregate]] = {}
    for (tenant, app, model, _), row in versions.items():
        if row.answers >= th.min_requests:
            by_alias.setdefault((tenant, app, model), []).append(row)
    out: list[Finding] = []
    for rows_ in by_alias.values():
        if len(rows_) < 2:
            continue
        best = min(rows_, key=lambda r: (per_answer(r), r.version))
        base = per_answer(best)
        for row in rows_:
            mean = per_answer(row)
            if row is best or base <= 0 or mean < th.version_ratio * base:
                continue
            tokens = int(window.per_month((mean - base) * row.answers))
            if tokens < th.min_tokens_per_month:
                continue
            extra = mean / base - 1
            out.append(Finding(
                kind="version_efficiency", tenant=row.tenant, app=row.app, model=row.model,
                title=(f"version {row.version} of '{row.model}' spends {extra:.0%} more output "
                       f"tokens per answer than version {best.version} on app '{row.app}'"),
                evidence={
                    "query": evidence_query("advice_rollups", row, "version"),
                    "figures": {
                        "version": row.version, "answers": row.answers,
                        "avg_output_tokens": round(mean, 1),
                        "error_rate": round(row.errors / row.requests, 4) if row.requests else 0,
                        "other_version": best.version, "other_answers": best.answers,
                        "other_avg_output_tokens": round(base, 1),
                        "other_error_rate": (round(best.errors / best.requests, 4)
                                             if best.requests else 0),
                    }},
                tokens_per_month=tokens,
                cost_micros_per_month=micros(tokens, rates(row.model).output),
                currency=row.currency,
                action=(f"Check the answers of version {row.version} against {best.version} "
                        f"for app '{row.app}'; if they are as good, shift the split "
                        f"(routing.splits.{row.model}) toward {best.version}."),
            ))
    return out
