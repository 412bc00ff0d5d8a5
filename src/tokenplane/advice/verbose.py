"""Verbose outputs: apps whose answers often stop at ``max_tokens``
(``finish_reason: "length"``) or run far longer than other apps' on the same alias,
with a suggested ``max_tokens`` cap per app."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from tokenplane.advice.model import Aggregate, Finding, Rates, Thresholds, Window, micros
from tokenplane.advice.rows import alias_key, evidence_query, group, per_answer, spread


def _cap(mean: float, sd: float) -> int:
    """Mean plus two standard deviations, rounded up to 64 tokens."""
    return max(64, math.ceil((mean + 2 * sd) / 64) * 64)


def verbose_outputs(rows: Iterable[Aggregate], rates: Callable[[str], Rates],
                    window: Window, th: Thresholds) -> list[Finding]:
    apps = {k: r for k, r in group(rows, alias_key).items() if r.answers >= th.min_requests}
    fleet: dict[tuple[str, str], list[int]] = {}  # per (tenant, alias): apps, answers, output
    for (tenant, _, model), r in apps.items():
        acc = fleet.setdefault((tenant, model), [0, 0, 0])
        acc[0] += 1
        acc[1] += r.answers
        acc[2] += r.answer_output_tokens
    out: list[Finding] = []
    for key, row in apps.items():
        mean, sd = per_answer(row), spread(row)
        n_apps, all_answers, all_output = fleet[(key[0], key[2])]
        peers = n_apps - 1
        peer_answers = all_answers - row.answers
        peer_mean = ((all_output - row.answer_output_tokens) / peer_answers
                     if peer_answers else 0.0)
        share = row.length_finishes / row.answers
        figures: dict[str, object] = {
            "answers": row.answers, "avg_output_tokens": round(mean, 1),
            "sd_output_tokens": round(sd, 1), "length_finishes": row.length_finishes,
            "length_share": round(share, 4)}
        rate = rates(row.model).output
        if share >= th.length_share:
            tokens = int(window.per_month(row.length_output_tokens))
            cap = _cap(mean, sd)
            out.append(Finding(
                kind="verbose_outputs", tenant=row.tenant, app=row.app, model=row.model,
                title=(f"{share:.0%} of the answers of app '{row.app}' on '{row.model}' "
                       "stop at max_tokens (finish_reason length)"),
                evidence={"query": evidence_query("advice_rollups", row, "tenant, app, model"),
                          "figures": figures},
                tokens_per_month=tokens, cost_micros_per_month=micros(tokens, rate),
                currency=row.currency,
                action=(f"Answers cut off at the cap are paid for and often retried or "
                        f"discarded: ask for a shorter answer in the prompt (a length "
                        f"instruction or a format) and set max_tokens to {cap} for app "
                        f"'{row.app}'."),
                details={"suggested_max_tokens": cap, "reason": "length"},
            ))
        elif peer_mean > 0 and mean >= th.peer_ratio * peer_mean:
            tokens = int(window.per_month((mean - peer_mean) * row.answers))
            if tokens < th.min_tokens_per_month:
                continue
            cap = _cap(peer_mean * th.peer_ratio, 0.0)
            figures.update(peer_apps=peers, peer_avg_output_tokens=round(peer_mean, 1),
                           ratio=round(mean / peer_mean, 2))
            out.append(Finding(
                kind="verbose_outputs", tenant=row.tenant, app=row.app, model=row.model,
                title=(f"app '{row.app}' writes {mean / peer_mean:.1f}x the output per answer "
                       f"of the other apps on '{row.model}'"),
                evidence={"query": evidence_query("advice_rollups", row, "app",
                                                  with_app=False),
                          "figures": figures},
                tokens_per_month=tokens, cost_micros_per_month=micros(tokens, rate),
                currency=row.currency,
                action=(f"Ask app '{row.app}' for concise answers and cap max_tokens at "
                        f"{cap}; the saving assumes its answers come down to its peers' "
                        "length (an upper bound)."),
                details={"suggested_max_tokens": cap, "reason": "peers"},
            ))
    return out
