"""Right-sizing: traffic of an app that a cheaper alias already serves as well, judged
by error rate and by the scores recorded with ``POST /v1/feedback``.

Both aliases must serve the app (so the comparison is on its own task), both must
have enough scores, the cheaper one may fail and score only a little worse, and the
app's traffic priced at the cheaper alias's rates must cost clearly less.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from tokenplane.advice.model import (
    Aggregate,
    FeedbackAggregate,
    Finding,
    Rates,
    Thresholds,
    Window,
    micros,
)
from tokenplane.advice.rows import alias_key, evidence_query, group

MIN_PRICE_GAP = 0.1  # the cheaper alias must cost at least 10% less for the same tokens


def cost_at(row: Aggregate, r: Rates) -> int:
    """What ``row``'s tokens would cost at rates ``r`` (micro-units)."""
    cached, written = row.cached_input_tokens, row.cache_write_tokens
    uncached = max(0, row.input_tokens - cached - written)
    return (micros(uncached, r.input) + micros(cached, r.cached_input)
            + micros(written, r.cache_write) + micros(row.output_tokens, r.output))


def _error_rate(row: Aggregate) -> float:
    return row.errors / row.requests if row.requests else 0.0


def right_sizing(rows: Iterable[Aggregate], feedback: Iterable[FeedbackAggregate],
                 rates: Callable[[str], Rates], window: Window,
                 th: Thresholds) -> list[Finding]:
    scores = {(f.tenant, f.app, f.model): f for f in feedback}
    by_app: dict[tuple[str, str], list[Aggregate]] = {}
    for (tenant, app, _), row in group(rows, alias_key).items():
        fb = scores.get(alias_key(row))
        if row.requests >= th.min_requests and fb is not None and fb.count >= th.min_feedback:
            by_app.setdefault((tenant, app), []).append(row)
    out: list[Finding] = []
    for aliases in by_app.values():
        for big in aliases:
            own = cost_at(big, rates(big.model))
            if own <= 0:
                continue
            best: tuple[int, Aggregate] | None = None
            for small in aliases:
                if small is big:
                    continue
                there = cost_at(big, rates(small.model))
                if there > own * (1 - MIN_PRICE_GAP):
                    continue
                if _error_rate(small) > _error_rate(big) + th.max_error_gap:
                    continue
                if (scores[alias_key(small)].mean
                        < scores[alias_key(big)].mean - th.max_score_gap):
                    continue
                if best is None or there < best[0]:
                    best = (there, small)
            if best is None:
                continue
            there, small = best
            money = int(window.per_month(own - there))
            fb_big, fb_small = scores[alias_key(big)], scores[alias_key(small)]
            out.append(Finding(
                kind="right_sizing", tenant=big.tenant, app=big.app, model=big.model,
                title=(f"app '{big.app}' gets answers as good from '{small.model}' as from "
                       f"'{big.model}' at {there / own:.0%} of the price"),
                evidence={
                    "query": evidence_query("advice_rollups", big, "model", with_model=False)
                    + "; SELECT count(*), avg(score) FROM feedback WHERE tenant = "
                    f"'{big.tenant}' AND app = '{big.app}' GROUP BY model",
                    "figures": {
                        "model": big.model, "requests": big.requests,
                        "error_rate": round(_error_rate(big), 4),
                        "feedback": fb_big.count, "mean_score": round(fb_big.mean, 3),
                        "cheaper_model": small.model, "cheaper_requests": small.requests,
                        "cheaper_error_rate": round(_error_rate(small), 4),
                        "cheaper_feedback": fb_small.count,
                        "cheaper_mean_score": round(fb_small.mean, 3),
                        "cost_micros": own, "cost_micros_at_cheaper": there,
                    }},
                tokens_per_month=0, cost_micros_per_month=money, currency=big.currency,
                action=(f"Route app '{big.app}' from '{big.model}' to '{small.model}' (or "
                        "start with a split and watch errors and feedback); tokens stay the "
                        "same, the price falls."),
                details={"tokens_moved_per_month":
                         int(window.per_month(big.input_tokens + big.output_tokens))},
            ))
    return out
