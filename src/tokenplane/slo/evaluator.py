"""Every SLO's state from the requests it selects: the policy that ``tokenplane slo
status``, ``GET /admin/v1/slos`` and the alert loop read.

``observe`` judges a finished request for every SLI of every SLO that selects it
and adds it to that SLI's bucket tally; ``status(now)`` returns, per SLO and SLI, the
SLI over the SLO's window, the error budget left (as a share and in bad events), the
burn rate over each alert rule's windows, and the alerts that fire."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tokenplane.slo.alerts import Firing, evaluate_rule
from tokenplane.slo.budget import BudgetState, budget, burn_rate
from tokenplane.slo.spec import Slo
from tokenplane.slo.tally import BucketTally
from tokenplane.slo.verdict import RequestFacts, verdicts


@dataclass(frozen=True, slots=True)
class SliStatus:
    slo: str
    sli: str
    threshold_s: float | None
    objective: float
    window_s: float
    budget: BudgetState
    burn: dict[float, float]  # window seconds -> burn rate over it
    firing: tuple[Firing, ...]

    def as_dict(self) -> dict[str, object]:
        b = self.budget
        return {
            "slo": self.slo,
            "sli": self.sli,
            "threshold_s": self.threshold_s,
            "objective": self.objective,
            "window_s": self.window_s,
            "valid": b.valid,
            "bad": b.bad,
            "sli_ratio": b.sli,
            "budget_remaining": b.remaining,
            "bad_events_left": b.bad_left,
            "burn_rates": {span_name(w): r for w, r in sorted(self.burn.items())},
            "alerts": [
                {"severity": f.key.severity, "long_window": span_name(f.key.long_s),
                 "short_window": span_name(f.key.short_s), "threshold": f.threshold,
                 "long_burn": f.long_burn, "short_burn": f.short_burn}
                for f in self.firing
            ],
        }


def span_name(seconds: float) -> str:
    """``5m``, ``1h``, ``3d``: a window as Prometheus writes durations."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{round(seconds * 1000)}ms"


class SloEvaluator:
    def __init__(
        self, slos: Sequence[Slo], bucket_s: float = 60.0, by_version: Iterable[str] = ()
    ) -> None:
        self.slos = tuple(slos)
        self.bucket_s = bucket_s
        self._tallies = {
            (slo.name, sli.label): BucketTally(bucket_s) for slo in self.slos for sli in slo.slis
        }
        # SLOs that guard a canary also keep a tally per model version
        self.by_version = frozenset(by_version)
        self._versions: dict[tuple[str, str, str], BucketTally] = {}

    def observe(self, facts: RequestFacts, sign: int = 1) -> None:
        """Count a finished request (``sign=-1`` takes a counted one back)."""
        for slo in self.slos:
            for sli, bad in verdicts(slo, facts):
                self._tallies[(slo.name, sli.label)].add(facts.ts, bad=bad, count=sign)
                if facts.version and slo.name in self.by_version:
                    self.version_tally(slo.name, sli.label, facts.version).add(
                        facts.ts, bad=bad, count=sign)

    def observe_all(self, facts: Iterable[RequestFacts]) -> None:
        for f in facts:
            self.observe(f)

    def tally(self, slo: str, sli: str) -> BucketTally:
        return self._tallies[(slo, sli)]

    def version_tally(self, slo: str, sli: str, version: str) -> BucketTally:
        key = (slo, sli, version)
        tally = self._versions.get(key)
        if tally is None:
            tally = self._versions[key] = BucketTally(self.bucket_s)
        return tally

    def status(self, now: float, names: Iterable[str] | None = None) -> list[SliStatus]:
        wanted = None if names is None else set(names)
        out = []
        for slo in self.slos:
            if wanted is not None and slo.name not in wanted:
                continue
            for sli in slo.slis:
                tally = self._tallies[(slo.name, sli.label)]
                spans = sorted({s for r in slo.rules for s in (r.long_s, r.short_s)})
                burns = {s: burn_rate(tally.window(now, s), slo.objective) for s in spans}
                firing = tuple(
                    hit for rule in slo.rules
                    if (hit := evaluate_rule(slo, sli.label, rule, tally, now)) is not None
                )
                out.append(SliStatus(
                    slo=slo.name, sli=sli.label, threshold_s=sli.threshold_s,
                    objective=slo.objective, window_s=slo.window_s,
                    budget=budget(tally.window(now, slo.window_s), slo.objective),
                    burn=burns, firing=firing,
                ))
        return out

    def tallies(self) -> list[tuple[str, str, str, BucketTally]]:
        """Every tally as ``(slo, sli, version, tally)``; version "" is the SLO's own,
        the others are a canary guard's per-version tallies."""
        out = [(slo, sli, "", t) for (slo, sli), t in self._tallies.items()]
        out += [(slo, sli, v, t) for (slo, sli, v), t in self._versions.items()]
        return out

    def load_bucket(self, slo: str, sli: str, version: str, bucket: int, valid: int,
                    bad: int) -> None:
        """Add a whole bucket counted before (the durable minutes, slo/minutes.py)."""
        if (slo, sli) not in self._tallies:
            return
        tally = self.version_tally(slo, sli, version) if version else self._tallies[(slo, sli)]
        tally.add_bucket(bucket, valid, bad)

    def prune(self, now: float) -> None:
        """Forget buckets older than every SLO's window."""
        for slo in self.slos:
            for sli in slo.slis:
                self._tallies[(slo.name, sli.label)].prune(now - slo.window_s)
        windows = {s.name: s.window_s for s in self.slos}
        for (slo_name, _, _), tally in self._versions.items():
            tally.prune(now - windows[slo_name])
