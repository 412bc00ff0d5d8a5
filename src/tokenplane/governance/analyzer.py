"""Runs a set of recognizers over a text and resolves overlapping findings."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tokenplane.governance.custom import recognizer_from_spec
from tokenplane.governance.gate import Gate, TextGate
from tokenplane.governance.prechecks import Need
from tokenplane.governance.recognizers_cn import cn_recognizers
from tokenplane.governance.recognizers_intl import intl_recognizers
from tokenplane.governance.recognizers_secrets import secret_recognizers
from tokenplane.governance.spans import Recognizer, Span, resolve_overlaps

DEFAULT_MIN_SCORE = 0.5
_NOT_DIGITS = re.compile(r"\D+")


def builtin_recognizers() -> list[Recognizer]:
    """Every built-in recognizer: mainland China, international and secrets."""
    return [*cn_recognizers(), *intl_recognizers(), *secret_recognizers()]


class Analyzer:
    """Finds PII and secrets with a set of recognizers.

    Overlaps are resolved by the highest score, then the longest span. Spans
    under ``min_score`` are dropped. ``entities`` (optional) limits the
    entity types reported.

    Before any recognizer runs, one joined search of their gates (see
    governance/gate.py) proves for most texts that none of them can match: the
    common case of ordinary prose then costs a few C-level scans.
    """

    def __init__(
        self,
        recognizers: Iterable[Recognizer] | None = None,
        *,
        min_score: float = DEFAULT_MIN_SCORE,
        entities: Iterable[str] | None = None,
    ) -> None:
        self.recognizers: list[Recognizer] = (
            list(recognizers) if recognizers is not None else builtin_recognizers()
        )
        self.min_score = min_score
        wanted = frozenset(entities) if entities is not None else None
        if wanted is not None:
            self.recognizers = [r for r in self.recognizers if any(e in wanted for e in r.entities)]
        self._wanted = wanted
        self._plan_for: list[Recognizer] | None = None
        self._plan: list[tuple[Recognizer, int, int]] = []
        self._tests: list[re.Pattern[str]] = []
        self._gate_for: list[Recognizer] | None = None
        self._gate = TextGate((), (), ())

    def _planned(self) -> list[tuple[Recognizer, int, int]]:
        """Each recognizer with the index of the character test it needs (-1: none)
        and the digits it needs; one test per distinct :class:`Need` (rebuilt if
        ``recognizers`` is replaced)."""
        if self._plan_for is not self.recognizers:
            tests: dict[Need, int] = {}
            plan: list[tuple[Recognizer, int, int]] = []
            for r in self.recognizers:
                need = getattr(r, "need", None)
                digits = getattr(r, "min_digits", 0)
                plan.append((r, tests.setdefault(need, len(tests))
                             if isinstance(need, Need) else -1,
                             digits if isinstance(digits, int) else 0))
            self._tests = [need.regex() for need in tests]
            self._plan, self._plan_for = plan, self.recognizers
        return self._plan

    def _gated(self) -> TextGate:
        """The joined gates of ``recognizers`` (rebuilt if it is replaced)."""
        if self._gate_for is not self.recognizers:
            recognizers = self.recognizers
            gates = [getattr(r, "gate", None) for r in recognizers]
            self._gate = TextGate.of([g if isinstance(g, Gate) else None for g in gates])
            self._gate_for = recognizers
        return self._gate

    @classmethod
    def from_config(cls, spec: Mapping[str, Any]) -> Analyzer:
        """Build from a dict: ``builtin`` (bool, default true), ``custom`` (list of
        recognizer specs), ``min_score``, ``entities`` (list), ``presidio`` (bool)."""
        recognizers: list[Recognizer] = []
        if spec.get("builtin", True):
            recognizers.extend(builtin_recognizers())
        for item in spec.get("custom", ()) or ():
            recognizers.append(recognizer_from_spec(item))
        if spec.get("presidio", False):
            from tokenplane.governance.presidio_adapter import maybe_presidio

            presidio = maybe_presidio()
            if presidio is not None:
                recognizers.append(presidio)
        entities: Sequence[str] | None = spec.get("entities")
        return cls(
            recognizers,
            min_score=float(spec.get("min_score", DEFAULT_MIN_SCORE)),
            entities=entities,
        )

    def analyze(self, text: str) -> list[Span]:
        """Non-overlapping findings ordered by position."""
        if not text:
            return []
        gate = self._gated()
        if not gate.clear(text):
            return self._run(text, self._planned())
        if gate.covers_all:  # no recognizer can find anything here
            return []
        plan = self._planned()  # only those without a gate
        return self._run(text, [p for p, on in zip(plan, gate.gated, strict=True) if not on])

    def nothing_in(self, text: str) -> bool:
        """True only when ``analyze(text)`` finds nothing; here: when the gates prove
        that no recognizer can find anything (False says nothing either way)."""
        gate = self._gate if self._gate_for is self.recognizers else self._gated()
        return gate.covers_all and gate.clear(text)

    def analyze_full(self, text: str) -> list[Span]:
        """The same findings without the gate (every recognizer's own checks only)."""
        if not text:
            return []
        return self._run(text, self._planned())

    def _run(self, text: str, plan: list[tuple[Recognizer, int, int]]) -> list[Span]:
        spans: list[Span] = []
        tests = self._tests
        present: list[bool | None] = [None] * len(tests)
        digits = -1
        for recognizer, test, need_digits in plan:
            if test >= 0:
                ok = present[test]
                if ok is None:
                    ok = present[test] = tests[test].search(text) is not None
                if not ok:
                    continue  # it needs characters the text does not have
            if need_digits:
                if digits < 0:
                    digits = len(_NOT_DIGITS.sub("", text))
                if digits < need_digits:
                    continue  # its matches have more digits than the whole text
            spans.extend(recognizer.find(text))
        if self._wanted is not None:
            spans = [s for s in spans if s.entity_type in self._wanted]
        return resolve_overlaps(spans, self.min_score)
