"""All the advisor's analyses over one set of aggregates; findings by saving."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from tokenplane.advice.caching import cacheable_prefixes
from tokenplane.advice.flows import context_kept, history_growth, tool_output_bloat
from tokenplane.advice.model import (
    Aggregate,
    FeedbackAggregate,
    Finding,
    Rates,
    Thresholds,
    Window,
)
from tokenplane.advice.rightsizing import right_sizing
from tokenplane.advice.rows import alias_key, group
from tokenplane.advice.templates import template_waste
from tokenplane.advice.tool_calls import ToolAggregate, repeated_calls, unused_results
from tokenplane.advice.verbose import verbose_outputs
from tokenplane.advice.versions import version_efficiency

KINDS: tuple[str, ...] = (
    "template_waste", "cacheable_prefixes", "verbose_outputs", "version_efficiency",
    "right_sizing", "context_dropped", "history_growth", "tool_output_bloat",
    "tool_repeat_calls", "tool_results_dropped",
)


@dataclass(slots=True)
class Advice:
    findings: list[Finding]
    not_evaluated: dict[str, str] = field(default_factory=dict)  # kind -> why


def advise(rows: Sequence[Aggregate], feedback: Iterable[FeedbackAggregate],
           rates: Callable[[str], Rates], window: Window,
           thresholds: Thresholds | None = None,
           missing: dict[str, str] | None = None,
           tools: Sequence[ToolAggregate] | None = None) -> Advice:
    """Every finding the aggregates support, the biggest money saving first (then
    tokens). ``missing``: kinds whose data the ledger lacks (kind -> why), skipped.
    ``tools``: the MCP tools' aggregates from the audit log (None: no MCP gateway, so
    nothing to judge)."""
    th = thresholds or Thresholds()
    skip = dict(missing or {})
    found: list[Finding] = []
    # the analyses by app and alias read these sums (summed once; each analysis groups
    # again, which on rows of one alias each costs a copy per row)
    per_alias = list(group(rows, alias_key).values())
    analyses = {
        "template_waste": (template_waste, rows), "version_efficiency":
        (version_efficiency, rows), "cacheable_prefixes": (cacheable_prefixes, per_alias),
        "verbose_outputs": (verbose_outputs, per_alias),
        "context_dropped": (context_kept, per_alias),
        "history_growth": (history_growth, per_alias),
        "tool_output_bloat": (tool_output_bloat, per_alias),
    }
    for kind, (analyse, data) in analyses.items():
        if kind not in skip:
            found.extend(analyse(data, rates, window, th))
    if "right_sizing" not in skip:
        found.extend(right_sizing(per_alias, feedback, rates, window, th))
    if tools is not None:
        if "tool_repeat_calls" not in skip:
            found.extend(repeated_calls(tools, rates, window, th))
        if "tool_results_dropped" not in skip:
            found.extend(unused_results(tools, rates, window, th))
    found.sort(key=lambda f: (-f.cost_micros_per_month, -f.tokens_per_month, f.kind,
                              f.tenant, f.app, f.model, f.title))
    return Advice(found, skip)
