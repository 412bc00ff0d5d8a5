"""Live SLO event counters: every finished request, judged as it ends.

The gateway's finisher hands each request's facts to ``SloCounters``; the counts are
monotonic (good and bad events per SLO and SLI since start), exported as
``tokenplane_slo_events_total`` for Prometheus to rate over any window (the rules of
``tokenplane slo rules`` do). With no SLO configured nothing is judged."""

from __future__ import annotations

from collections.abc import Sequence

from tokenplane.slo.spec import Slo
from tokenplane.slo.verdict import RequestFacts, Verdict, judge


class SloCounters:
    def __init__(self, slos: Sequence[Slo]) -> None:
        self.slos = tuple(slos)
        self.counts: dict[tuple[str, str, str], int] = {
            (slo.name, sli.label, v): 0
            for slo in self.slos for sli in slo.slis for v in ("good", "bad")
        }

    def record(self, facts: RequestFacts) -> None:
        for slo in self.slos:
            if not slo.selector.selects(
                facts.model, facts.tenant, facts.department, facts.app, facts.slo_class
            ):
                continue
            for sli in slo.slis:
                verdict = judge(sli, facts)
                if verdict is Verdict.GOOD:
                    self.counts[(slo.name, sli.label, "good")] += 1
                elif verdict is Verdict.BAD:
                    self.counts[(slo.name, sli.label, "bad")] += 1
