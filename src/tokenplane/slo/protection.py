"""Admission that protects an SLO's error budget (off unless an SLO asks for it).

While an SLO burns faster than ``burn_rate`` over ``window`` (the worst of its SLIs),
the sheddable classes it names are admitted more strictly: at most ``gate_fraction``
of each replica's limits, no promotion with age, and shed (503 with ``retry-after``)
once they have waited ``max_wait``; the capacity they yield goes to the traffic the
SLO covers. It lets go once the burn is back at or under ``release_burn_rate``
(hysteresis, so it does not flap on the edge). Pure: an evaluator's tallies and
``now`` in, restrictions by class out; the gateway's hub and the simulator's
scheduler apply the same result."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tokenplane.config.slo_schema import SloProtectConfig
from tokenplane.scheduling.scheduler import ClassRestriction
from tokenplane.scheduling.slo import SloClass
from tokenplane.slo.budget import burn_rate
from tokenplane.slo.evaluator import SloEvaluator
from tokenplane.slo.spec import Slo


@dataclass(frozen=True, slots=True)
class ProtectSpec:
    slo: str
    classes: tuple[str, ...]
    burn_rate: float = 2.0
    release_burn_rate: float = 1.0
    window_s: float = 300.0
    gate_fraction: float = 0.1
    max_wait_s: float = 1.0


def protect_spec(slo: str, cfg: SloProtectConfig, classes: Mapping[str, SloClass]) -> ProtectSpec:
    """The spec of an SLO's ``protect:`` block; no ``classes`` means every sheddable one."""
    names = tuple(cfg.classes) if cfg.classes else tuple(
        sorted(n for n, c in classes.items() if c.sheddable))
    return ProtectSpec(slo, names, cfg.burn_rate, cfg.release_burn_rate, cfg.window,
                       cfg.gate_fraction, cfg.max_wait)


class BudgetProtection:
    def __init__(self, specs: Sequence[ProtectSpec], slos: Sequence[Slo]) -> None:
        by_name = {s.name: s for s in slos}
        self.specs = [(spec, by_name[spec.slo]) for spec in specs]
        self.engaged: dict[str, float] = {}  # SLO name -> burn when it engaged
        self.burns: dict[str, float] = {}  # SLO name -> burn at the last decision

    def burn(self, evaluator: SloEvaluator, slo: Slo, window_s: float, now: float) -> float:
        return max((burn_rate(evaluator.tally(slo.name, sli.label).window(now, window_s),
                              slo.objective) for sli in slo.slis), default=0.0)

    def decide(self, evaluator: SloEvaluator, now: float) -> dict[str, ClassRestriction]:
        """The restriction of each class now (the strictest where SLOs overlap)."""
        out: dict[str, ClassRestriction] = {}
        for spec, slo in self.specs:
            b = self.burn(evaluator, slo, spec.window_s, now)
            self.burns[slo.name] = b
            if slo.name in self.engaged:
                if b <= spec.release_burn_rate:
                    del self.engaged[slo.name]
            elif b > spec.burn_rate:
                self.engaged[slo.name] = b
            if slo.name not in self.engaged:
                continue
            for cls in spec.classes:
                prev = out.get(cls)
                out[cls] = ClassRestriction(
                    min(spec.gate_fraction, prev.gate_fraction) if prev else spec.gate_fraction,
                    min(spec.max_wait_s, prev.max_wait_s) if prev else spec.max_wait_s,
                )
        return out
