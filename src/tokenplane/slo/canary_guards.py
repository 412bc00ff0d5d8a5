"""Every configured canary guard, judged after each evaluation round.

``step`` judges each guard that has not tripped yet on every SLI of its SLO (the
canary's and the stable version's tallies over the guard's window); the first SLI that
condemns the canary trips the guard: ``rollback`` is called (the gateway moves the
split's weight to the stable version) and the decision, with its evidence, is
returned to be recorded and announced. A tripped guard stays tripped until the
gateway restarts with the split in its config again (docs/SLO.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tokenplane.slo.canary import CanaryGuardSpec, CanaryVerdict, judge
from tokenplane.slo.evaluator import SloEvaluator
from tokenplane.slo.spec import Slo


@dataclass(frozen=True, slots=True)
class GuardDecision:
    spec: CanaryGuardSpec
    verdict: CanaryVerdict
    at: float

    def as_dict(self) -> dict[str, object]:
        s = self.spec
        return {"alias": s.alias, "slo": s.slo, "stable": s.stable, "canary": s.canary,
                "rolled_back": self.verdict.rollback, "at": self.at,
                "evidence": self.verdict.evidence()}


class CanaryGuards:
    def __init__(
        self, specs: Sequence[CanaryGuardSpec], slos: Sequence[Slo],
        rollback: Callable[[CanaryGuardSpec], None],
    ) -> None:
        by_name = {s.name: s for s in slos}
        self.guards = [(spec, by_name[spec.slo]) for spec in specs]
        self.rollback = rollback
        self.tripped: dict[str, GuardDecision] = {}  # by alias
        self.latest: dict[str, GuardDecision] = {}  # each guard's last look, by alias

    @property
    def slo_names(self) -> frozenset[str]:
        return frozenset(slo.name for _, slo in self.guards)

    def step(self, evaluator: SloEvaluator, now: float) -> list[GuardDecision]:
        tripped_now = []
        for spec, slo in self.guards:
            if spec.alias in self.tripped:
                continue
            last: GuardDecision | None = None
            for sli in slo.slis:
                canary = evaluator.version_tally(slo.name, sli.label, spec.canary)
                stable = evaluator.version_tally(slo.name, sli.label, spec.stable)
                verdict = judge(spec, slo.objective, sli.label,
                                canary.window(now, spec.window_s),
                                stable.window(now, spec.window_s))
                last = GuardDecision(spec, verdict, now)
                if verdict.rollback:
                    break
            if last is None:
                continue
            self.latest[spec.alias] = last
            if last.verdict.rollback:
                self.tripped[spec.alias] = last
                self.rollback(spec)
                tripped_now.append(last)
        return tripped_now
