"""Durable minutes: an SLI's one-minute counts, kept so that a restart (or the hourly
rebuild) reads the ledger's raw rows for the last hour or so instead of a whole
30-day window.

A minute is **sealed** once it is ``seal_s`` old (an hour by default): by then every
attempt of its requests has reached the ledger (a retry follows its failure within
seconds, a dead worker's journal is adopted by a sibling within seconds), so the
evaluator's counts for it are final. Sealed minutes are written with their
definition's **key**: a hash of what decides each verdict (the SLO's name, selector,
the SLI's kind and threshold). Changing any of these starts the SLI afresh from the
raw rows (its old minutes no longer match); changing only the objective, window or
alert rules keeps them. Pure: which minutes to write and what to load; the table is
``slo_minutes`` (ledger migration 8, ``slo/gateway/minutes_store.py``)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from tokenplane.slo.evaluator import SloEvaluator
from tokenplane.slo.spec import Sli, Slo

DEFAULT_SEAL_S = 3600.0


def definition_key(slo: Slo, sli: Sli) -> str:
    """What decides the SLI's verdicts, hashed (16 hex digits)."""
    sel = slo.selector
    text = "\x1f".join(str(v) for v in (
        slo.name, sel.model, sel.tenant, sel.department, sel.app, sel.slo_class,
        sli.kind.value, sli.threshold_s))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Minute:
    key: str  # definition_key
    slo: str
    sli: str
    version: str  # "" for the SLO's own tally
    minute: int  # bucket index (epoch seconds // 60)
    valid: int
    bad: int


class MinuteBook:
    """Which of an evaluator's minutes to seal, and the keys of its SLIs."""

    def __init__(self, slos: Iterable[Slo], seal_s: float = DEFAULT_SEAL_S) -> None:
        self.slos = tuple(slos)
        self.seal_s = seal_s
        self.keys = {(s.name, sli.label): definition_key(s, sli)
                     for s in self.slos for sli in s.slis}

    def sealed_before(self, now: float, bucket_s: float) -> int:
        """The first bucket that is not sealed at ``now``."""
        return int((now - self.seal_s) // bucket_s)

    def to_seal(self, evaluator: SloEvaluator, first: int, end: int) -> Iterator[Minute]:
        """Every counted bucket in ``[first, end)`` of every tally, and for each SLI
        whose own tally has no count in the last of them, an empty minute there: it
        marks the SLI as sealed through ``end`` (see :meth:`resume`)."""
        for slo, sli, version, tally in evaluator.tallies():
            key = self.keys.get((slo, sli))
            if key is None:
                continue
            counted = tally.buckets(first, end - 1)
            yield from (Minute(key, slo, sli, version, b, v, bad) for b, v, bad in counted)
            if not version and end > first and (not counted or counted[-1][0] != end - 1):
                yield Minute(key, slo, sli, "", end - 1, 0, 0)

    def resume(self, stored: Iterable[Minute]) -> int | None:
        """The first bucket every current SLI still needs from the raw rows: one past
        the oldest of their last sealed minutes; None when an SLI has none (it is new,
        or its definition changed), so the whole window must be read."""
        last: dict[str, int] = {}
        for m in stored:
            if not m.version and m.minute > last.get(m.key, -1):
                last[m.key] = m.minute
        ends = [last.get(k) for k in self.keys.values()]
        if not ends or any(e is None for e in ends):
            return None
        return min(e for e in ends if e is not None) + 1

    def load(self, evaluator: SloEvaluator, minutes: Iterable[Minute], before: int) -> int:
        """Add the stored minutes older than bucket ``before`` whose key is current;
        how many were taken."""
        taken = 0
        for m in minutes:
            if m.minute < before and self.keys.get((m.slo, m.sli)) == m.key:
                evaluator.load_bucket(m.slo, m.sli, m.version, m.minute, m.valid, m.bad)
                taken += 1
        return taken
