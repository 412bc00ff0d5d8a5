"""Multi-window, multi-burn-rate alerting (the SRE workbook, chapter 5).

A rule fires while the burn rate is above its threshold over its long window (enough
budget has gone to matter) AND over its short window (it is still going on, so the
alert resolves soon after the incident ends). ``BurnAlerter`` evaluates every rule of
every SLI of an SLO from a ``BucketTally`` per SLI and ``now``, and returns which
alerts fire, with the evidence; ``AlertBook`` turns successive evaluations into
firing and resolved transitions, the notifications to send."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tokenplane.slo.budget import burn_rate
from tokenplane.slo.spec import BurnRule, Slo
from tokenplane.slo.tally import BucketTally, Tally


@dataclass(frozen=True, slots=True)
class AlertKey:
    slo: str
    sli: str
    severity: str
    long_s: float
    short_s: float


@dataclass(frozen=True, slots=True)
class Firing:
    key: AlertKey
    threshold: float
    long_burn: float
    short_burn: float
    long_tally: Tally
    short_tally: Tally


@dataclass(frozen=True, slots=True)
class Transition:
    """``state`` is ``firing`` or ``resolved``; ``since`` when it started firing."""

    state: str
    firing: Firing
    since: float
    at: float


def evaluate_rule(
    slo: Slo, sli: str, rule: BurnRule, tally: BucketTally, now: float,
    min_valid: int = 1,
) -> Firing | None:
    long_t = tally.window(now, rule.long_s)
    short_t = tally.window(now, rule.short_s)
    if long_t.valid < min_valid or short_t.valid == 0:
        return None
    long_b = burn_rate(long_t, slo.objective)
    short_b = burn_rate(short_t, slo.objective)
    if long_b <= rule.burn_rate or short_b <= rule.burn_rate:
        return None
    key = AlertKey(slo.name, sli, rule.severity, rule.long_s, rule.short_s)
    return Firing(key, rule.burn_rate, long_b, short_b, long_t, short_t)


def evaluate(
    slo: Slo, tallies: Mapping[str, BucketTally], now: float, min_valid: int = 1
) -> list[Firing]:
    """Every alert of ``slo`` that fires at ``now`` (``tallies`` by SLI label)."""
    out = []
    for sli in slo.slis:
        tally = tallies.get(sli.label)
        if tally is None:
            continue
        for rule in slo.rules:
            hit = evaluate_rule(slo, sli.label, rule, tally, now, min_valid)
            if hit is not None:
                out.append(hit)
    return out


class AlertBook:
    """Which alerts are firing, and since when; ``update`` returns the transitions."""

    def __init__(self) -> None:
        self._firing: dict[AlertKey, tuple[Firing, float]] = {}

    def update(self, firing: Iterable[Firing], now: float) -> list[Transition]:
        current = {f.key: f for f in firing}
        out: list[Transition] = []
        for key, f in current.items():
            if key not in self._firing:
                self._firing[key] = (f, now)
                out.append(Transition("firing", f, now, now))
            else:
                self._firing[key] = (f, self._firing[key][1])
        for key in [k for k in self._firing if k not in current]:
            f, since = self._firing.pop(key)
            out.append(Transition("resolved", f, since, now))
        return out

    def active(self) -> list[tuple[Firing, float]]:
        return list(self._firing.values())
