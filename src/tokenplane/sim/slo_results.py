"""SLOs judged on a simulated run: the same verdicts, budgets and burn arithmetic the
gateway uses, over every request of one load point.

A simulated request is a stream of model ``alias`` (the config's first alias, unless
named; ``RequestRecord.facts``); it succeeded when it finished, and a request the
gateway shed answers 503 (an availability fault). TTFT, TPOT and the whole request's
latency come from the simulated clock; since every simulated request streams, a
``latency`` SLI counts the streamed requests too (in the gateway it counts only
non-stream ones)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tokenplane.sim.cluster import RequestRecord
from tokenplane.slo.budget import budget, burn_rate
from tokenplane.slo.spec import Sli, SliKind, Slo
from tokenplane.slo.tally import Tally
from tokenplane.slo.verdict import RequestFacts, Verdict, judge


def slo_results(
    slos: Sequence[Slo], records: Sequence[RequestRecord], alias: str
) -> dict[str, Any]:
    """Per SLO and SLI: valid and bad events, the SLI, whether it met its objective,
    the share of a window's budget this run would spend and the burn rate over it."""
    return slo_tallies(slos, [r.facts(alias) for r in records], latency_all=True)


def slo_tallies(
    slos: Sequence[Slo], facts: Sequence[RequestFacts], *, latency_all: bool = False
) -> dict[str, Any]:
    """:func:`slo_results` over requests' facts as they are (replay: each request
    keeps whether it streamed); ``latency_all`` judges a ``latency`` SLI on every
    request, streamed or not (the simulator's own requests all stream)."""
    out: dict[str, Any] = {}
    for slo in slos:
        per_sli: dict[str, Any] = {}
        for sli in slo.slis:
            valid = bad = 0
            for f in facts:
                if not slo.selector.selects(f.model, f.tenant, f.department, f.app,
                                            f.slo_class):
                    continue
                v = _judge(sli, f) if latency_all else judge(sli, f)
                if v is Verdict.NOT_VALID:
                    continue
                valid += 1
                bad += v is Verdict.BAD
            b = budget(Tally(valid, bad), slo.objective)
            per_sli[sli.label] = {
                "valid": valid, "bad": bad, "sli": b.sli, "objective": slo.objective,
                "met": b.sli >= slo.objective, "budget_spent": 1.0 - b.remaining,
                "burn_rate": burn_rate(Tally(valid, bad), slo.objective),
            }
        out[slo.name] = per_sli
    return out


def _judge(sli: Sli, f: RequestFacts) -> Verdict:
    if sli.kind is SliKind.LATENCY:  # every simulated request streams: judge e2e for all
        f = replace(f, stream=False)
    return judge(sli, f)
