"""Application flows: RAG chunks offered against kept, history growth, and tool-output
bloat in agent sessions (docs/CONTEXT.md, docs/SESSIONS.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from tokenplane.advice.model import Aggregate, Finding, Rates, Thresholds, Window, micros
from tokenplane.advice.rows import alias_key, evidence_query, group


def context_kept(rows: Iterable[Aggregate], rates: Callable[[str], Rates],
                 window: Window, th: Thresholds) -> list[Finding]:
    """Apps whose retriever offers many more context tokens than the packer keeps
    (duplicates, the budget): the dropped tokens never reach the model, so the saving
    is the retrieval and transfer of chunks nobody reads, not upstream money."""
    out: list[Finding] = []
    for row in group(rows, alias_key).values():
        offered, kept = row.context_offered_tokens, row.context_kept_tokens
        if row.requests < th.min_requests or offered <= 0:
            continue
        share = kept / offered
        dropped = int(window.per_month(offered - kept))
        if share >= th.context_kept_share or dropped < th.min_tokens_per_month:
            continue
        out.append(Finding(
            kind="context_dropped", tenant=row.tenant, app=row.app, model=row.model,
            title=(f"app '{row.app}' keeps only {share:.0%} of the RAG context it offers "
                   f"on '{row.model}'"),
            evidence={"query": evidence_query("advice_rollups", row, "tenant, app, model"),
                      "figures": {"requests": row.requests, "context_offered_tokens": offered,
                                  "context_kept_tokens": kept, "kept_share": round(share, 4),
                                  "avg_offered_per_request": round(offered / row.requests, 1),
                                  "avg_kept_per_request": round(kept / row.requests, 1)}},
            tokens_per_month=dropped, cost_micros_per_month=0, currency=row.currency,
            action=(f"Retrieve fewer chunks for app '{row.app}' (a lower top-k near "
                    f"{max(1, round(kept / row.requests))} tokens' worth) and deduplicate "
                    "the index: what the gateway drops is retrieved and sent for nothing "
                    "(see `context_dropped` in the ledger for the reasons)."),
        ))
    return out


def history_growth(rows: Iterable[Aggregate], rates: Callable[[str], Rates],
                   window: Window, th: Thresholds) -> list[Finding]:
    """Apps whose prompts are mostly conversation history. The saving assumes history
    trimmed to half its average size (``on_overflow: trim_history`` or a summary)."""
    out: list[Finding] = []
    for row in group(rows, alias_key).values():
        if row.requests < th.min_requests or row.input_tokens <= 0:
            continue
        share = row.input_history / row.input_tokens
        tokens = int(window.per_month(row.input_history / 2))
        if share < th.history_share or tokens < th.min_tokens_per_month:
            continue
        growth = None
        if row.early_requests and row.late_requests and row.early_history:
            growth = round((row.late_history / row.late_requests)
                           / (row.early_history / row.early_requests), 2)
        out.append(Finding(
            kind="history_growth", tenant=row.tenant, app=row.app, model=row.model,
            title=(f"{share:.0%} of the prompt tokens of app '{row.app}' on '{row.model}' "
                   "are conversation history"),
            evidence={"query": evidence_query("advice_rollups", row, "bucket"),
                      "figures": {"requests": row.requests, "prompt_tokens": row.input_tokens,
                                  "history_tokens": row.input_history,
                                  "history_share": round(share, 4),
                                  "avg_history_per_request":
                                      round(row.input_history / row.requests, 1),
                                  "growth_later_half_over_earlier": growth,
                                  "history_dropped_tokens": row.history_dropped_tokens}},
            tokens_per_month=tokens,
            cost_micros_per_month=micros(tokens, rates(row.model).input),
            currency=row.currency,
            action=(f"Bound the history app '{row.app}' sends: keep the last turns and a "
                    "summary of older ones, or let the gateway trim it (context.on_overflow: "
                    "trim_history with a lower budget); the saving assumes half the history."),
        ))
    return out


def tool_output_bloat(rows: Iterable[Aggregate], rates: Callable[[str], Rates],
                      window: Window, th: Thresholds) -> list[Finding]:
    """Agent apps whose prompts are mostly earlier tool results (ledger v6 sessions
    columns). The saving assumes tool results cut to half (a tool-output policy)."""
    out: list[Finding] = []
    for row in group(rows, alias_key).values():
        if row.requests < th.min_requests or row.input_tokens <= 0:
            continue
        share = row.tool_output_tokens / row.input_tokens
        tokens = int(window.per_month(row.tool_output_tokens / 2))
        if share < th.tool_output_share or tokens < th.min_tokens_per_month:
            continue
        out.append(Finding(
            kind="tool_output_bloat", tenant=row.tenant, app=row.app, model=row.model,
            title=(f"{share:.0%} of the prompt tokens of agent app '{row.app}' are earlier "
                   "tool results"),
            evidence={"query": evidence_query("advice_rollups", row, "tenant, app, model"),
                      "figures": {"requests": row.requests, "prompt_tokens": row.input_tokens,
                                  "tool_output_tokens": row.tool_output_tokens,
                                  "tool_output_share": round(share, 4),
                                  "tool_output_removed": row.tool_output_removed}},
            tokens_per_month=tokens,
            cost_micros_per_month=micros(tokens, rates(row.model).input),
            currency=row.currency,
            action=(f"Cut old tool results in app '{row.app}' (keep the latest in full, "
                    "summarise or drop earlier ones: the sessions tool-output policy); the "
                    "saving assumes half of them."),
        ))
    return out
