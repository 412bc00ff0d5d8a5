"""Runs a set of recognizers over a text and resolves overlapping findings."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tokenplane.governance.custom import recognizer_from_spec
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
        spans: list[Span] = []
        plan = self._planned()
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
