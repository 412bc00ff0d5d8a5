"""Live SLO event counters: every finished request, judged as it ends.

The gateway's finisher hands each request's facts to ``SloCounters``; the counts are
monotonic (good and bad events per SLO and SLI since start), exported as
``tokenplane_slo_events_total`` for Prometheus to rate over any window (the rules of
``tokenplane slo rules`` do). With no SLO configured nothing is judged."""

from __future__ import annotations

from collections.abc import Sequence

from tokenplane.slo.spec import Slo
from tokenplane.slo.verdict import RequestFacts, verdicts


class SloCounters:
    def __init__(self, slos: Sequence[Slo]) -> None:
        self.slos = tuple(slos)
        self.counts: dict[tuple[str, str, str], int] = {
            (slo.name, sli.label, v): 0
            for slo in self.slos for sli in slo.slis for v in ("good", "bad")
        }

    def record(self, facts: RequestFacts) -> None:
        for slo in self.slos:
            for sli, bad in verdicts(slo, facts):
                self.counts[(slo.name, sli.label, "bad" if bad else "good")] += 1
